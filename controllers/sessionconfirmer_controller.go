package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/bootstrap"
	"github.com/intutic/gate-operator/internal/confirmerconfig"
)

// +kubebuilder:rbac:groups=gate.intutic.io,resources=sessionconfirmers,verbs=list;watch
// +kubebuilder:rbac:groups=gate.intutic.io,resources=sessionconfirmers/status,verbs=patch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=services;serviceaccounts,verbs=list;watch;create;patch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=list;watch;create;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=list;watch;create;patch

// Secrets are read past the cache (APIReader), one by name: get, never list or watch.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// The confirmer's Role grants it its Lease; RBAC lets the manager create that Role only if it
// holds the same permissions itself (the escalation check), so it holds them. The manager
// takes no Lease with them.
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update

// The confirmer's Role also grants it the ToolApprovals it creates and answers; the manager holds
// the same for the same reason.
// +kubebuilder:rbac:groups=gate.intutic.io,resources=toolapprovals,verbs=create;get;list;watch
// +kubebuilder:rbac:groups=gate.intutic.io,resources=toolapprovals/status,verbs=get;update;patch

// SessionConfirmerReconciler runs a confirmer Deployment for each SessionConfirmer: a
// Deployment, Service and ServiceAccount, a Role and RoleBinding for its Lease (the replicas'
// membership, or leader election when run by hand),
// and a PodDisruptionBudget when it has more than one replica.
type SessionConfirmerReconciler struct {
	Client client.Client
	// APIReader reads Secrets straight from the API server: they are checked, never cached.
	APIReader client.Reader
	// ConfirmerImage is the image unless the spec overrides it.
	ConfirmerImage string
	// MountDir is where the policy's bootstrap bundle is mounted in the confirmer.
	MountDir string
	// PlatformNamespaces are the namespaces whose SessionConfirmers may name a policy in
	// another namespace (spec.policyRef.namespace); a SessionConfirmer elsewhere may not.
	PlatformNamespaces []string
	// Bootstrap are the installation facts the policies' bundles are rendered for: a bundle is
	// copied into a platform namespace only when it verifies against them.
	Bootstrap bootstrap.Options
	// Namespaces are the namespaces the manager serves (its cache holds only these); empty is
	// every namespace. A policy outside them cannot be read, so naming one is refused.
	Namespaces []string
}

// secretRecheck is how often a SessionConfirmer waiting for a Secret looks again.
const secretRecheck = 30 * time.Second

// Reconcile implements reconcile.Reconciler.
func (r *SessionConfirmerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	sc := &gatev1.SessionConfirmer{}
	if err := r.Client.Get(ctx, req.NamespacedName, sc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !sc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	// Phases: gather, then apply the children once the policy and the Secrets are there. The
	// status is written once, after them, whatever they did.
	var o *confirmerObserved
	var applied confirmerApplied
	defer func() {
		if err := r.writeConfirmerStatus(ctx, sc, o, applied, retErr); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()
	o, err := r.gatherConfirmer(ctx, sc)
	if err != nil {
		return ctrl.Result{}, err
	}
	if o.renderable(sc) {
		applied = confirmerApplied{attempted: true, err: r.applyConfirmer(ctx, sc, o)}
		if applied.err != nil {
			return ctrl.Result{}, applied.err
		}
	}
	if len(o.missingSecrets) > 0 {
		return ctrl.Result{RequeueAfter: secretRecheck}, nil
	}
	return ctrl.Result{}, nil
}

// confirmerApplied is what the apply phase did: attempted is set when it applied the
// children (the policy and the Secrets are there), whether or not the API server accepted
// them, and err is the refusal of the first one it refused (a *childError).
type confirmerApplied struct {
	attempted bool
	err       error
}

// confirmerObserved is what a reconcile reads.
type confirmerObserved struct {
	// refused says why spec.policyRef.namespace may not be used; nothing else is read then.
	refused string
	policy  *gatev1.HarnessAgentPolicy // nil when absent
	// bundle is the policy's bootstrap ConfigMap, read only for a policy of another namespace
	// (it is copied); nil when absent.
	bundle         *corev1.ConfigMap
	deployment     *appsv1.Deployment // nil when absent
	pdb            *policyv1.PodDisruptionBudget
	missingSecrets []string // "secret/key" that do not exist
}

// renderable reports whether the children can be applied: the policy may be named, it
// exists (with its bundle, when that is copied), and the Secrets are there.
func (o *confirmerObserved) renderable(sc *gatev1.SessionConfirmer) bool {
	return o.refused == "" && o.policy != nil && (!sc.CrossNamespace() || o.bundle != nil) && len(o.missingSecrets) == 0
}

func (r *SessionConfirmerReconciler) gatherConfirmer(ctx context.Context, sc *gatev1.SessionConfirmer) (*confirmerObserved, error) {
	o := &confirmerObserved{}
	if o.refused = r.policyNamespaceRefusal(sc); o.refused != "" {
		return o, nil
	}
	p := &gatev1.HarnessAgentPolicy{}
	if found, err := getOptional(ctx, r.Client, types.NamespacedName{Namespace: sc.PolicyNamespace(), Name: sc.Spec.PolicyRef.Name}, p); err != nil {
		return nil, fmt.Errorf("reading HarnessAgentPolicy %s: %w", sc.PolicyDisplayName(), err)
	} else if found {
		o.policy = p
		if sc.CrossNamespace() {
			if o.bundle, err = r.gatherBundle(ctx, p); err != nil {
				return nil, err
			}
		}
	}
	refs := []gatev1.SecretKeyReference{sc.Spec.Anthropic.APIKeySecretRef}
	if sc.Spec.Webhook != nil {
		refs = append(refs, sc.Spec.Webhook.SigningKeySecretRef)
	}
	for _, ref := range refs {
		s := &corev1.Secret{}
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: sc.Namespace, Name: ref.Name}, s)
		switch {
		case apierrors.IsNotFound(err):
			o.missingSecrets = append(o.missingSecrets, ref.Name+"/"+ref.Key)
		case err != nil:
			return nil, fmt.Errorf("reading Secret %s: %w", ref.Name, err)
		case len(s.Data[ref.Key]) == 0:
			o.missingSecrets = append(o.missingSecrets, ref.Name+"/"+ref.Key)
		}
	}
	key := types.NamespacedName{Namespace: sc.Namespace, Name: confirmerName(sc)}
	d := &appsv1.Deployment{}
	if found, err := getOptional(ctx, r.Client, key, d); err != nil {
		return nil, fmt.Errorf("reading Deployment %s: %w", key.Name, err)
	} else if found {
		o.deployment = d
	}
	pdb := &policyv1.PodDisruptionBudget{}
	if found, err := getOptional(ctx, r.Client, key, pdb); err != nil {
		return nil, fmt.Errorf("reading PodDisruptionBudget %s: %w", key.Name, err)
	} else if found {
		o.pdb = pdb
	}
	return o, nil
}

func confirmerName(sc *gatev1.SessionConfirmer) string { return confirmerconfig.ServiceName(sc.Name) }

// SetupWithManager registers the controller: it owns the confirmer's children and follows
// the referenced policies and their bootstrap ConfigMaps.
func (r *SessionConfirmerReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.MountDir == "" {
		r.MountDir = "/etc/gate/bootstrap"
	}
	if r.ConfirmerImage == "" {
		return fmt.Errorf("the confirmer image is not set")
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &gatev1.SessionConfirmer{}, policyRefIndex, policyRefIndexValue); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&gatev1.SessionConfirmer{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ServiceAccount{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Owns(&rbacv1.Role{}).
		Owns(&rbacv1.RoleBinding{}).
		Watches(&gatev1.HarnessAgentPolicy{}, handler.EnqueueRequestsFromMapFunc(r.confirmersOfPolicy)).
		// The bundle copies and their sources (the cache holds the manager's ConfigMaps only).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.confirmersOfConfigMap)).
		Named("sessionconfirmer").
		Complete(r)
}
