package webhooktest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Configurations reads the webhook configurations the install ships (config/webhook/webhooks.yaml)
// for envtest's WebhookInstallOptions, which points each webhook's Service at the local server as
// https://<host:port>/<path>: the paths lose their leading slash here.
func Configurations(path string) ([]*admissionregv1.ValidatingWebhookConfiguration, []*admissionregv1.MutatingWebhookConfiguration, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var validating []*admissionregv1.ValidatingWebhookConfiguration
	var mutating []*admissionregv1.MutatingWebhookConfiguration
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, nil, err
		}
		switch meta.Kind {
		case "ValidatingWebhookConfiguration":
			v := &admissionregv1.ValidatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict(doc, v); err != nil {
				return nil, nil, err
			}
			if len(v.Webhooks) == 0 {
				continue // the cluster policies' configuration, which the manager fills
			}
			for i := range v.Webhooks {
				trimPath(&v.Webhooks[i].ClientConfig)
			}
			validating = append(validating, v)
		case "MutatingWebhookConfiguration":
			m := &admissionregv1.MutatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict(doc, m); err != nil {
				return nil, nil, err
			}
			if len(m.Webhooks) == 0 {
				continue // the cluster policies' configuration, which the manager fills
			}
			for i := range m.Webhooks {
				trimPath(&m.Webhooks[i].ClientConfig)
			}
			mutating = append(mutating, m)
		case "":
		default:
			return nil, nil, fmt.Errorf("%s: unexpected kind %s", path, meta.Kind)
		}
	}
	if len(validating) != 1 || len(mutating) != 1 {
		return nil, nil, fmt.Errorf("%s: want one validating and one mutating configuration, got %d and %d", path, len(validating), len(mutating))
	}
	return validating, mutating, nil
}

func trimPath(cc *admissionregv1.WebhookClientConfig) {
	if cc.Service != nil && cc.Service.Path != nil {
		p := strings.TrimPrefix(*cc.Service.Path, "/")
		cc.Service.Path = &p
	}
}
