package gate

import (
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Caller is who makes a call, as far as the surface it arrives on can tell; the rules see it as
// `caller` (docs/policy-language.md has the table of which surface fills which field, and how
// far each can be trusted). A field the surface cannot tell is "", never an error, so a rule
// reading it evaluates the same way whether the surface knows it or not.
type Caller struct {
	// Namespace and Policy are the namespace and name of the policy that decides the call, from
	// its snapshot. The gate sets them on every surface; a surface's own values are ignored.
	Namespace string `json:"namespace" cel:"namespace"`
	Policy    string `json:"policy" cel:"policy"`
	// ServiceAccount is namespace/name of the gate HTTP API's caller, as TokenReview
	// authenticated it.
	ServiceAccount string `json:"serviceAccount" cel:"serviceAccount"`
	// Pod is the name of the hook's pod (PodCaller).
	Pod string `json:"pod" cel:"pod"`
	// Agent is the Managed Agents agent whose session made the call.
	Agent string `json:"agent" cel:"agent"`
	// Session is the call's session, Call.Session: the gate sets it.
	Session string `json:"session" cel:"session"`
}

// splitPolicy splits a snapshot's policy, <namespace>/<name>, into its parts; a policy with no
// namespace is all name.
func splitPolicy(policy string) (namespace, name string) {
	if ns, n, ok := strings.Cut(policy, "/"); ok {
		return ns, n
	}
	return "", policy
}

// ReadsCaller reports whether a rule of the policy in force reads `caller`, so a surface for
// which a caller's identity costs a lookup (the Managed Agents confirmer asks the Sessions API
// for a session's agent) looks it up only when a rule needs it. With no policy in force, false:
// every call is refused anyway.
func (g *Gate) ReadsCaller() bool {
	st := g.state.Load()
	if st.layered != nil {
		return st.layered.readsCaller()
	}
	return st.policy != nil && st.policy.readsCaller
}

// PodNameFile is where the hook's pod finds its own name: beside the snapshot (in the directory
// of the --snapshot file), as a downwardAPI item (metadata.name) of the projected volume that
// mounts the bootstrap ConfigMap (docs/examples/sandbox-pod.yaml). It is read from there, never
// from the environment, and only from that directory, which in a pod is a read-only volume the
// kubelet writes: the agent can no more plant or change it than it can the snapshot. A pod that
// mounts the ConfigMap alone has no such file (the ConfigMap has no such key), and its caller's
// pod is "".
const PodNameFile = "pod/name"

// PodCaller is the caller of the hook whose snapshot is in dir: the pod's name from PodNameFile,
// "" when the file is absent, unreadable or does not hold a DNS subdomain name. (The pod's
// namespace is the policy's, which the gate sets: a ConfigMap is mounted only in its own
// namespace. Its ServiceAccount is not told: the downward API gives spec.serviceAccountName
// only as an environment variable, which the hook does not read.)
func PodCaller(dir string) Caller {
	return Caller{Pod: readName(filepath.Join(dir, PodNameFile))}
}

// maxNameLen is the longest DNS subdomain name, the longest a pod or ServiceAccount name can be.
const maxNameLen = 253

// readName reads a Kubernetes object name from a file: exactly the file's bytes (the kubelet
// writes no newline), or "" when they are not a DNS subdomain name.
func readName(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxNameLen+1))
	if err != nil || !isDNSSubdomain(b) {
		return ""
	}
	return string(b)
}

// isDNSSubdomain reports whether b is a DNS subdomain name (RFC 1123), as Kubernetes names pods
// and ServiceAccounts: at most 253 characters, dot-separated labels of lower-case letters,
// digits and '-', each starting and ending with a letter or digit.
func isDNSSubdomain(b []byte) bool {
	if len(b) == 0 || len(b) > maxNameLen {
		return false
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
	for label := range strings.SplitSeq(string(b), ".") {
		if label == "" || !alnum(label[0]) || !alnum(label[len(label)-1]) {
			return false
		}
		for i := range len(label) {
			if c := label[i]; !alnum(c) && c != '-' {
				return false
			}
		}
	}
	return true
}
