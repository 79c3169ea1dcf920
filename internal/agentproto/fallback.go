package agentproto

// Why gate-client handed a call to gate-hook instead of the sidecar: the value of gate-hook's
// --fallback-reason, and of a FallbackRecord's reason. The sidecar counts fallbacks by these.
const (
	// FallbackUnreachable: the socket is absent, or refused or reset the connection.
	FallbackUnreachable = "sidecar-unreachable"
	// FallbackTimeout: the sidecar did not answer within the client's deadline.
	FallbackTimeout = "sidecar-timeout"
	// FallbackGarbage: the answer was malformed, cut short, oversized, or for another nonce.
	FallbackGarbage = "sidecar-garbage"
	// FallbackVersion: the sidecar decided with another version of the policy volume than the
	// one the client saw.
	FallbackVersion = "sidecar-version"
	// FallbackNoVolume: the bundle directory is not a kubelet volume (it has no ..data), so there
	// is no version to ask the sidecar about.
	FallbackNoVolume = "no-volume"
	// FallbackArgs: gate-hook's arguments hold something the client does not forward as it is
	// (an unknown flag, a repeated one, a token or workspace of "-"); gate-hook judges them.
	FallbackArgs = "client-args"
	// FallbackInputTooLarge: the hook input is larger than MaxInput; gate-hook refuses it.
	FallbackInputTooLarge = "input-too-large"
)

// KnownFallbackReason reports whether reason is one of the Fallback* codes.
func KnownFallbackReason(reason string) bool {
	switch reason {
	case FallbackUnreachable, FallbackTimeout, FallbackGarbage, FallbackVersion, FallbackNoVolume, FallbackArgs, FallbackInputTooLarge:
		return true
	}
	return false
}

// FallbackRecord is one line of the fallback spool (JSON, one object per line): a decision
// gate-hook made because gate-client handed it the call. gate-hook writes it as the agent's
// user, so the sidecar reads it as untrusted: it reports what the line says, marked so.
// It never holds the tool input, only its size and SHA-256.
type FallbackRecord struct {
	// Time is when gate-hook decided, RFC 3339 with nanoseconds, UTC.
	Time string `json:"time"`
	// Reason is the Fallback* code gate-client gave ("unknown" when it gave another).
	Reason      string `json:"reason"`
	Verdict     string `json:"verdict"`
	Enforcement string `json:"enforcement"`
	Code        string `json:"code,omitempty"`
	Rule        string `json:"rule,omitempty"`
	Layer       string `json:"layer,omitempty"`
	// Runtime is the hook contract gate-hook answered in (its --runtime); absent in lines of a
	// gate-hook from before Codex and Gemini CLI, which answered Claude Code only.
	Runtime string `json:"runtime,omitempty"`
	// Tool is the call's canonical tool name, when its input could be read.
	Tool        string `json:"tool,omitempty"`
	InputBytes  int    `json:"input_bytes"`
	InputSHA256 string `json:"input_sha256"`
	// Digest is the digest of the snapshot that decided, when one did.
	Digest     string `json:"digest,omitempty"`
	IncidentID string `json:"incident_id,omitempty"`
}

// MaxFallbackLine bounds one spool line, newline included; the sidecar skips longer ones.
const MaxFallbackLine = 8 << 10
