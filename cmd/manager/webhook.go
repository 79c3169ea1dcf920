package main

import (
	"errors"
	"flag"
	"fmt"
	"path"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/intutic/gate-operator/internal/webhook"
)

// shutdownTimeout is how long the manager waits for its runnables to stop (controller-runtime's
// default GracefulShutdownTimeout); the webhook server's drain must end within it.
const shutdownTimeout = 30 * time.Second

// webhookFlags are the webhook flags read as text and checked after parsing.
type webhookFlags struct {
	certs, dnsNames string
}

// bindWebhookFlags binds the admission webhooks' flags to o, and the ones checkWebhookFlags
// reads after parsing to the returned webhookFlags.
func bindWebhookFlags(fs *flag.FlagSet, o *webhook.Options) *webhookFlags {
	var f webhookFlags
	fs.IntVar(&o.Port, "webhook-port", 0, "port of the admission webhooks (HTTPS): HarnessAgentPolicy validation, SessionConfirmer warnings, the pod injection, and the ToolApproval decisions (who decided, and whether they may); 0 serves none (the chart and config/default pass 9443)")
	fs.StringVar(&f.certs, "webhook-certs", string(webhook.CertsSelf), "who issues the webhooks' serving certificate: self (the manager keeps a CA and a certificate in --webhook-secret, renews them, and injects the CA into --webhook-configuration) or external (cert-manager, say, writes --webhook-cert-dir and the CA bundle)")
	fs.StringVar(&o.Certs.Dir, "webhook-cert-dir", "/etc/gate-operator/webhook-certs", "directory holding the webhooks' tls.crt and tls.key: the Secret mounted into the pod (reloaded when it changes)")
	fs.StringVar(&o.Certs.Namespace, "webhook-namespace", "", "the manager's namespace, where --webhook-secret and --webhook-service are; required with --webhook-certs=self")
	fs.StringVar(&o.Certs.SecretName, "webhook-secret", "gate-operator-webhook-cert", "the Secret holding the self-managed CA and serving certificate; it must exist (the install creates it empty)")
	fs.StringVar(&o.Certs.ServiceName, "webhook-service", "gate-operator-webhook", "the webhooks' Service: the certificate is for <service>.<namespace>.svc")
	fs.StringVar(&f.dnsNames, "webhook-cert-dns-names", "", "further DNS names of the self-managed certificate, comma-separated (a manager run outside the cluster, reached through a url clientConfig, is localhost)")
	fs.StringVar(&o.Certs.ConfigurationName, "webhook-configuration", "gate-operator", "name of the ValidatingWebhookConfiguration and the MutatingWebhookConfiguration whose caBundle the manager keeps")
	fs.DurationVar(&o.Certs.CALifetime, "webhook-ca-lifetime", webhook.DefaultCALifetime, "lifetime of a self-managed CA; renewing the CA changes the caBundle, so keep it long")
	fs.DurationVar(&o.Certs.CertLifetime, "webhook-cert-lifetime", webhook.DefaultCertLifetime, "lifetime of a self-managed serving certificate")
	fs.DurationVar(&o.Certs.RenewBefore, "webhook-cert-renew-before", webhook.DefaultRenewBefore, "renew a self-managed CA or certificate this long before it expires")
	fs.DurationVar(&o.Certs.CheckInterval, "webhook-cert-check-interval", webhook.DefaultCheckInterval, "how often the self-managed certificates are checked for renewal (also whenever their Secret or a webhook configuration changes)")
	fs.DurationVar(&o.ShutdownDelay, "webhook-shutdown-delay", 5*time.Second, "how long a stopping manager (its pod deleted by a rollout or an eviction) keeps answering admissions, closing each connection after its answer and failing /readyz, while the webhook Service's endpoints drop it, so no admission reaches a closed port; below the manager's 30s shutdown timeout and the pod's terminationGracePeriodSeconds")
	fs.StringVar(&o.GateHookImage, "gate-hook-image", "", "image of the install-gate-hook init container the pod webhook adds (it must carry /gate-hook); empty is --confirmer-image")
	return &f
}

// checkWebhookFlags validates the webhook flags of s once parsed; every error names a flag.
func checkWebhookFlags(s *settings, f *webhookFlags) error {
	o := &s.webhooks
	o.Bootstrap = s.bootstrap
	// The NetworkPolicy webhook judges by the ceilings the controller narrows to, and lets the
	// same DNS pods be reached.
	o.DNS = s.dns
	o.Namespaces = s.namespaces
	if o.GateHookImage == "" {
		o.GateHookImage = s.confirmerImage
	}
	o.Certs.Mode = webhook.CertMode(f.certs)
	if o.Port == 0 {
		return nil
	}
	if o.Port < 0 || o.Port > 65535 {
		return fmt.Errorf("--webhook-port %d is not a port", o.Port)
	}
	if err := checkShutdownDelay(o.ShutdownDelay); err != nil {
		return err
	}
	// gate-hook --install writes <dir>/gate-hook, so the injected pods have the binary only there.
	if path.Base(s.bootstrap.HookBin) != "gate-hook" {
		return fmt.Errorf("--gate-hook-path %q must end in /gate-hook when the pod webhook injects it (--webhook-port): the init container installs <dir>/gate-hook", s.bootstrap.HookBin)
	}
	if !path.IsAbs(o.Certs.Dir) {
		return fmt.Errorf("--webhook-cert-dir %q is not an absolute path", o.Certs.Dir)
	}
	switch o.Certs.Mode {
	case webhook.CertsExternal:
		return nil
	case webhook.CertsSelf:
	default:
		return fmt.Errorf("--webhook-certs %q is not self or external", f.certs)
	}
	for _, name := range strings.Split(f.dnsNames, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return fmt.Errorf("--webhook-cert-dns-names: %q: %s", name, strings.Join(errs, "; "))
		}
		o.Certs.ExtraDNSNames = append(o.Certs.ExtraDNSNames, name)
	}
	for _, f := range []struct{ flag, value string }{
		{"--webhook-namespace", o.Certs.Namespace},
		{"--webhook-secret", o.Certs.SecretName},
		{"--webhook-service", o.Certs.ServiceName},
		{"--webhook-configuration", o.Certs.ConfigurationName},
	} {
		if f.value == "" {
			return fmt.Errorf("%s is required with --webhook-certs=self", f.flag)
		}
		if errs := validation.IsDNS1123Subdomain(f.value); len(errs) > 0 {
			return fmt.Errorf("%s %q: %s", f.flag, f.value, strings.Join(errs, "; "))
		}
	}
	c := o.Certs
	switch {
	case c.CheckInterval <= 0:
		return errors.New("--webhook-cert-check-interval must be positive")
	case c.RenewBefore <= c.CheckInterval:
		return fmt.Errorf("--webhook-cert-renew-before (%s) must be longer than --webhook-cert-check-interval (%s), or a certificate could expire between two checks", c.RenewBefore, c.CheckInterval)
	case c.CertLifetime <= c.RenewBefore:
		return fmt.Errorf("--webhook-cert-lifetime (%s) must be longer than --webhook-cert-renew-before (%s), or every check renews it", c.CertLifetime, c.RenewBefore)
	case c.CALifetime <= c.CertLifetime:
		return fmt.Errorf("--webhook-ca-lifetime (%s) must be longer than --webhook-cert-lifetime (%s)", c.CALifetime, c.CertLifetime)
	}
	return nil
}

// checkShutdownDelay refuses a drain the manager's shutdown timeout would cut short.
func checkShutdownDelay(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("--webhook-shutdown-delay %s is negative", d)
	}
	if d >= shutdownTimeout {
		return fmt.Errorf("--webhook-shutdown-delay %s is not below the manager's %s shutdown timeout", d, shutdownTimeout)
	}
	return nil
}

// webhookServer is the manager's webhook server: ours when webhooks are served, else one that
// never listens (controller-runtime would otherwise build a default one on first use).
func webhookServer(s *webhook.Server) ctrlwebhook.Server {
	if s == nil {
		return ctrlwebhook.NewServer(ctrlwebhook.Options{Port: -1})
	}
	return s
}
