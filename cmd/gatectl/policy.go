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

	corev1 "k8s.io/api/core/v1"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

// policyFile is what a policy file holds: the namespace policies the cases are decided with,
// and what layers them as the cluster would: cluster policies, GateExceptions, and the
// Namespaces whose labels the cluster policies' selectors read.
type policyFile struct {
	policies   []*gatev1.HarnessAgentPolicy
	cluster    []*gatev1.ClusterHarnessAgentPolicy
	exceptions []*gatev1.GateException
	// namespaceLabels are the labels of the file's Namespaces; a namespace the file does not
	// hold has only the label the API server gives every namespace, kubernetes.io/metadata.name.
	namespaceLabels map[string]map[string]string
}

// loadPolicies reads a YAML file (documents separated by ---) of HarnessAgentPolicies and,
// optionally, ClusterHarnessAgentPolicies, GateExceptions and Namespaces, strictly: an unknown
// field, or a document of another kind, is an error. Each object gets the defaults the API
// server would give it on create.
func loadPolicies(path string) (*policyFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	f := &policyFile{namespaceLabels: map[string]map[string]string{}}
	seen := map[string]bool{}
	for doc := 1; ; doc++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		obj, err := decodeDocument(raw)
		if err != nil {
			return nil, fmt.Errorf("%s, document %d: %w", path, doc, err)
		}
		key := ""
		switch o := obj.(type) {
		case nil:
			continue // an empty document, such as one after a trailing ---
		case *gatev1.HarnessAgentPolicy:
			key = "HarnessAgentPolicy " + policyName(o)
			f.policies = append(f.policies, o)
		case *gatev1.ClusterHarnessAgentPolicy:
			key = "ClusterHarnessAgentPolicy " + o.Name
			f.cluster = append(f.cluster, o)
		case *gatev1.GateException:
			key = "GateException " + o.Namespace + "/" + o.Name
			f.exceptions = append(f.exceptions, o)
		case *corev1.Namespace:
			key = "Namespace " + o.Name
			f.namespaceLabels[o.Name] = o.Labels
		}
		if seen[key] {
			return nil, fmt.Errorf("%s, document %d: a second %s", path, doc, key)
		}
		seen[key] = true
	}
	if len(f.policies) == 0 {
		return nil, fmt.Errorf("%s holds no HarnessAgentPolicy", path)
	}
	return f, nil
}

// labelsOf are a namespace's labels, as the cluster would have them.
func (f *policyFile) labelsOf(namespace string) map[string]string {
	out := map[string]string{corev1.LabelMetadataName: namespace}
	for k, v := range f.namespaceLabels[namespace] {
		out[k] = v
	}
	return out
}

// decodeDocument decodes one YAML document of a policy file; nil for an empty one.
func decodeDocument(raw []byte) (any, error) {
	var head map[string]any
	if err := yaml.Unmarshal(raw, &head); err != nil {
		return nil, err
	}
	if head == nil {
		return nil, nil
	}
	apiVersion, _ := head["apiVersion"].(string)
	kind, _ := head["kind"].(string)
	switch {
	case apiVersion == "v1" && kind == "Namespace":
		ns := &corev1.Namespace{}
		if err := decodeStrict(raw, ns); err != nil {
			return nil, err
		}
		return ns, nil
	case apiVersion != gatev1.GroupVersion.String():
	case kind == "HarnessAgentPolicy":
		return decodePolicy(raw)
	case kind == "ClusterHarnessAgentPolicy":
		c := &gatev1.ClusterHarnessAgentPolicy{}
		if err := decodeStrict(raw, c); err != nil {
			return nil, err
		}
		if c.Name == "" {
			return nil, errors.New("metadata.name is required")
		}
		applyClusterDefaults(&c.Spec)
		if c.Generation == 0 {
			c.Generation = 1
		}
		return c, nil
	case kind == "GateException":
		e := &gatev1.GateException{}
		if err := decodeStrict(raw, e); err != nil {
			return nil, err
		}
		if e.Name == "" || e.Namespace == "" {
			return nil, errors.New("metadata.name and metadata.namespace are required")
		}
		return e, nil
	}
	return nil, fmt.Errorf("apiVersion %q, kind %q is not a HarnessAgentPolicy, ClusterHarnessAgentPolicy or GateException of %s, or a v1 Namespace", apiVersion, kind, gatev1.GroupVersion)
}

// decodePolicy decodes a HarnessAgentPolicy document.
func decodePolicy(raw []byte) (*gatev1.HarnessAgentPolicy, error) {
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

// applyClusterDefaults sets what the CRD schema defaults for a ClusterHarnessAgentPolicy.
func applyClusterDefaults(s *gatev1.ClusterHarnessAgentPolicySpec) {
	if s.Priority == 0 {
		s.Priority = 100
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
}

// policyName is how cases and reports name a policy: namespace/name, or name alone.
func policyName(p *gatev1.HarnessAgentPolicy) string {
	if p.Namespace == "" {
		return p.Name
	}
	return p.Namespace + "/" + p.Name
}
