package main

import (
	"errors"

	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// decodeStrict decodes a YAML document as the API server decodes a manifest under strict field
// validation: field names are case-sensitive, and an unknown or duplicate field is an error that
// names its path (unknown field "spec.rules[0].wen").
func decodeStrict(data []byte, v any) error {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return err
	}
	strict, err := sigsjson.UnmarshalStrict(j, v)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}
