package localenv

import (
	"context"
	"os"
	"path/filepath"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

// Samples says how the config/samples objects are applied: the namespace they live in, the
// Secrets the SessionConfirmer references, and where its sessions are.
type Samples struct {
	Namespace    string
	APIKey       string // Secret anthropic, key api-key
	WebhookKey   string // Secret anthropic-webhook, key signing-key
	BaseURL      string // the Sessions API (the fake)
	AgentID      string
	PollInterval time.Duration // 0 keeps the sample's
	Deadline     time.Duration // how long an Ask waits for a human; 0 keeps the sample's
}

// ApplySamples creates the namespace, the Secrets and the two samples, the SessionConfirmer
// pointed at BaseURL and AgentID.
func (e *Env) ApplySamples(ctx context.Context, s Samples) error {
	c := e.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.Namespace}}); err != nil {
		return err
	}
	p := &gatev1.HarnessAgentPolicy{}
	if err := e.ReadSample("gate_v1alpha1_harnessagentpolicy.yaml", p); err != nil {
		return err
	}
	p.Namespace = s.Namespace
	if err := c.Create(ctx, p); err != nil {
		return err
	}
	return e.ApplySessionConfirmer(ctx, s)
}

// ApplySessionConfirmer creates the sample SessionConfirmer in s.Namespace, which exists and has
// the sample's HarnessAgentPolicy, with its Secrets, pointed at BaseURL and AgentID.
func (e *Env) ApplySessionConfirmer(ctx context.Context, s Samples) error {
	c := e.Client
	for name, kv := range map[string][2]string{"anthropic": {"api-key", s.APIKey}, "anthropic-webhook": {"signing-key", s.WebhookKey}} {
		if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: name}, Data: map[string][]byte{kv[0]: []byte(kv[1])}}); err != nil {
			return err
		}
	}
	sc := &gatev1.SessionConfirmer{}
	if err := e.ReadSample("gate_v1alpha1_sessionconfirmer.yaml", sc); err != nil {
		return err
	}
	sc.Namespace = s.Namespace
	sc.Spec.Anthropic.BaseURL = s.BaseURL
	sc.Spec.Sessions.AgentIDs = []string{s.AgentID}
	if s.PollInterval > 0 {
		sc.Spec.Sessions.PollInterval = &metav1.Duration{Duration: s.PollInterval}
	}
	if s.Deadline > 0 {
		sc.Spec.HumanApproval.Deadline = &metav1.Duration{Duration: s.Deadline}
	}
	return c.Create(ctx, sc)
}

// ReadSample decodes config/samples/<file> strictly into obj.
func (e *Env) ReadSample(file string, obj any) error {
	b, err := os.ReadFile(filepath.Join(e.Root, "config", "samples", file))
	if err != nil {
		return err
	}
	return yaml.UnmarshalStrict(b, obj)
}

// WebhooksOff removes what admits pods on the gate's terms (the operator's pod webhooks, mutating
// and validating, and the governed-pods ValidatingAdmissionPolicyBinding), as a cluster whose
// webhooks are off or not yet installed; restore puts them back as they were (the rotator's CA
// bundle included). Pods created in between are admitted without the injection.
func (e *Env) WebhooksOff(ctx context.Context) (restore func() error, err error) {
	e.Step("turning the operator's pod admission off (its webhook configurations and the governed-pods policy binding), as a cluster with the webhooks off")
	saved := []client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "gate-operator"}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "gate-operator"}},
		&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "gate-operator-governed-pods"}},
	}
	for _, obj := range saved {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return nil, err
		}
	}
	for _, obj := range saved {
		if err := e.Client.Delete(ctx, obj); err != nil {
			return nil, err
		}
	}
	return func() error {
		e.Step("turning the operator's pod admission back on")
		for _, obj := range saved {
			obj.SetResourceVersion("")
			obj.SetUID("")
			obj.SetCreationTimestamp(metav1.Time{})
			obj.SetManagedFields(nil)
			if err := e.Client.Create(ctx, obj); err != nil {
				return err
			}
		}
		return nil
	}, nil
}
