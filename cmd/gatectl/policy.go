package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

// loadPolicies reads every HarnessAgentPolicy of a YAML file (documents separated by ---),
// strictly: an unknown field, or a document of another kind, is an error. Each policy gets the
// defaults the API server would give it on create.
func loadPolicies(path string) ([]*gatev1.HarnessAgentPolicy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var policies []*gatev1.HarnessAgentPolicy
	seen := map[string]bool{}
	for doc := 1; ; doc++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		p, err := decodePolicy(raw)
		if err != nil {
			return nil, fmt.Errorf("%s, document %d: %w", path, doc, err)
		}
		if p == nil {
			continue // an empty document, such as one after a trailing ---
		}
		if seen[policyName(p)] {
			return nil, fmt.Errorf("%s, document %d: a second policy named %s", path, doc, policyName(p))
		}
		seen[policyName(p)] = true
		policies = append(policies, p)
	}
	if len(policies) == 0 {
		return nil, fmt.Errorf("%s holds no HarnessAgentPolicy", path)
	}
	return policies, nil
}

// decodePolicy decodes one YAML document; nil for an empty one.
func decodePolicy(raw []byte) (*gatev1.HarnessAgentPolicy, error) {
	var head map[string]any
	if err := yaml.Unmarshal(raw, &head); err != nil {
		return nil, err
	}
	if head == nil {
		return nil, nil
	}
	apiVersion, _ := head["apiVersion"].(string)
	kind, _ := head["kind"].(string)
	if want := gatev1.GroupVersion.String(); apiVersion != want || kind != "HarnessAgentPolicy" {
		return nil, fmt.Errorf("apiVersion %q, kind %q is not a HarnessAgentPolicy of %s", apiVersion, kind, want)
	}
	p := &gatev1.HarnessAgentPolicy{}
	if err := decodeStrict(raw, p); err != nil {
		return nil, err
	}
	if p.Name == "" {
		return nil, errors.New("metadata.name is required")
	}
	applyDefaults(&p.Spec)
	if p.Generation == 0 {
		p.Generation = 1 // as the API server numbers an object's first version
	}
	return p, nil
}

// applyDefaults sets what the CRD schema defaults (the +kubebuilder:default markers of
// api/v1alpha1), as the API server does on create: a field that is absent or null gets its
// default, and so do the fields of a defaulted object (egress: {} gets ports [443]).
// defaults_test.go holds it to the generated CRD with the API server's own defaulting.
func applyDefaults(s *gatev1.HarnessAgentPolicySpec) {
	if s.PermissionMode == "" {
		s.PermissionMode = gatev1.PermissionModeAllowEdits
	}
	if s.FilterBash == nil {
		s.FilterBash = ptr.To(true)
	}
	if s.DefaultAction == "" {
		s.DefaultAction = gatev1.ActionAllow
	}
	if s.Enforcement == "" {
		s.Enforcement = gatev1.EnforcementEnforce
	}
	if s.FailurePolicy == "" {
		s.FailurePolicy = gatev1.FailurePolicyFail
	}
	if s.Egress.Ports == nil {
		s.Egress.Ports = []int32{443}
	}
}

// policyName is how cases and reports name a policy: namespace/name, or name alone.
func policyName(p *gatev1.HarnessAgentPolicy) string {
	if p.Namespace == "" {
		return p.Name
	}
	return p.Namespace + "/" + p.Name
}
