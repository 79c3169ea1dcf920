package webhook

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
)

var certExpiryDesc = prometheus.NewDesc("gate_operator_webhook_certificate_expiration_timestamp_seconds",
	"When the webhooks' serving certificate in this replica's certificate directory expires (its notAfter), as Unix seconds; no series while there is none. Self-managed or cert-manager's alike: a value that stays close to now means renewal has stopped.",
	nil, nil)

// certMetrics serves the expiry of the certificate in dir, read at each scrape: the file the
// webhook server serves, whoever wrote it (the rotator through the mounted Secret, or
// cert-manager), so the metric follows a renewal once kubelet has refreshed the mount.
type certMetrics struct {
	dir string
	reg prometheus.Registerer
}

// Start registers the metric until ctx ends; every replica serves its own certificate.
func (m *certMetrics) Start(ctx context.Context) error {
	if err := m.reg.Register(m); err != nil {
		return err
	}
	<-ctx.Done()
	m.reg.Unregister(m)
	return nil
}

func (*certMetrics) NeedLeaderElection() bool { return false }

func (*certMetrics) Describe(ch chan<- *prometheus.Desc) { ch <- certExpiryDesc }

func (m *certMetrics) Collect(ch chan<- prometheus.Metric) {
	if cert := servingCert(m.dir); cert != nil {
		ch <- prometheus.MustNewConstMetric(certExpiryDesc, prometheus.GaugeValue, float64(cert.NotAfter.Unix()))
	}
}

// servingCert is the first certificate of dir/tls.crt (the leaf), or nil when there is none
// that parses.
func servingCert(dir string) *x509.Certificate {
	data, err := os.ReadFile(filepath.Join(dir, "tls.crt"))
	if err != nil {
		return nil
	}
	for {
		var block *pem.Block
		if block, data = pem.Decode(data); block == nil {
			return nil
		}
		if block.Type == "CERTIFICATE" {
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil
			}
			return cert
		}
	}
}
