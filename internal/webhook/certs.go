package webhook

import (
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

// CertMode says who issues the webhook serving certificate.
type CertMode string

const (
	// CertsSelf means the manager keeps a CA and a serving certificate in a Secret, renews them, and
	// injects the CA into its webhook configurations (open-policy-agent/cert-controller).
	CertsSelf CertMode = "self"
	// CertsExternal means another issuer (cert-manager, with cert-manager.io/inject-ca-from on the
	// configurations) writes the certificate into the directory; the manager only serves it.
	CertsExternal CertMode = "external"
)

// Defaults of the self-managed certificates.
const (
	DefaultCALifetime    = 10 * 365 * 24 * time.Hour
	DefaultCertLifetime  = 365 * 24 * time.Hour
	DefaultRenewBefore   = 90 * 24 * time.Hour
	DefaultCheckInterval = time.Hour
)

// CertOptions say where the serving certificate comes from.
type CertOptions struct {
	Mode CertMode
	// Dir holds tls.crt and tls.key: the Secret mounted into the manager pod.
	Dir string

	// The rest is for CertsSelf.

	// Namespace is the manager's: its Secret and Service are there.
	Namespace string
	// SecretName is the Secret the CA and the serving certificate are kept in. It must exist
	// (the install creates it empty); every replica reads it, and the first to find it empty or
	// due fills it (the others' writes conflict, and they read the winner's).
	SecretName string
	// ServiceName is the webhook Service: the certificate is for <service>.<namespace>.svc.
	ServiceName string
	// ExtraDNSNames are further names the certificate is for (tests serve on localhost).
	ExtraDNSNames []string
	// ConfigurationName names both the ValidatingWebhookConfiguration and the
	// MutatingWebhookConfiguration whose caBundle is kept to the CA.
	ConfigurationName string
	// CALifetime and CertLifetime are how long a new CA and serving certificate are valid;
	// either is renewed when it would expire within RenewBefore, which is checked every
	// CheckInterval (and whenever the Secret or a configuration changes).
	CALifetime, CertLifetime, RenewBefore, CheckInterval time.Duration

	// controllerName names the rotator's controller, unique per process (tests run several).
	controllerName string
}

// addRotator adds cert-controller's rotator to mgr, closing ready once the certificate is in
// Dir and the CA is in both configurations. It runs on every replica (RequireLeaderElection
// false): with leader election on, a rotator only on the leader would leave the others without
// a certificate they can start with, and the replicas share the Secret through the API server's
// optimistic concurrency, so two never write different certificates that both stick.
func addRotator(mgr manager.Manager, o CertOptions, ready chan struct{}) error {
	name := o.controllerName
	if name == "" {
		name = "webhook-cert-rotator"
	}
	dns := o.ServiceName + "." + o.Namespace + ".svc"
	return rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey:      types.NamespacedName{Namespace: o.Namespace, Name: o.SecretName},
		CertDir:        o.Dir,
		CAName:         "gate-operator-webhook-ca",
		CAOrganization: "gate-operator",
		DNSName:        dns,
		ExtraDNSNames:  o.ExtraDNSNames,
		IsReady:        ready,
		Webhooks: []rotator.WebhookInfo{
			{Name: o.ConfigurationName, Type: rotator.Validating},
			{Name: o.ConfigurationName, Type: rotator.Mutating},
		},
		FieldOwner:             gatev1.FieldManager,
		RequireLeaderElection:  false,
		CaCertDuration:         orDefault(o.CALifetime, DefaultCALifetime),
		ServerCertDuration:     orDefault(o.CertLifetime, DefaultCertLifetime),
		LookaheadInterval:      orDefault(o.RenewBefore, DefaultRenewBefore),
		RotationCheckFrequency: orDefault(o.CheckInterval, DefaultCheckInterval),
		ControllerName:         name,
	})
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}
