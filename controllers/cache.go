package controllers

import (
	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

// CacheByObject scopes the manager's cache to what it owns: the children carry
// app.kubernetes.io/managed-by=gate-operator, so no ConfigMap, Deployment, Service,
// ServiceAccount, PodDisruptionBudget, Role or RoleBinding of anyone else is cached. Pods are
// watched metadata-only and Secrets are never cached (both set up elsewhere); NetworkPolicies
// are cached in full, since shadow detection reads the others. With reports, the posture
// Reports are cached too, only the manager's own (Kyverno and others keep many of their own).
func CacheByObject(reports bool) map[client.Object]cache.ByObject {
	managed := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{gatev1.LabelManagedBy: gatev1.ManagedByValue})}
	byObject := map[client.Object]cache.ByObject{
		&corev1.ConfigMap{}:             managed,
		&appsv1.Deployment{}:            managed,
		&corev1.Service{}:               managed,
		&corev1.ServiceAccount{}:        managed,
		&policyv1.PodDisruptionBudget{}: managed,
		&rbacv1.Role{}:                  managed,
		&rbacv1.RoleBinding{}:           managed,
	}
	if reports {
		byObject[&reportsv1alpha1.Report{}] = managed
	}
	return byObject
}
