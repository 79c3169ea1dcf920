package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"sigs.k8s.io/yaml"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
)

// apiServerDefaults applies the generated CRD's defaults to a HarnessAgentPolicy as the API
// server does on create: with the apiextensions-apiserver's own structural defaulting.
func apiServerDefaults(t *testing.T, obj map[string]any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "gate.intutic.io_harnessagentpolicies.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		t.Fatal(err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name != gatev1.GroupVersion.Version {
			continue
		}
		var internal apiextensions.JSONSchemaProps
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &internal, nil); err != nil {
			t.Fatal(err)
		}
		s, err := structuralschema.NewStructural(&internal)
		if err != nil {
			t.Fatal(err)
		}
		structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, s)
		structuraldefaulting.Default(obj, s)
		return
	}
	t.Fatalf("the CRD has no version %s", gatev1.GroupVersion.Version)
}

// applyDefaults gives a policy exactly the defaults the API server would, for specs that set
// nothing, null, some or all of the defaulted fields: a default added to, changed in or removed
// from the CRD's markers fails here until applyDefaults follows.
func TestApplyDefaultsAgreesWithTheCRD(t *testing.T) {
	sample, err := os.ReadFile(samplePolicy)
	if err != nil {
		t.Fatal(err)
	}
	const head = "apiVersion: gate.intutic.io/v1alpha1\nkind: HarnessAgentPolicy\nmetadata: {name: p, namespace: agents}\n"
	for name, doc := range map[string]string{
		"nothing set":                          head + "spec: {podSelector: {}}\n",
		"nulls":                                head + "spec: {podSelector: {}, permissionMode: null, filterBash: null, defaultAction: null, failurePolicy: null, egress: null}\n",
		"egress without ports":                 head + "spec: {podSelector: {}, egress: {allowedHosts: [github.com]}}\n",
		"a rule with only the required fields": head + "spec: {podSelector: {}, rules: [{name: r, action: Allow}], tools: {approve: [x]}}\n",
		"everything set":                       head + "spec: {podSelector: {}, permissionMode: allow-reads, filterBash: false, defaultAction: Block, failurePolicy: Ignore, egress: {ports: [8443]}}\n",
		"the sample":                           string(sample),
	} {
		t.Run(name, func(t *testing.T) {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				t.Fatal(err)
			}
			apiServerDefaults(t, obj)
			defaulted, err := yaml.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			var server, ours gatev1.HarnessAgentPolicy
			if err := yaml.UnmarshalStrict(defaulted, &server); err != nil {
				t.Fatal(err)
			}
			if err := yaml.UnmarshalStrict([]byte(doc), &ours); err != nil {
				t.Fatal(err)
			}
			applyDefaults(&ours.Spec)
			if !reflect.DeepEqual(server.Spec, ours.Spec) {
				want, _ := json.Marshal(server.Spec)
				got, _ := json.Marshal(ours.Spec)
				t.Fatalf("the API server defaults the spec to\n%s\napplyDefaults to\n%s", want, got)
			}
		})
	}
}

// The comparison above is not vacuous: the CRD does default the fields the gate reads.
func TestTheCRDDefaultsWhatTheGateReads(t *testing.T) {
	obj := map[string]any{"spec": map[string]any{"podSelector": map[string]any{}}}
	apiServerDefaults(t, obj)
	spec := obj["spec"].(map[string]any)
	if spec["defaultAction"] != "Allow" || spec["failurePolicy"] != "Fail" {
		t.Fatalf("the CRD's defaults: %v", spec)
	}
}
