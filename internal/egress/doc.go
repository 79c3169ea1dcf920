// Package egress renders a HarnessAgentPolicy's egress NetworkPolicy and resolves its allowed
// hosts: the metadata and platform ranges always carved out (MetadataCIDRs), the DNS answers
// an allowed host may and may not open, and re-resolution at the records' TTL. Rendering is
// pure; resolution is behind the Resolver interface, so tests inject their own.
package egress
