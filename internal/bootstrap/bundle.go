// Package bootstrap renders the bootstrap bundle a HarnessAgentPolicy puts into its sandbox
// pods: the rules snapshot, the hook wrapper, Claude Code's managed and project settings, the
// recommended harness settings and network policy, and the bootstrap hash. Build is the one
// recipe (the controller and the conformance suite call it). Everything here is pure: the same
// inputs give the same bytes, so the controller writes only when something changed. The egress
// NetworkPolicy is internal/egress's.
package bootstrap

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"path"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/gate"
)

// ConfigMap keys of the bundle.
const (
	KeySnapshot        = gate.SnapshotFileName
	KeyHookScript      = "gate-hook.sh"
	KeyManagedSettings = "managed-settings.json"
	KeySettings        = "settings.json"
	// KeyHarnessSettings is a value to spread into @ai-sdk/harness's HarnessAgentSettings.
	KeyHarnessSettings = "harness-settings.json"
	// KeyHarnessNetworkPolicy is a HarnessV1NetworkPolicy, for the sandbox session's
	// setNetworkPolicy.
	KeyHarnessNetworkPolicy = "harness-network-policy.json"
	KeyBootstrapHash        = "bootstrap-hash"
	// KeyCheckedRules is the snapshot's rules as the operator type-checked them, which the
	// hook plans without parsing them again. It is derived from the snapshot and bound to its
	// digest, and the hook falls back to the rules' source without it, so it is optional:
	// absent when no rule has a when, left out of a bundle it would not fit in. When present,
	// the bootstrap hash covers it like every other file (a hand edit is not kept).
	KeyCheckedRules = gate.CheckedFileName
)

// ConfigMapName is the name of a policy's bootstrap ConfigMap: the policy controller writes
// it, the pod webhook mounts it, and the confirmer reads its snapshot from it.
func ConfigMapName(policy string) string { return policy + "-bootstrap" }

// BaselineConfigMap is the baseline bundle the manager publishes in every namespace a
// ClusterHarnessAgentPolicy selects: the cluster layers alone, for the pods no namespace policy
// governs. No namespace policy can own the name: a policy's bundle ends in -bootstrap after
// its name, and "gate-baseline" is reserved (the policy webhook refuses it).
const BaselineConfigMap = "gate-baseline-bootstrap"

// hashedKeys are the files the bootstrap hash covers, in the order it covers them.
var hashedKeys = []string{KeySnapshot, KeyHookScript, KeyManagedSettings, KeySettings, KeyHarnessSettings, KeyHarnessNetworkPolicy, KeyCodexRequirements, KeyCodexManagedConfig, KeyGeminiSettings}

// Defaults of Options.
const (
	DefaultMountDir = "/opt/intutic/hooks"
	DefaultHookBin  = "/opt/intutic/bin/gate-hook"
	// DefaultHookTimeout is the timeout registered with Claude Code, in seconds.
	DefaultHookTimeout = 15
	// DefaultHookLimit is the wrapper's own limit on gate-hook, in seconds: shorter than the
	// registered timeout, because Claude Code runs the tool when a hook times out.
	DefaultHookLimit = 10
	// DefaultClaudeCodeMinimumVersion is the oldest Claude Code the conformance suite proves
	// (test/conformance/package.json pins it): the managed settings' requiredMinimumVersion,
	// so an older Claude Code exits at start instead of running without onFailure.
	DefaultClaudeCodeMinimumVersion = "2.1.332"
)

// Where the gate-agent sidecar and its client meet in a governed pod. The pod webhook mounts the
// sidecar's directory read-only into the agent's containers (they can connect to the socket but
// not replace it) and the fallback spool's writable (gate-hook, which runs as the agent's user,
// appends the calls it decided because the sidecar did not answer; the sidecar reports them).
const (
	// AgentRunDir holds the sidecar's socket; only the sidecar mounts it writable.
	AgentRunDir = "/run/gate-agent"
	// AgentSocket is the sidecar's Unix socket.
	AgentSocket = AgentRunDir + "/gate.sock"
	// FallbackDir holds the fallback spool; the sidecar mounts it read-only.
	FallbackDir = "/run/gate-fallback"
	// FallbackSpool is the file gate-hook appends its fallback decisions to.
	FallbackSpool = FallbackDir + "/fallback.ndjson"
	// ClientName is the client's binary, installed beside gate-hook by gate-hook --install.
	ClientName = "gate-client"
	// ClientDeadlineMillis is how long the client waits for the sidecar's answer before it
	// hands the call to gate-hook, well inside the wrapper's own limit.
	ClientDeadlineMillis = 1500
)

// Options are the installation facts the bundle is rendered for.
type Options struct {
	// MountDir is where sandbox pods mount the bundle.
	MountDir string
	// HookBin is where sandbox pods have the gate-hook binary. The wrapper names it literally:
	// nothing the agent can set in the environment chooses the program that decides.
	HookBin string
	// HookTimeout and HookLimit are in seconds; HookLimit must be below HookTimeout.
	HookTimeout int
	HookLimit   int
	// ClaudeCodeMinimumVersion is the managed settings' requiredMinimumVersion, a version
	// such as 2.1.332.
	ClaudeCodeMinimumVersion string
}

func (o Options) withDefaults() Options {
	if o.MountDir == "" {
		o.MountDir = DefaultMountDir
	}
	if o.HookBin == "" {
		o.HookBin = DefaultHookBin
	}
	if o.HookTimeout == 0 {
		o.HookTimeout = DefaultHookTimeout
	}
	if o.HookLimit == 0 {
		o.HookLimit = DefaultHookLimit
	}
	if o.ClaudeCodeMinimumVersion == "" {
		o.ClaudeCodeMinimumVersion = DefaultClaudeCodeMinimumVersion
	}
	return o
}

// Bundle is the rendered bootstrap ConfigMap data and its hash.
type Bundle struct {
	Data map[string]string
	Hash string
}

// Render renders the bundle of a policy spec and its encoded snapshot. An empty snapshot is
// rendered as an empty file, never left out, so a sandbox sees a missing snapshot as one.
func Render(spec *gatev1.HarnessAgentPolicySpec, snapshot []byte, opts Options) (Bundle, error) {
	return RenderChecked(spec, snapshot, nil, opts)
}

// RenderChecked is Render with the snapshot's checked rules file (gate.BuildSnapshotChecked),
// which the bundle carries when there is one and it fits.
func RenderChecked(spec *gatev1.HarnessAgentPolicySpec, snapshot, checked []byte, opts Options) (Bundle, error) {
	return RenderLayered(spec, snapshot, checked, Layers{}, "", opts)
}

// RenderLayered is RenderChecked with the cluster layers that select the policy's namespace
// and the active exceptions of its namespace. With neither, the bundle is exactly
// RenderChecked's, so an installation without cluster policies or exceptions publishes what it
// did before they existed. With some, it also carries the layers index and each layer's
// snapshot, the hook is run with --layers, and the harness settings get the layers' posture
// floor.
func RenderLayered(spec *gatev1.HarnessAgentPolicySpec, snapshot, checked []byte, layers Layers, namespace string, opts Options) (Bundle, error) {
	harness, err := renderHarness(applyFloor(spec, layers.Cluster))
	if err != nil {
		return Bundle{}, err
	}
	return render(snapshot, checked, harness, spec.WorkspaceID, layers, namespace, true, opts)
}

// RenderBlocking renders the bundle of a policy whose rules cannot be published and that has
// no bundle of its own to keep: snapshot (an invalid one, which blocks every call) with the
// most restrictive harness settings (allow-reads, bash filtered, no network), whatever the
// spec asks for.
func RenderBlocking(workspaceID string, snapshot []byte, opts Options) (Bundle, error) {
	return Render(&gatev1.HarnessAgentPolicySpec{WorkspaceID: workspaceID, PermissionMode: gatev1.PermissionModeAllowReads}, snapshot, opts)
}

// Keep re-renders a bundle the operator published before: its snapshot and harness files
// (rendered from the spec in force then) stay, the files that depend only on the installation
// (hook wrapper, Claude Code settings) are rendered again. data must be verified first
// (Verify): Keep trusts it.
//
// The cluster layers are never kept: the bundle carries the ones in force now, whatever state
// the namespace policy's own rules are in.
func Keep(data map[string]string, workspaceID string, layers Layers, namespace string, opts Options) (Bundle, error) {
	harness := harnessFiles{settings: data[KeyHarnessSettings], networkPolicy: data[KeyHarnessNetworkPolicy]}
	// The checked rules file, bound to the kept snapshot's digest, stays valid for it.
	return render([]byte(data[KeySnapshot]), []byte(data[KeyCheckedRules]), harness, workspaceID, layers, namespace, true, opts)
}

// Verify reports whether data is a whole bundle whose bootstrap hash matches its files: what
// Render or Keep produced, for workspaceID, unedited.
func Verify(data map[string]string, workspaceID string, opts Options) bool {
	opts = opts.withDefaults()
	for _, k := range hashedKeys {
		if _, ok := data[k]; !ok {
			return false
		}
	}
	return data[KeyBootstrapHash] == Hash(data, opts.MountDir, workspaceID)
}

// render renders a bundle. namespaced says snapshot is a namespace policy's; a bundle without
// one (a namespace's baseline, RenderBaseline) is always layered, since only its layers decide.
func render(snapshot, checked []byte, harness harnessFiles, workspaceID string, layers Layers, namespace string, namespaced bool, opts Options) (Bundle, error) {
	opts = opts.withDefaults()
	if opts.HookLimit >= opts.HookTimeout {
		return Bundle{}, fmt.Errorf("the hook limit (%ds) must be shorter than the registered timeout (%ds)", opts.HookLimit, opts.HookTimeout)
	}
	if !path.IsAbs(opts.MountDir) {
		return Bundle{}, fmt.Errorf("the mount directory %q is not absolute", opts.MountDir)
	}
	if !path.IsAbs(opts.HookBin) {
		return Bundle{}, fmt.Errorf("the gate-hook binary path %q is not absolute", opts.HookBin)
	}
	if err := CheckClaudeCodeVersion(opts.ClaudeCodeMinimumVersion); err != nil {
		return Bundle{}, err
	}
	managed, err := claudeSettings(opts, true)
	if err != nil {
		return Bundle{}, err
	}
	project, err := claudeSettings(opts, false)
	if err != nil {
		return Bundle{}, err
	}
	codexRequirements, err := codexRequirements(opts)
	if err != nil {
		return Bundle{}, err
	}
	codexManagedConfig, err := codexManagedConfig()
	if err != nil {
		return Bundle{}, err
	}
	geminiSettings, err := geminiSettings(opts)
	if err != nil {
		return Bundle{}, err
	}
	layered := layers.layered() || !namespaced
	data := map[string]string{
		KeyCodexRequirements:    codexRequirements,
		KeyCodexManagedConfig:   codexManagedConfig,
		KeyGeminiSettings:       geminiSettings,
		KeySnapshot:             string(snapshot),
		KeyHookScript:           hookScript(opts, workspaceID, layered),
		KeyManagedSettings:      managed,
		KeySettings:             project,
		KeyHarnessSettings:      harness.settings,
		KeyHarnessNetworkPolicy: harness.networkPolicy,
	}
	if layered {
		if err := addLayers(data, layers, namespace, workspaceID, namespaced); err != nil {
			return Bundle{}, err
		}
	}
	if len(checked) > 0 {
		data[KeyCheckedRules] = string(checked)
	}
	if configMapSize(data)+len(KeyBootstrapHash)+len("sha256:")+sha256.Size*2 > MaxBundleBytes {
		// Optional: the hook compiles the rules from their source.
		delete(data, KeyCheckedRules)
		for _, l := range layers.Cluster {
			delete(data, gate.ClusterLayerCheckedFile(l.Name))
		}
	}
	hash := Hash(data, opts.MountDir, workspaceID)
	data[KeyBootstrapHash] = hash
	if size := configMapSize(data); size > MaxBundleBytes {
		return Bundle{}, &TooLargeError{Size: size, Layers: len(layers.Cluster)}
	}
	return Bundle{Data: data, Hash: hash}, nil
}

// MaxBundleBytes is the most a ConfigMap holds: the API server refuses one whose data keys and
// values add up to more (corev1.MaxSecretSize is the limit it applies to ConfigMaps too).
const MaxBundleBytes = corev1.MaxSecretSize

// TooLargeError says the bundle would not fit in its ConfigMap.
type TooLargeError struct {
	Size int
	// Layers is how many cluster layers the bundle carries.
	Layers int
}

func (e *TooLargeError) Error() string {
	if e.Layers > 0 {
		return fmt.Sprintf("the bootstrap bundle with its %d cluster layers would be %d bytes, over the %d bytes a ConfigMap holds", e.Layers, e.Size, MaxBundleBytes)
	}
	return fmt.Sprintf("the bootstrap bundle would be %d bytes, over the %d bytes a ConfigMap holds", e.Size, MaxBundleBytes)
}

// configMapSize is the size the API server checks against MaxBundleBytes.
func configMapSize(data map[string]string) int {
	n := 0
	for k, v := range data {
		n += len(k) + len(v)
	}
	return n
}

// OnlyBundleKeys reports whether data holds no key a bundle does not have: the hash covers
// only the bundle's files, so a key added beside them is found this way.
func OnlyBundleKeys(data map[string]string) bool {
	layers := layerFiles(data)
	for k := range data {
		if !slices.Contains(hashedKeys, k) && k != KeyCheckedRules && k != KeyBootstrapHash && !slices.Contains(layers, k) {
			return false
		}
	}
	return true
}

// Hash is the bootstrap hash: sha256 over every bundle file (the checked rules file when
// present), the mount directory and the workspace ID, in a fixed order, each length-prefixed
// so no two recipes collide.
func Hash(data map[string]string, mountDir, workspaceID string) string {
	h := sha256.New()
	write := func(name, value string) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(name)))
		h.Write(n[:])
		h.Write([]byte(name))
		binary.BigEndian.PutUint64(n[:], uint64(len(value)))
		h.Write(n[:])
		h.Write([]byte(value))
	}
	write("gate.intutic.io/bootstrap", "v1")
	for _, k := range hashedKeys {
		write(k, data[k])
	}
	// Optional, so covered only when present: a bundle without it hashes as before it existed.
	if v, ok := data[KeyCheckedRules]; ok {
		write(KeyCheckedRules, v)
	}
	// So are the layers index and the files it names: a bundle without layers hashes as before.
	for _, k := range layerFiles(data) {
		write(k, data[k])
	}
	write("mountDir", mountDir)
	write("workspaceID", workspaceID)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// CheckClaudeCodeVersion reports whether v can be the managed settings' requiredMinimumVersion:
// a release version, major.minor.patch.
func CheckClaudeCodeVersion(v string) error {
	if _, err := version.ParseSemantic(v); err != nil {
		return fmt.Errorf("the minimum Claude Code version %q is not a version such as %s: %w", v, DefaultClaudeCodeMinimumVersion, err)
	}
	return nil
}
