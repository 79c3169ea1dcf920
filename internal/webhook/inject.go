package webhook

import (
	"fmt"
	"net"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/egresscanary"
	"github.com/intutic/gate-operator/internal/gate"
)

// Names the injection gives what it adds to a pod: the same names docs/examples/sandbox-pod.yaml
// writes by hand. A pod written that way keeps its install-gate-hook; its
// wait-for-egress-policy is the injection's own, rendered anew (Inject).
const (
	// InstallContainerName is the init container that copies gate-hook into VolumeBin.
	InstallContainerName = "install-gate-hook"
	// EgressWaitContainerName is the last init container: it waits until the pod's egress
	// policy is enforced.
	EgressWaitContainerName = "wait-for-egress-policy"
	// VolumeBin is the emptyDir that holds the gate-hook binary.
	VolumeBin = "gate-bin"
	// VolumeHooks is the whole bootstrap ConfigMap, at the bundle's mount directory.
	VolumeHooks = "gate-hooks"
	// VolumeManagedSettings is the bootstrap ConfigMap's managed-settings.json alone, at
	// ManagedSettingsDir.
	VolumeManagedSettings = "claude-managed-settings"
	// ManagedSettingsDir is where Claude Code reads its managed settings on Linux.
	ManagedSettingsDir = "/etc/claude-code"
)

// AnnotationSkipContainers lists, comma-separated, the containers of a pod the injection leaves
// alone (a proxy sidecar, say): they get none of the gate's mounts. Init containers are never
// given them anyway.
const AnnotationSkipContainers = "gate.intutic.io/inject-skip-containers"

// InjectOptions are the installation facts the injection renders: where the bundle and the
// hook binary live in the pod (the manager's --bootstrap-mount-dir and --gate-hook-path), the
// image that carries /gate-hook, and where egress-wait finds the manager's egress canary.
type InjectOptions struct {
	Bootstrap     bootstrap.Options
	GateHookImage string
	// EgressCanary is the manager's egress canary; zero is DefaultEgressCanary.
	EgressCanary EgressCanary
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

// ConflictError is a pod the injection cannot govern without changing what its author wrote:
// a volume or mount of the gate's names or paths that is something else. The pod is refused.
type ConflictError struct{ Reason string }

func (e *ConflictError) Error() string { return e.Reason }

// Inject adds to pod what governs it under policy: the init containers, the volumes, and the
// mounts of every container the pod does not list in AnnotationSkipContainers. It never touches
// an init container of another name than the gate's. What is already there under the gate's
// names is kept, but for the init container wait-for-egress-policy, which the injection owns:
// one the pod has is replaced, where it stands, by the rendered one (the canary's address, the
// image, the security context), since the agent must not start before the wait that proves
// the pod's egress policy enforced. So a second pass changes nothing, and neither does a pod
// written by hand as the example but for that container. It returns warnings for the pod's
// author, or a *ConflictError.
func Inject(pod *corev1.Pod, policy string, o InjectOptions) ([]string, error) {
	cm := bootstrap.ConfigMapName(policy)
	warnings, err := ensureVolumes(pod, cm)
	if err != nil {
		return nil, err
	}
	skip, unknown := skippedContainers(pod)
	for _, name := range unknown {
		warnings = append(warnings, fmt.Sprintf("annotation %s names %q, which is not a container of this pod", AnnotationSkipContainers, name))
	}
	governed := 0
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if skip[c.Name] {
			continue
		}
		governed++
		for _, m := range governedMounts(o) {
			if err := ensureMount(c, m); err != nil {
				return nil, err
			}
		}
	}
	if governed == 0 {
		warnings = append(warnings, fmt.Sprintf("annotation %s leaves out every container: nothing in this pod runs under policy %s's hook", AnnotationSkipContainers, policy))
	}
	pod.Spec.InitContainers = withInitContainers(pod.Spec.InitContainers, o)
	return warnings, nil
}

// injectedInitContainers are the init containers the injection adds, in the order they run:
// first before the pod's own, last after them, just before its containers. This is the one
// place they are listed. The egress wait runs last, so the agent starts only once the egress
// NetworkPolicy is enforced on the pod (cmd/egress-wait).
func injectedInitContainers(o InjectOptions) (first, last []corev1.Container) {
	return []corev1.Container{installContainer(o)}, []corev1.Container{egressWaitContainer(o)}
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

// withInitContainers puts the injected init containers the pod lacks (by name) around its own,
// and replaces, in place, a wait-for-egress-policy the pod has with the rendered one.
func withInitContainers(have []corev1.Container, o InjectOptions) []corev1.Container {
	first, last := injectedInitContainers(o)
	have = slices.Clone(have)
	for i := range have {
		if have[i].Name == EgressWaitContainerName {
			have[i] = renderedOver(egressWaitContainer(o), have[i])
		}
	}
	missing := func(cs []corev1.Container) []corev1.Container {
		return slices.DeleteFunc(cs, func(c corev1.Container) bool {
			return slices.ContainsFunc(have, func(h corev1.Container) bool { return h.Name == c.Name })
		})
	}
	first, last = missing(first), missing(last)
	if len(first) == 0 && len(last) == 0 {
		return have
	}
	return slices.Concat(first, have, last)
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
	return []corev1.VolumeMount{
		{Name: VolumeBin, MountPath: o.hookDir(), ReadOnly: true},
		{Name: VolumeHooks, MountPath: o.mountDir(), ReadOnly: true},
		{Name: VolumeManagedSettings, MountPath: ManagedSettingsDir, ReadOnly: true},
	}
}

// ensureMount adds m to c unless c already mounts m's volume at m's path. Another volume at
// that path, or anything mounted inside it, would replace what the gate put there (the hook,
// the rules, the managed settings), so the pod is refused instead.
func ensureMount(c *corev1.Container, m corev1.VolumeMount) error {
	found := false
	for _, have := range c.VolumeMounts {
		p := path.Clean(have.MountPath)
		switch {
		case p == m.MountPath && have.Name == m.Name && have.SubPath == "" && have.SubPathExpr == "":
			found = true
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

// ensureVolumes adds the gate's volumes the pod lacks; warnings say what an existing one lacks.
// One the pod already has under a gate name must be what the injection would add where it
// matters: the policy's bootstrap ConfigMap for the hooks and the managed settings (a pod
// labelled for one policy never runs another's rules).
func ensureVolumes(pod *corev1.Pod, configMap string) ([]string, error) {
	var warnings []string
	for _, v := range gateVolumes(configMap) {
		i := slices.IndexFunc(pod.Spec.Volumes, func(h corev1.Volume) bool { return h.Name == v.Name })
		if i < 0 {
			pod.Spec.Volumes = append(pod.Spec.Volumes, v)
			continue
		}
		have := &pod.Spec.Volumes[i]
		switch v.Name {
		case VolumeBin:
			// Whatever the pod provides it with, install-gate-hook writes there.
		case VolumeHooks:
			cm, podName := hooksSources(have)
			if cm == nil || cm.Name != configMap || (cm.Optional != nil && *cm.Optional) {
				return nil, wrongVolume(v.Name, "must hold ConfigMap "+configMap)
			}
			if !podName {
				warnings = append(warnings, fmt.Sprintf("volume %s has no downwardAPI item %s (metadata.name): rules on caller.pod see \"\" in this pod", VolumeHooks, gate.PodNameFile))
			}
		case VolumeManagedSettings:
			cm := have.ConfigMap
			if cm == nil || cm.Name != configMap || (cm.Optional != nil && *cm.Optional) {
				return nil, wrongVolume(v.Name, "must be ConfigMap "+configMap)
			}
			if len(cm.Items) > 0 && !slices.ContainsFunc(cm.Items, func(k corev1.KeyToPath) bool {
				return k.Key == bootstrap.KeyManagedSettings && k.Path == bootstrap.KeyManagedSettings
			}) {
				return nil, wrongVolume(v.Name, fmt.Sprintf("must project key %s of ConfigMap %s as %s", bootstrap.KeyManagedSettings, configMap, bootstrap.KeyManagedSettings))
			}
		}
	}
	return warnings, nil
}

func wrongVolume(name, what string) error {
	return &ConflictError{fmt.Sprintf("volume %s %s, the bootstrap bundle of the policy the pod's label %s names: remove the volume and the injection adds it",
		name, what, gatev1.LabelPolicy)}
}

// gateVolumes are the volumes the injection adds, as docs/examples/sandbox-pod.yaml writes them:
// an emptyDir for the binary; the whole bootstrap ConfigMap with the pod's name beside it
// (gate.PodNameFile, for the rules' caller.pod), which kubelet keeps current since no subPath
// is used; and the ConfigMap's managed-settings.json alone.
func gateVolumes(configMap string) []corev1.Volume {
	ref := corev1.LocalObjectReference{Name: configMap}
	return []corev1.Volume{
		{Name: VolumeBin, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: VolumeHooks, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: ref}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
				{Path: gate.PodNameFile, FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}},
			}}},
		}}}},
		{Name: VolumeManagedSettings, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: ref,
			Items:                []corev1.KeyToPath{{Key: bootstrap.KeyManagedSettings, Path: bootstrap.KeyManagedSettings}},
		}}},
	}
}

// hooksSources reads the bundle volume a pod wrote itself: the ConfigMap it mounts (a
// configMap volume, or the one ConfigMap of a projected volume) and whether the pod's name is
// beside it.
func hooksSources(v *corev1.Volume) (*corev1.ConfigMapVolumeSource, bool) {
	if v.ConfigMap != nil {
		return v.ConfigMap, false
	}
	if v.Projected == nil {
		return nil, false
	}
	var cm *corev1.ConfigMapVolumeSource
	podName := false
	for _, src := range v.Projected.Sources {
		switch {
		case src.ConfigMap != nil && cm != nil:
			return nil, false // two bundles in one directory: not the gate's
		case src.ConfigMap != nil:
			cm = &corev1.ConfigMapVolumeSource{LocalObjectReference: src.ConfigMap.LocalObjectReference, Optional: src.ConfigMap.Optional}
		case src.DownwardAPI != nil:
			podName = podName || slices.ContainsFunc(src.DownwardAPI.Items, func(f corev1.DownwardAPIVolumeFile) bool {
				return f.Path == gate.PodNameFile && f.FieldRef != nil && f.FieldRef.FieldPath == "metadata.name"
			})
		}
	}
	return cm, podName
}

// skippedContainers reads AnnotationSkipContainers: the names it lists, and those of them that
// are no container of the pod.
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
		if !slices.ContainsFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == name }) {
			unknown = append(unknown, name)
		}
	}
	return skip, unknown
}
