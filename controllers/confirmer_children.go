package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/confirmerconfig"
	"github.com/intutic/gate-operator/internal/gate"
)

// Where the confirmer finds its files; the Secrets are mounted, never put in the environment.
const (
	confirmerPort = confirmerconfig.ServicePort
	// confirmerMetricsPort serves /metrics, apart from the gate API: the Service does not
	// carry it, and a NetworkPolicy can keep it from the gate API's callers.
	confirmerMetricsPort = 8081
	anthropicMountDir    = "/etc/gate/anthropic"
	webhookMountDir      = "/etc/gate/webhook"
	confirmerRunAsUser   = 65532
	// secretFileMode is the mode of the mounted Secret files: owner root, group fsGroup
	// (the pod's user), read-only, no one else.
	secretFileMode = 0o440
)

func confirmerLabels(sc *gatev1.SessionConfirmer) map[string]string {
	return map[string]string{
		gatev1.LabelManagedBy:         gatev1.ManagedByValue,
		gatev1.LabelConfirmer:         sc.Name,
		"app.kubernetes.io/name":      confirmerconfig.AppName,
		"app.kubernetes.io/instance":  sc.Name,
		"app.kubernetes.io/component": "confirmer",
		"app.kubernetes.io/part-of":   "gate-operator",
	}
}

// confirmerReplicas is the replicas of sc's Deployment: spec.replicas, 2 when unset.
func confirmerReplicas(sc *gatev1.SessionConfirmer) int32 { return ptr.Deref(sc.Spec.Replicas, 2) }

func confirmerSelector(sc *gatev1.SessionConfirmer) map[string]string {
	return confirmerconfig.PodSelector(sc.Name)
}

// confirmerArgs configures the confirmer exactly as the spec says, through the one definition
// of its flags (confirmerconfig); the demo runs the same arguments as a local process.
func confirmerArgs(sc *gatev1.SessionConfirmer, p *gatev1.HarnessAgentPolicy, mountDir string, replicas int32) []string {
	a := sc.Spec.Anthropic
	c := confirmerconfig.Config{
		Listen:        fmt.Sprintf(":%d", confirmerPort),
		MetricsListen: fmt.Sprintf(":%d", confirmerMetricsPort),
		// Callers present projected tokens bound to this confirmer alone.
		TokenAudience:        confirmerconfig.TokenAudience(sc.Namespace, sc.Name),
		Snapshot:             path.Join(mountDir, gate.SnapshotFileName),
		HarnessSettings:      path.Join(mountDir, bootstrap.KeyHarnessSettings),
		AnthropicBaseURL:     a.BaseURL,
		AnthropicAPIKeyFile:  path.Join(anthropicMountDir, a.APIKeySecretRef.Key),
		Workspace:            p.Spec.WorkspaceID,
		AnthropicWorkspaceID: a.WorkspaceID,
		AgentIDs:             sc.Spec.Sessions.AgentIDs,
		// The human lane: every call the gate sends to a human gets a ToolApproval owned by sc.
		ConfirmerName:          sc.Name,
		ConfirmerUID:           string(sc.UID),
		Namespace:              sc.Namespace,
		Policy:                 p.Name,
		HumanApprovalShowInput: sc.Spec.HumanApproval.ShowInput,
	}
	if d := sc.Spec.Sessions.PollInterval; d != nil {
		c.PollInterval = d.Duration
	}
	if d := sc.Spec.HumanApproval.Deadline; d != nil {
		c.HumanApprovalDeadline = d.Duration
	}
	for _, s := range sc.Spec.GateAPI.AllowedServiceAccounts {
		c.AllowedServiceAccounts = append(c.AllowedServiceAccounts, string(s))
	}
	if w := sc.Spec.Webhook; w != nil {
		c.WebhookSigningKeyFile = path.Join(webhookMountDir, w.SigningKeySecretRef.Key)
	}
	if replicas > 1 {
		// The replicas share the sessions (replicas are capacity, not only standby), through
		// a members Lease named like the Role allows: <name>-confirmer.
		c.MembersLease, c.LeaderElectionNamespace = confirmerName(sc), sc.Namespace
	}
	return c.Args()
}

func (r *SessionConfirmerReconciler) desiredDeployment(sc *gatev1.SessionConfirmer, p *gatev1.HarnessAgentPolicy) *appsv1ac.DeploymentApplyConfiguration {
	name := confirmerName(sc)
	replicas := confirmerReplicas(sc)
	image := sc.Spec.Image
	if image == "" {
		image = r.ConfirmerImage
	}
	cmName := bootstrapConfigMapName(p)
	if sc.CrossNamespace() {
		cmName = bundleCopyName(sc) // a pod mounts ConfigMaps of its own namespace only
	}
	probe := func(p string) *corev1ac.ProbeApplyConfiguration {
		return corev1ac.Probe().WithHTTPGet(corev1ac.HTTPGetAction().WithPath(p).WithPort(intstr.FromString("http"))).
			WithPeriodSeconds(10).WithTimeoutSeconds(2)
	}
	volumes := []*corev1ac.VolumeApplyConfiguration{
		corev1ac.Volume().WithName("bootstrap").WithConfigMap(corev1ac.ConfigMapVolumeSource().WithName(cmName)),
		corev1ac.Volume().WithName("anthropic").WithSecret(corev1ac.SecretVolumeSource().
			WithSecretName(sc.Spec.Anthropic.APIKeySecretRef.Name).WithDefaultMode(secretFileMode).
			WithItems(corev1ac.KeyToPath().WithKey(sc.Spec.Anthropic.APIKeySecretRef.Key).WithPath(sc.Spec.Anthropic.APIKeySecretRef.Key))),
	}
	mounts := []*corev1ac.VolumeMountApplyConfiguration{
		corev1ac.VolumeMount().WithName("bootstrap").WithMountPath(r.MountDir).WithReadOnly(true),
		corev1ac.VolumeMount().WithName("anthropic").WithMountPath(anthropicMountDir).WithReadOnly(true),
	}
	if w := sc.Spec.Webhook; w != nil {
		ref := w.SigningKeySecretRef
		volumes = append(volumes, corev1ac.Volume().WithName("webhook").WithSecret(corev1ac.SecretVolumeSource().
			WithSecretName(ref.Name).WithDefaultMode(secretFileMode).WithItems(corev1ac.KeyToPath().WithKey(ref.Key).WithPath(ref.Key))))
		mounts = append(mounts, corev1ac.VolumeMount().WithName("webhook").WithMountPath(webhookMountDir).WithReadOnly(true))
	}
	container := corev1ac.Container().
		WithName("confirmer").
		WithImage(image).
		WithArgs(confirmerArgs(sc, p, r.MountDir, replicas)...).
		WithPorts(corev1ac.ContainerPort().WithName("http").WithContainerPort(confirmerPort).WithProtocol(corev1.ProtocolTCP),
			corev1ac.ContainerPort().WithName("metrics").WithContainerPort(confirmerMetricsPort).WithProtocol(corev1.ProtocolTCP)).
		WithLivenessProbe(probe("/healthz")).
		WithReadinessProbe(probe("/readyz")).
		WithVolumeMounts(mounts...).
		WithSecurityContext(corev1ac.SecurityContext().
			WithAllowPrivilegeEscalation(false).
			WithReadOnlyRootFilesystem(true).
			WithRunAsNonRoot(true).
			WithCapabilities(corev1ac.Capabilities().WithDrop("ALL")).
			WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault)))
	container.WithResources(resourcesOf(sc.Spec.Resources))
	pod := corev1ac.PodSpec().
		WithServiceAccountName(name).
		// The token is mounted only because TokenReview and the members Lease need it.
		WithAutomountServiceAccountToken(true).
		WithSecurityContext(corev1ac.PodSecurityContext().
			WithRunAsNonRoot(true).
			WithRunAsUser(confirmerRunAsUser).
			WithRunAsGroup(confirmerRunAsUser).
			// Kubelet gives Secret files group fsGroup: with secretFileMode, the pod's user
			// reads them and nobody else does.
			WithFSGroup(confirmerRunAsUser).
			WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))).
		WithContainers(container).
		WithVolumes(volumes...)
	return appsv1ac.Deployment(name, sc.Namespace).
		WithLabels(confirmerLabels(sc)).
		WithOwnerReferences(controllerReference(sc, "SessionConfirmer")).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(replicas).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(confirmerSelector(sc))).
			WithTemplate(corev1ac.PodTemplateSpec().WithLabels(confirmerLabels(sc)).WithSpec(pod)))
}

// Resources of the confirmer container when spec.resources is empty. The memory request is
// its measured working set with headroom (hack/bench-confirmer.sh: 32 MiB resident idle,
// 45 MiB streaming 200 sessions); 50m CPU is its share at a few hundred calls a second. The
// memory limit bounds what a flood of clients can take from the node: the server caps
// unauthenticated bodies (under 16 MiB) and times out slow ones, so 256Mi is five times the
// working set and only a leak reaches it. No CPU limit: throttling would delay every gate
// answer, and the request already guarantees its share.
var defaultConfirmerResources = corev1.ResourceRequirements{
	Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
	Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
}

// resourcesOf is spec.resources as given, or defaultConfirmerResources when it is empty.
func resourcesOf(r corev1.ResourceRequirements) *corev1ac.ResourceRequirementsApplyConfiguration {
	if len(r.Limits) == 0 && len(r.Requests) == 0 {
		r = *defaultConfirmerResources.DeepCopy()
	}
	ac := corev1ac.ResourceRequirements()
	if len(r.Limits) > 0 {
		ac.WithLimits(r.Limits)
	}
	if len(r.Requests) > 0 {
		ac.WithRequests(r.Requests)
	}
	return ac
}

// applyConfirmer applies every child whose live object differs from the desired one; the
// comparison ignores what the API server defaults, so a steady state sends no write.
func (r *SessionConfirmerReconciler) applyConfirmer(ctx context.Context, sc *gatev1.SessionConfirmer, o *confirmerObserved) error {
	name := confirmerName(sc)
	replicas := confirmerReplicas(sc)
	labels := confirmerLabels(sc)
	children := []struct {
		desired runtime.ApplyConfiguration
		live    client.Object
	}{
		{corev1ac.ServiceAccount(name, sc.Namespace).WithLabels(labels).WithOwnerReferences(controllerReference(sc, "SessionConfirmer")), &corev1.ServiceAccount{}},
		{rbacv1ac.Role(name, sc.Namespace).WithLabels(labels).WithOwnerReferences(controllerReference(sc, "SessionConfirmer")).
			// Only its own Lease, the one whose members annotation the replicas share the
			// sessions through: create cannot be limited by name (the name is not known when
			// it is authorized), get and update can. No list or watch: each replica reads
			// the one Lease by name every renewal.
			WithRules(confirmerRules(sc)...), &rbacv1.Role{}},
		{rbacv1ac.RoleBinding(name, sc.Namespace).WithLabels(labels).WithOwnerReferences(controllerReference(sc, "SessionConfirmer")).
			WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("Role").WithName(name)).
			WithSubjects(rbacv1ac.Subject().WithKind(rbacv1.ServiceAccountKind).WithName(name).WithNamespace(sc.Namespace)), &rbacv1.RoleBinding{}},
		{corev1ac.Service(name, sc.Namespace).WithLabels(labels).WithOwnerReferences(controllerReference(sc, "SessionConfirmer")).
			WithSpec(corev1ac.ServiceSpec().WithSelector(confirmerSelector(sc)).
				WithPorts(corev1ac.ServicePort().WithName("http").WithPort(confirmerPort).WithTargetPort(intstr.FromString("http")).WithProtocol(corev1.ProtocolTCP))), &corev1.Service{}},
		{r.desiredDeployment(sc, o.policy), &appsv1.Deployment{}},
	}
	if replicas > 1 {
		children = append(children, struct {
			desired runtime.ApplyConfiguration
			live    client.Object
		}{policyv1ac.PodDisruptionBudget(name, sc.Namespace).WithLabels(labels).WithOwnerReferences(controllerReference(sc, "SessionConfirmer")).
			WithSpec(policyv1ac.PodDisruptionBudgetSpec().WithMinAvailable(intstr.FromInt32(1)).
				WithSelector(metav1ac.LabelSelector().WithMatchLabels(confirmerSelector(sc)))), &policyv1.PodDisruptionBudget{}})
	} else if o.pdb != nil && metav1.IsControlledBy(o.pdb, sc) {
		// One replica cannot honour minAvailable 1 through a drain; the budget goes.
		if err := r.Client.Delete(ctx, o.pdb); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	if sc.CrossNamespace() {
		// The copy first: the Deployment mounts it.
		if err := r.applyBundleCopy(ctx, sc, o.bundle); err != nil {
			return &childError{child: "ConfigMap " + bundleCopyName(sc), err: err}
		}
	}
	for _, c := range children {
		if err := r.applyIfChanged(ctx, c.desired, c.live, types.NamespacedName{Namespace: sc.Namespace, Name: name}); err != nil {
			return &childError{child: reflect.TypeOf(c.live).Elem().Name() + " " + name, err: err}
		}
	}
	return nil
}

// confirmerRules are the confirmer's permissions in its namespace.
//   - Only its own Lease, the one whose members annotation the replicas share the sessions
//     through: create cannot be limited by name (the name is not known when it is
//     authorized), get and update can. No list or watch: each replica reads the one Lease by
//     name every renewal.
//   - ToolApprovals: it creates one per held call, watches them (its cache is scoped to its
//     label) and writes the states only it may write (Expired, AnsweredInRuntime) through the
//     status subresource; never update or delete of the object (spec is immutable, and the
//     manager's retention deletes).
//   - Events on the ToolApprovals, one per outcome (events.k8s.io, which the recorder patches
//     when it aggregates).
func confirmerRules(sc *gatev1.SessionConfirmer) []*rbacv1ac.PolicyRuleApplyConfiguration {
	return []*rbacv1ac.PolicyRuleApplyConfiguration{
		rbacv1ac.PolicyRule().WithAPIGroups("coordination.k8s.io").WithResources("leases").WithVerbs("create"),
		rbacv1ac.PolicyRule().WithAPIGroups("coordination.k8s.io").WithResources("leases").WithVerbs("get", "update").WithResourceNames(confirmerName(sc)),
		rbacv1ac.PolicyRule().WithAPIGroups(gatev1.GroupVersion.Group).WithResources("toolapprovals").WithVerbs("create", "get", "list", "watch"),
		rbacv1ac.PolicyRule().WithAPIGroups(gatev1.GroupVersion.Group).WithResources("toolapprovals/status").WithVerbs("get", "update", "patch"),
		rbacv1ac.PolicyRule().WithAPIGroups("events.k8s.io").WithResources("events").WithVerbs("create", "patch"),
	}
}

// childError names the child whose apply failed, for the status; the message is the API
// server's.
type childError struct {
	child string
	err   error
}

func (e *childError) Error() string { return e.child + ": " + e.err.Error() }
func (e *childError) Unwrap() error { return e.err }

// applyIfChanged server-side applies desired unless the live object already carries every
// field it sets (DeepDerivative: fields the desired object leaves unset, such as server
// defaults, do not count). live is an empty object of the child's type.
func (r *SessionConfirmerReconciler) applyIfChanged(ctx context.Context, desired runtime.ApplyConfiguration, live client.Object, key types.NamespacedName) error {
	want := live.DeepCopyObject().(client.Object)
	err := r.Client.Get(ctx, key, live)
	if client.IgnoreNotFound(err) != nil {
		return err
	}
	if err == nil {
		raw, err := json.Marshal(desired)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(raw, want); err != nil {
			return err
		}
		want.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
		if equality.Semantic.DeepDerivative(want, live) {
			return nil
		}
	}
	return r.Client.Apply(ctx, desired, client.FieldOwner(gatev1.FieldManager), client.ForceOwnership)
}
