package webhook

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/egresscanary"
	"github.com/intutic/gate-operator/internal/gate"
)

// Names the injection gives what it adds to a pod: the same names docs/examples/sandbox-pod.yaml
// writes by hand. The init containers of those names are the injection's own, rendered anew
// whatever a pod wrote under them (Inject).
const (
	// InstallContainerName is the init container that copies gate-hook into VolumeBin.
	InstallContainerName = "install-gate-hook"
	// EgressWaitContainerName is the second init container: it waits until the pod's egress
	// policy is enforced, before anything of the pod's starts.
	EgressWaitContainerName = "wait-for-egress-policy"
	// GateAgentContainerName is the third: the gate-agent native sidecar, the pod's long-lived
	// decider, started and ready before anything of the pod's.
	GateAgentContainerName = "gate-agent"
	// VolumeBin is the emptyDir that holds the gate-hook binary.
	VolumeBin = "gate-bin"
	// VolumeHooks is the whole bootstrap ConfigMap, at the bundle's mount directory.
	VolumeHooks = "gate-hooks"
	// VolumeManagedSettings is the bootstrap ConfigMap's managed-settings.json alone, at
	// ManagedSettingsDir.
	VolumeManagedSettings = "claude-managed-settings"
	// ManagedSettingsDir is where Claude Code reads its managed settings on Linux.
	ManagedSettingsDir = "/etc/claude-code"
	// VolumeCodexRequirements is the bootstrap ConfigMap's Codex requirements and managed
	// configuration alone, as requirements.toml and managed_config.toml in CodexDir.
	VolumeCodexRequirements = "codex-requirements"
	// CodexDir is where Codex CLI reads its managed requirements.
	CodexDir = "/etc/codex"
	// VolumeGeminiSettings is the bootstrap ConfigMap's Gemini CLI system settings alone,
	// mounted as the one file settings.json in GeminiDir (a sub-path): Gemini CLI ignores
	// system settings in a directory that is not root-owned or is writable by group or others,
	// and a ConfigMap volume's own directory is mode 0777 (docs/sandbox-integration.md).
	VolumeGeminiSettings = "gemini-system-settings"
	// GeminiDir is where Gemini CLI reads its system settings on Linux.
	GeminiDir = "/etc/gemini-cli"
	// VolumeAgentRun is the emptyDir of the gate-agent's socket (bootstrap.AgentRunDir):
	// writable in the sidecar only.
	VolumeAgentRun = "gate-agent-run"
	// VolumeFallback is the emptyDir of gate-hook's fallback spool (bootstrap.FallbackDir):
	// read-only in the sidecar.
	VolumeFallback = "gate-fallback"
	// VolumeConfirmerToken is the projected ServiceAccount token of the human lane
	// (InjectOptions.HumanLane): bound to the pod, with its SessionConfirmer's audience, and
	// mounted into gate-agent alone. No other container may mount it.
	VolumeConfirmerToken = "gate-agent-confirmer-token"
)

// ConfirmerTokenDir is where gate-agent reads the human lane's token (ConfirmerTokenDir/token).
const ConfirmerTokenDir = "/var/run/secrets/gate.intutic.io/confirmer"

// confirmerTokenSeconds is the token's lifetime; kubelet renews it at 80%.
const confirmerTokenSeconds = 3600

// HumanLane is where a pod's gate-agent sends the Ask verdicts of its Claude Code calls for a
// human (the policy's spec.gateAgent.humanApproval): its SessionConfirmer's gate API, by the
// Service's ClusterIP (a deny-all pod has no DNS), and the audience of the token it presents.
type HumanLane struct {
	URL, Audience string
}

// managedConfig is one runtime's managed configuration: one file of the bootstrap ConfigMap, on
// a volume of its own, at the directory where the runtime reads it, so that every governed
// container is governed whichever of the runtimes it runs.
type managedConfig struct {
	volume, dir string
	// items are the bundle's keys and the files they are in dir.
	items []corev1.KeyToPath
	// fileOnly mounts the one item alone (a sub-path) in a directory the container runtime
	// creates, root-owned and mode 0755, instead of the volume's directory at dir.
	fileOnly bool
}

var managedConfigs = []managedConfig{
	{VolumeManagedSettings, ManagedSettingsDir, []corev1.KeyToPath{{Key: bootstrap.KeyManagedSettings, Path: bootstrap.KeyManagedSettings}}, false},
	{VolumeCodexRequirements, CodexDir, []corev1.KeyToPath{
		{Key: bootstrap.KeyCodexRequirements, Path: "requirements.toml"},
		{Key: bootstrap.KeyCodexManagedConfig, Path: "managed_config.toml"},
	}, false},
	{VolumeGeminiSettings, GeminiDir, []corev1.KeyToPath{{Key: bootstrap.KeyGeminiSettings, Path: "settings.json"}}, true},
}

// mount is where the configuration is mounted in governed containers.
func (m managedConfig) mount() corev1.VolumeMount {
	if m.fileOnly {
		file := m.items[0].Path
		return corev1.VolumeMount{Name: m.volume, MountPath: path.Join(m.dir, file), SubPath: file, ReadOnly: true}
	}
	return corev1.VolumeMount{Name: m.volume, MountPath: m.dir, ReadOnly: true}
}

// The gate-agent sidecar's identity and ports. Its user and group are ones no governed
// container may run as (Inject refuses such a pod): the agent can connect to its socket but
// not replace it, signal it or read its memory.
const (
	GateAgentUID         = 65533
	GateAgentMetricsPort = 18081
	GateAgentHealthPort  = 18082
)

// DefaultGateAgentResources are the sidecar's requests and limits when its policy sets none
// (spec.gateAgent.resources).
var DefaultGateAgentResources = corev1.ResourceRequirements{
	Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
	Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
}

// AnnotationSkipContainers lists, comma-separated, the containers and native sidecars of a pod
// the injection leaves alone (a proxy sidecar, say): they get none of the gate's mounts. Init
// containers that run to completion are never given them anyway.
const AnnotationSkipContainers = "gate.intutic.io/inject-skip-containers"

// InjectOptions are the installation facts the injection renders: where the bundle and the
// hook binary live in the pod (the manager's --bootstrap-mount-dir and --gate-hook-path), the
// image that carries /gate-hook, and where egress-wait finds the manager's egress canary.
type InjectOptions struct {
	Bootstrap     bootstrap.Options
	GateHookImage string
	// EgressCanary is the manager's egress canary; zero is DefaultEgressCanary.
	EgressCanary EgressCanary
	// GateAgentResources are the sidecar's resources; nil is DefaultGateAgentResources.
	GateAgentResources *corev1.ResourceRequirements
	// HumanLane, when set, gives gate-agent the human lane: its confirmer and a projected token
	// for it. The pod webhook sets it per admission from the policy.
	HumanLane *HumanLane
}

// EgressCanary is where the injected egress-wait reaches the manager's egress canary
// (internal/egresscanary): the canary's Service, by name and namespace, and its control and
// denied ports. Host is what egress-wait dials; empty is the Service's DNS name (what
// docs/examples/sandbox-pod.yaml writes). The pod webhook sets it, at every admission, to the
// Service's ClusterIP read from the API server (PodInjector): a deny-all pod cannot use DNS.
type EgressCanary struct {
	Service, Namespace      string
	ControlPort, DeniedPort int32
	Host                    string
}

// DefaultEgressCanary is the canary Service of the default install (config/default).
var DefaultEgressCanary = EgressCanary{
	Service:     "gate-operator-egress-canary",
	Namespace:   "gate-system",
	ControlPort: egresscanary.DefaultControlPort,
	DeniedPort:  egresscanary.DefaultDeniedPort,
}

// egressCanary is o's canary, each field left zero taken from DefaultEgressCanary.
func (o InjectOptions) egressCanary() EgressCanary {
	c, d := o.EgressCanary, DefaultEgressCanary
	if c.Service == "" {
		c.Service = d.Service
	}
	if c.Namespace == "" {
		c.Namespace = d.Namespace
	}
	if c.ControlPort == 0 {
		c.ControlPort = d.ControlPort
	}
	if c.DeniedPort == 0 {
		c.DeniedPort = d.DeniedPort
	}
	return c
}

// host is what egress-wait dials: Host, or the Service's DNS name.
func (c EgressCanary) host() string {
	if c.Host != "" {
		return c.Host
	}
	return c.Service + "." + c.Namespace + ".svc"
}

// hookDir is the directory that holds the gate-hook binary: gate-hook --install writes
// <dir>/gate-hook, so the manager refuses a --gate-hook-path not named gate-hook when it injects.
func (o InjectOptions) hookDir() string {
	hookBin := o.Bootstrap.HookBin
	if hookBin == "" {
		hookBin = bootstrap.DefaultHookBin
	}
	return path.Dir(hookBin)
}

func (o InjectOptions) mountDir() string {
	if o.Bootstrap.MountDir == "" {
		return bootstrap.DefaultMountDir
	}
	return path.Clean(o.Bootstrap.MountDir)
}

// RenderDigest identifies what the injection renders under o: the SHA-256 of a reference pod's
// spec after Inject, so that any change of the rendering (a new release, another image, mount
// directory or canary) changes it. What differs per admission (the canary's resolved address,
// the policy's gate-agent resources and human lane) is left out. The pod webhook stamps it on every pod it
// governs (gatev1.AnnotationInjection); the manager's posture Report compares.
func RenderDigest(o InjectOptions) string {
	o.EgressCanary.Host, o.GateAgentResources, o.HumanLane = "", nil, nil
	ref := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agent"}}}}
	if _, err := Inject(ref, "policy", o); err != nil {
		return "unrenderable"
	}
	b, err := json.Marshal(ref.Spec)
	if err != nil {
		return "unrenderable"
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:16])
}

func setAnnotation(pod *corev1.Pod, key, value string) {
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[key] = value
}

// ConflictError is a pod the injection cannot govern without changing what its author wrote:
// a volume or mount of the gate's names or paths that is something else. The pod is refused.
type ConflictError struct{ Reason string }

func (e *ConflictError) Error() string { return e.Reason }

// Inject adds to pod what governs it under policy, or refuses it (a *ConflictError) where what
// its author wrote under the gate's names or paths is something else:
//   - the init containers install-gate-hook and wait-for-egress-policy and the native sidecar
//     gate-agent, rendered, run first, in that order: a pod's own of those names is replaced by
//     the rendering, so no init container or native sidecar starts before the egress policy is
//     proven enforced and the pod's decider answers, and none under the gate's names runs what
//     the pod's author wrote;
//   - the gate's volumes: one the pod already has must be exactly what the injection renders
//     (the policy's bootstrap ConfigMap, every item, every mode), and VolumeBin an emptyDir;
//   - the gate's read-only mounts in every governed container: every container and every native
//     sidecar (an init container with restartPolicy Always) the pod does not list in
//     AnnotationSkipContainers; VolumeBin mounted writable by no container but
//     install-gate-hook, VolumeAgentRun by none but gate-agent; and no governed container that
//     runs as gate-agent's user or group (GateAgentUID) or declares its ports.
//
// So a second pass changes nothing, and PodValidator judges a pod's final spec by this same
// function (Governed). It returns warnings for the pod's author.
func Inject(pod *corev1.Pod, policy string, o InjectOptions) ([]string, error) {
	return injectBundle(pod, bootstrap.ConfigMapName(policy), "policy "+policy+"'s hook", o)
}

// InjectBaseline is Inject for a pod that only cluster policies govern: it mounts the
// namespace's baseline bundle (bootstrap.BaselineConfigMap, the cluster layers alone) and labels
// the pod gatev1.LabelBaseline, which the baseline's egress NetworkPolicy selects.
func InjectBaseline(pod *corev1.Pod, o InjectOptions) ([]string, error) {
	setLabel(pod, gatev1.LabelBaseline, "true")
	return injectBundle(pod, bootstrap.BaselineConfigMap, "the cluster baseline's hook", o)
}

// injectBundle is Inject with the ConfigMap to mount, and what runs its hook for the warnings.
func injectBundle(pod *corev1.Pod, cm, hook string, o InjectOptions) ([]string, error) {
	if err := ensureVolumes(pod, cm, o.HumanLane); err != nil {
		return nil, err
	}
	skip, unknown := skippedContainers(pod)
	var warnings []string
	for _, name := range unknown {
		warnings = append(warnings, fmt.Sprintf("annotation %s names %q, which is not a container or native sidecar of this pod", AnnotationSkipContainers, name))
	}
	pod.Spec.InitContainers = withInitContainers(pod.Spec.InitContainers, o)
	governed := 0
	for _, c := range containersOf(pod) {
		if c.init && (c.Name == InstallContainerName || c.Name == GateAgentContainerName) {
			continue
		}
		if err := gateMountsKept(c.Container, c.kind()); err != nil {
			return nil, err
		}
		if err := notGateAgent(pod, c.Container); err != nil {
			return nil, err
		}
		if !c.governed() || skip[c.Name] {
			continue
		}
		governed++
		for _, m := range governedMounts(o) {
			if err := ensureMount(c.Container, m); err != nil {
				return nil, err
			}
		}
	}
	if governed == 0 {
		warnings = append(warnings, fmt.Sprintf("annotation %s leaves out every container: nothing in this pod runs under %s", AnnotationSkipContainers, hook))
	}
	return warnings, nil
}

// podContainer is a container of a pod, with where it stands.
type podContainer struct {
	*corev1.Container
	init bool
}

// governed: a container, or a native sidecar, which runs beside the agent for the pod's life.
func (c podContainer) governed() bool {
	return !c.init || (c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways)
}

func (c podContainer) kind() string {
	switch {
	case !c.init:
		return "container"
	case c.governed():
		return "native sidecar"
	default:
		return "init container"
	}
}

// containersOf are the pod's init containers and containers, pointing into its spec.
func containersOf(pod *corev1.Pod) []podContainer {
	var out []podContainer
	for i := range pod.Spec.InitContainers {
		out = append(out, podContainer{&pod.Spec.InitContainers[i], true})
	}
	for i := range pod.Spec.Containers {
		out = append(out, podContainer{&pod.Spec.Containers[i], false})
	}
	return out
}

// gateMountsKept refuses a container that mounts VolumeBin writable, which could replace the
// gate-hook binary every governed container runs, VolumeAgentRun writable, which could replace
// the gate-agent's socket, or VolumeConfirmerToken at all, which holds the token only gate-agent
// presents to its SessionConfirmer.
func gateMountsKept(c *corev1.Container, kind string) error {
	for _, m := range c.VolumeMounts {
		switch {
		case m.Name == VolumeConfirmerToken:
			return &ConflictError{fmt.Sprintf("%s %s mounts volume %s: it holds the token only %s presents to its SessionConfirmer; mount it nowhere else",
				kind, c.Name, VolumeConfirmerToken, GateAgentContainerName)}
		case m.ReadOnly:
		case m.Name == VolumeBin:
			return &ConflictError{fmt.Sprintf("%s %s mounts volume %s writable at %s: only %s may write the gate-hook binary; mount it readOnly, or not at all",
				kind, c.Name, VolumeBin, m.MountPath, InstallContainerName)}
		case m.Name == VolumeAgentRun:
			return &ConflictError{fmt.Sprintf("%s %s mounts volume %s writable at %s: only %s may write its socket's directory; mount it readOnly, or not at all",
				kind, c.Name, VolumeAgentRun, m.MountPath, GateAgentContainerName)}
		}
	}
	return nil
}

// injectedInitContainers are the init containers the injection adds, in the order they run,
// before any of the pod's own: this is the one place they are listed. The egress wait runs
// before the pod's init containers and native sidecars, so nothing of the pod's starts before
// the egress NetworkPolicy is enforced on it (cmd/egress-wait).
func injectedInitContainers(o InjectOptions) []corev1.Container {
	return []corev1.Container{installContainer(o), egressWaitContainer(o), gateAgentContainer(o)}
}

// gateAgentContainer is the gate-agent native sidecar (cmd/gate-agent): it decides the pod's
// calls from the same read-only bundle the hook reads, on a socket in VolumeAgentRun, and
// writes a record of each decision to its stdout. Its startup probe holds the pod's own init
// containers and containers back until it answers; it runs as GateAgentUID with nothing
// writable but its socket's directory, and no capabilities.
func gateAgentContainer(o InjectOptions) corev1.Container {
	resources := DefaultGateAgentResources
	if o.GateAgentResources != nil {
		resources = *o.GateAgentResources
	}
	// The API server's defaults are written out, so that a second pass changes nothing.
	probe := func(endpoint string, period, failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: endpoint, Port: intstr.FromInt32(GateAgentHealthPort), Scheme: corev1.URISchemeHTTP}},
			TimeoutSeconds:   1,
			PeriodSeconds:    period,
			SuccessThreshold: 1,
			FailureThreshold: failures,
		}
	}
	command := []string{"/gate-agent",
		"--bundle-dir", o.mountDir(),
		"--socket", bootstrap.AgentSocket,
		"--fallback-spool", bootstrap.FallbackSpool,
		"--metrics-bind-address", fmt.Sprintf(":%d", GateAgentMetricsPort),
		"--health-bind-address", fmt.Sprintf(":%d", GateAgentHealthPort)}
	mounts := []corev1.VolumeMount{
		{Name: VolumeHooks, MountPath: o.mountDir(), ReadOnly: true},
		{Name: VolumeAgentRun, MountPath: bootstrap.AgentRunDir},
		{Name: VolumeFallback, MountPath: bootstrap.FallbackDir, ReadOnly: true},
	}
	if o.HumanLane != nil {
		command = append(command, "--confirmer-url", o.HumanLane.URL, "--confirmer-token", ConfirmerTokenDir+"/token")
		mounts = append(mounts, corev1.VolumeMount{Name: VolumeConfirmerToken, MountPath: ConfirmerTokenDir, ReadOnly: true})
	}
	return corev1.Container{
		Name:          GateAgentContainerName,
		Image:         o.GateHookImage,
		Command:       command,
		RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		Ports:         []corev1.ContainerPort{{Name: "gate-metrics", ContainerPort: GateAgentMetricsPort, Protocol: corev1.ProtocolTCP}},
		Resources:     resources,
		StartupProbe:  probe("/readyz", 1, 60),
		LivenessProbe: probe("/healthz", 10, 3),
		SecurityContext: &corev1.SecurityContext{
			RunAsUser:                ptr.To(int64(GateAgentUID)),
			RunAsGroup:               ptr.To(int64(GateAgentUID)),
			RunAsNonRoot:             ptr.To(true),
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
		VolumeMounts: mounts,
	}
}

// notGateAgent refuses a governed container that would run as the sidecar's user or group, or
// with it among its groups: it could replace the socket, signal the sidecar or read its memory.
func notGateAgent(pod *corev1.Pod, c *corev1.Container) error {
	user, group := int64(-1), int64(-1)
	if sc := pod.Spec.SecurityContext; sc != nil {
		user, group = ptr.Deref(sc.RunAsUser, -1), ptr.Deref(sc.RunAsGroup, -1)
		if slices.Contains(sc.SupplementalGroups, GateAgentUID) || ptr.Deref(sc.FSGroup, -1) == GateAgentUID {
			return &ConflictError{fmt.Sprintf("the pod's supplementalGroups or fsGroup include %d, the group of the %s sidecar: its governed containers would share it; use another group", GateAgentUID, GateAgentContainerName)}
		}
	}
	if sc := c.SecurityContext; sc != nil {
		user, group = ptr.Deref(sc.RunAsUser, user), ptr.Deref(sc.RunAsGroup, group)
	}
	if user == GateAgentUID || group == GateAgentUID {
		return &ConflictError{fmt.Sprintf("container %s runs as user or group %d, the %s sidecar's: it could replace its socket or read its memory; run it as another user and group", c.Name, GateAgentUID, GateAgentContainerName)}
	}
	for _, p := range c.Ports {
		if p.ContainerPort == GateAgentMetricsPort || p.ContainerPort == GateAgentHealthPort {
			return &ConflictError{fmt.Sprintf("container %s declares port %d, which the %s sidecar serves", c.Name, p.ContainerPort, GateAgentContainerName)}
		}
	}
	return nil
}

// egressWaitContainer holds the pod's containers back until the canary's denied port is seen
// blocked while its control port, through the same policy, says the denied port is listening,
// and fails the pod after 60 s (docs/sandbox-integration.md).
func egressWaitContainer(o InjectOptions) corev1.Container {
	c := o.egressCanary()
	return corev1.Container{
		Name:  EgressWaitContainerName,
		Image: o.GateHookImage,
		Command: []string{"/egress-wait",
			"--control", net.JoinHostPort(c.host(), fmt.Sprint(c.ControlPort)),
			"--denied", net.JoinHostPort(c.host(), fmt.Sprint(c.DeniedPort)),
			"--timeout", "60s"},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
}

// installContainer copies gate-hook from the confirmer image into VolumeBin (the image has no
// shell, so the binary copies itself).
func installContainer(o InjectOptions) corev1.Container {
	return corev1.Container{
		Name:    InstallContainerName,
		Image:   o.GateHookImage,
		Command: []string{"/gate-hook", "--install", o.hookDir()},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
		VolumeMounts: []corev1.VolumeMount{{Name: VolumeBin, MountPath: o.hookDir()}},
	}
}

// withInitContainers puts the rendered injected init containers first, each in place of the
// pod's own of its name wherever that stood (keeping of it only what the API server defaults).
func withInitContainers(have []corev1.Container, o InjectOptions) []corev1.Container {
	rendered := injectedInitContainers(o)
	for i, c := range rendered {
		if j := slices.IndexFunc(have, func(h corev1.Container) bool { return h.Name == c.Name }); j >= 0 {
			rendered[i] = renderedOver(c, have[j])
		}
	}
	own := slices.DeleteFunc(slices.Clone(have), func(h corev1.Container) bool {
		return slices.ContainsFunc(rendered, func(c corev1.Container) bool { return c.Name == h.Name })
	})
	return slices.Concat(rendered, own)
}

// renderedOver is the rendered container c in place of the pod's own, keeping only what of the
// pod's the API server defaults (so that a pass over a pod already injected changes nothing)
// and nothing that changes what runs or how.
func renderedOver(c, own corev1.Container) corev1.Container {
	c.TerminationMessagePath = own.TerminationMessagePath
	c.TerminationMessagePolicy = own.TerminationMessagePolicy
	c.ImagePullPolicy = own.ImagePullPolicy
	return c
}

// governedMounts are the mounts every governed container gets, read-only.
func governedMounts(o InjectOptions) []corev1.VolumeMount {
	mounts := []corev1.VolumeMount{
		{Name: VolumeBin, MountPath: o.hookDir(), ReadOnly: true},
		{Name: VolumeHooks, MountPath: o.mountDir(), ReadOnly: true},
	}
	for _, m := range managedConfigs {
		mounts = append(mounts, m.mount())
	}
	return append(mounts,
		corev1.VolumeMount{Name: VolumeAgentRun, MountPath: bootstrap.AgentRunDir, ReadOnly: true},
		corev1.VolumeMount{Name: VolumeFallback, MountPath: bootstrap.FallbackDir},
	)
}

// ensureMount adds m to c unless c already mounts m's volume at m's path. Another volume at
// that path, or anything mounted inside it, would replace what the gate put there (the hook,
// the rules, the managed settings), so the pod is refused instead; so is a volume at the
// directory of a file the gate mounts alone, or above it, which would make that directory the
// pod's (a runtime that checks the directory's owner and mode, as Gemini CLI does, would then
// ignore the file).
func ensureMount(c *corev1.Container, m corev1.VolumeMount) error {
	found := false
	for _, have := range c.VolumeMounts {
		p := path.Clean(have.MountPath)
		switch {
		case p == m.MountPath && have.Name == m.Name && have.SubPath == m.SubPath && have.SubPathExpr == "":
			found = true
		case m.SubPath != "" && p != "/" && strings.HasPrefix(m.MountPath, p+"/"):
			return &ConflictError{fmt.Sprintf("container %s mounts %s at %s, a directory above %s, which the gate mounts alone and whose directory must stay the image's (root-owned, not writable); remove that mount, or list the container in annotation %s",
				c.Name, describeMount(have), p, m.MountPath, AnnotationSkipContainers)}
		case m.SubPath != "" && strings.HasPrefix(p, path.Dir(m.MountPath)+"/"):
			// Beside the file: in Gemini CLI's directory, system-defaults.json or a policy would
			// be read as the system's own.
			return &ConflictError{fmt.Sprintf("container %s mounts %s at %s, beside %s in a directory the runtime reads as managed configuration; remove that mount, or list the container in annotation %s",
				c.Name, describeMount(have), p, m.MountPath, AnnotationSkipContainers)}
		case p == m.MountPath:
			return &ConflictError{fmt.Sprintf("container %s mounts %s at %s, where the gate mounts %s: remove that mount, or list the container in annotation %s",
				c.Name, describeMount(have), m.MountPath, m.Name, AnnotationSkipContainers)}
		case strings.HasPrefix(p, m.MountPath+"/"):
			return &ConflictError{fmt.Sprintf("container %s mounts %s at %s, inside %s where the gate mounts %s: it would replace what the gate put there; remove that mount, or list the container in annotation %s",
				c.Name, describeMount(have), p, m.MountPath, m.Name, AnnotationSkipContainers)}
		}
	}
	if !found {
		c.VolumeMounts = append(c.VolumeMounts, m)
	}
	return nil
}

func describeMount(m corev1.VolumeMount) string {
	if m.SubPath != "" || m.SubPathExpr != "" {
		return fmt.Sprintf("volume %s (a sub-path of it)", m.Name)
	}
	return "volume " + m.Name
}

// ensureVolumes adds the gate's volumes the pod lacks. One the pod already has under a gate
// name must be exactly what the injection renders, the API server's defaults aside: VolumeBin
// an emptyDir, the others the policy's bootstrap ConfigMap with the rendered sources, items
// and modes (a pod labelled for one policy never runs another's rules, and no item, mode or
// source of the pod's own drops, hides or replaces a file the gate puts there).
func ensureVolumes(pod *corev1.Pod, configMap string, lane *HumanLane) error {
	for _, v := range gateVolumes(configMap, lane) {
		i := slices.IndexFunc(pod.Spec.Volumes, func(h corev1.Volume) bool { return h.Name == v.Name })
		if i < 0 {
			pod.Spec.Volumes = append(pod.Spec.Volumes, v)
			continue
		}
		have := pod.Spec.Volumes[i]
		switch {
		case v.EmptyDir != nil && (have.EmptyDir == nil || have.VolumeSource != corev1.VolumeSource{EmptyDir: have.EmptyDir}):
			return wrongVolume(v.Name, "must be an emptyDir, which the gate's containers fill")
		case v.EmptyDir != nil:
		case !equality.Semantic.DeepEqual(volumeDefaults(have), volumeDefaults(v)):
			return wrongVolume(v.Name, fmt.Sprintf("must be exactly what the injection renders from ConfigMap %s (%s)", configMap, describeVolume(v)))
		}
	}
	return nil
}

// volumeDefaults is v with the API server's defaults written out (modes 0644, field paths of
// API version v1, optional false), so that a volume as created compares equal to its rendering.
func volumeDefaults(v corev1.Volume) corev1.Volume {
	v = *v.DeepCopy()
	mode := func(m **int32) {
		if *m == nil {
			*m = ptr.To(corev1.ConfigMapVolumeSourceDefaultMode)
		}
	}
	optional := func(o **bool) {
		if *o != nil && !**o {
			*o = nil
		}
	}
	if cm := v.ConfigMap; cm != nil {
		mode(&cm.DefaultMode)
		optional(&cm.Optional)
	}
	if p := v.Projected; p != nil {
		mode(&p.DefaultMode)
		for _, src := range p.Sources {
			if src.ConfigMap != nil {
				optional(&src.ConfigMap.Optional)
			}
			if src.DownwardAPI != nil {
				for i := range src.DownwardAPI.Items {
					if f := src.DownwardAPI.Items[i].FieldRef; f != nil && f.APIVersion == "" {
						f.APIVersion = "v1"
					}
				}
			}
		}
	}
	return v
}

// describeVolume says what a rendered gate volume holds, for a refusal.
func describeVolume(v corev1.Volume) string {
	switch v.Name {
	case VolumeHooks:
		return fmt.Sprintf("a projected volume of every key, %s from metadata.name and %s from metadata.labels, mode 0644", gate.PodNameFile, gate.PodLabelsFile)
	case VolumeConfirmerToken:
		return fmt.Sprintf("a projected ServiceAccount token for audience %s, for %d seconds", v.Projected.Sources[0].ServiceAccountToken.Audience, confirmerTokenSeconds)
	}
	items := make([]string, len(v.ConfigMap.Items))
	for i, it := range v.ConfigMap.Items {
		items[i] = it.Key + " as " + it.Path
	}
	return fmt.Sprintf("a configMap volume of the items %s, mode 0644", strings.Join(items, ", "))
}

func wrongVolume(name, what string) error {
	return &ConflictError{fmt.Sprintf("volume %s %s, the bootstrap bundle of the policy the pod's label %s names: remove the volume and the injection adds it",
		name, what, gatev1.LabelPolicy)}
}

// gateVolumes are the volumes the injection adds, as docs/examples/sandbox-pod.yaml writes them:
// an emptyDir for the binary, one for the gate-agent's socket and one for gate-hook's fallback
// spool; the whole bootstrap ConfigMap with the pod's name beside it
// (gate.PodNameFile, for the rules' caller.pod) and its labels (gate.PodLabelsFile, which the
// hook resolves cluster layers' pod selectors against), which kubelet keeps current since no
// subPath is used; and each runtime's managed configuration alone (managedConfigs).
func gateVolumes(configMap string, lane *HumanLane) []corev1.Volume {
	ref := corev1.LocalObjectReference{Name: configMap}
	volumes := []corev1.Volume{
		{Name: VolumeBin, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: VolumeAgentRun, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		// gate-hook appends a few hundred bytes per call the sidecar did not answer; the agent,
		// which can write here, can fill it only to its own pod's eviction.
		{Name: VolumeFallback, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("16Mi"))}}},
		{Name: VolumeHooks, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: ref}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
				{Path: gate.PodNameFile, FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}},
				{Path: gate.PodLabelsFile, FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
			}}},
		}}}},
	}
	for _, m := range managedConfigs {
		volumes = append(volumes, corev1.Volume{Name: m.volume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: ref,
			Items:                slices.Clone(m.items),
		}}})
	}
	if lane != nil {
		// kubelet writes a token only one user's containers mount as that user's, mode 0600.
		volumes = append(volumes, corev1.Volume{Name: VolumeConfirmerToken, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
				Audience: lane.Audience, ExpirationSeconds: ptr.To[int64](confirmerTokenSeconds), Path: "token"}}},
		}}})
	}
	return volumes
}

// skippedContainers reads AnnotationSkipContainers: the names it lists, and those of them that
// are no container or native sidecar of the pod.
func skippedContainers(pod *corev1.Pod) (skip map[string]bool, unknown []string) {
	skip = map[string]bool{}
	list := pod.Annotations[AnnotationSkipContainers]
	if strings.TrimSpace(list) == "" {
		return skip, nil
	}
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" || skip[name] {
			continue
		}
		skip[name] = true
		if !slices.ContainsFunc(containersOf(pod), func(c podContainer) bool { return c.governed() && c.Name == name }) {
			unknown = append(unknown, name)
		}
	}
	return skip, unknown
}

// Governed says why pod, as it stands, is not what Inject renders for it under policy, or nil:
// the same function judges, so a pod Inject produced passes, and so does
// docs/examples/sandbox-pod.yaml with the rendered wait-for-egress-policy. What Inject would
// refuse is that refusal; what it would add or replace is named.
func Governed(pod *corev1.Pod, policy string, o InjectOptions) error {
	return governedAs(pod, func(want *corev1.Pod) error { _, err := Inject(want, policy, o); return err }, o)
}

// GovernedBaseline is Governed for a pod that InjectBaseline governs.
func GovernedBaseline(pod *corev1.Pod, o InjectOptions) error {
	return governedAs(pod, func(want *corev1.Pod) error { _, err := InjectBaseline(want, o); return err }, o)
}

func governedAs(pod *corev1.Pod, inject func(*corev1.Pod) error, o InjectOptions) error {
	want := pod.DeepCopy()
	if err := inject(want); err != nil {
		return err
	}
	have := pod.Spec
	names := func(cs []corev1.Container) []string {
		out := make([]string, len(cs))
		for i, c := range cs {
			out[i] = c.Name
		}
		return out
	}
	if got, rendered := names(have.InitContainers), names(want.Spec.InitContainers); !slices.Equal(got, rendered) {
		return fmt.Errorf("its init containers are %q, and the injection runs %s, %s and %s first: %q", got, InstallContainerName, EgressWaitContainerName, GateAgentContainerName, rendered)
	}
	for i, c := range containersOf(want) {
		switch h := containersOf(pod)[i]; {
		case equality.Semantic.DeepEqual(*c.Container, *h.Container):
		case c.init && (!c.governed() || c.Name == GateAgentContainerName):
			return fmt.Errorf("%s %s is not what the injection renders (image %s, command %q, its security context, probes, resources and mounts)", c.kind(), c.Name, c.Image, c.Command)
		default:
			return fmt.Errorf("%s %s lacks the gate's read-only mounts (%s)", c.kind(), c.Name, describeMounts(governedMounts(o)))
		}
	}
	for _, v := range want.Spec.Volumes {
		if !slices.ContainsFunc(have.Volumes, func(h corev1.Volume) bool { return h.Name == v.Name }) {
			return fmt.Errorf("it has no volume %s", v.Name)
		}
	}
	if !equality.Semantic.DeepEqual(want.Spec, have) {
		return fmt.Errorf("its spec is not what the injection renders")
	}
	return nil
}

func describeMounts(ms []corev1.VolumeMount) string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name + " at " + m.MountPath
	}
	return strings.Join(out, ", ")
}
