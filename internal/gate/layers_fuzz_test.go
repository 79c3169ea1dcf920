package gate_test

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/intutic/gate-operator/internal/gate"
)

func FuzzParsePodLabels(f *testing.F) {
	for _, s := range []string{"", "app=\"web\"\n", "app=\"web\"\nexample.com/team=\"a\"", `a="\u00e9"`, `a="b`, "=\"\"", "a=\"b\"\n\n", `a="b"=""`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		labels, err := gate.ParsePodLabels(data)
		if err != nil {
			if labels != nil {
				t.Fatal("labels returned with an error")
			}
			return
		}
		// What parses is what the kubelet would write for these labels: one line per label,
		// the value quoted, in any order, with or without a final newline.
		lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		if len(bytes.TrimSuffix(data, []byte("\n"))) == 0 {
			lines = nil
		}
		if len(lines) != len(labels) {
			t.Fatalf("%d lines, %d labels", len(lines), len(labels))
		}
		for _, line := range lines {
			k, _, _ := strings.Cut(line, "=")
			v, ok := labels[k]
			if !ok {
				t.Fatalf("line %q: key not in %v", line, labels)
			}
			if again, err := gate.ParsePodLabels([]byte(k + "=" + strconv.Quote(v))); err != nil || again[k] != v {
				t.Fatalf("label %q=%q does not parse back as the kubelet writes it: %v", k, v, err)
			}
		}
	})
}

func FuzzLoadLayersIndex(f *testing.F) {
	data, err := gate.BuildLayersIndex(gate.LayersIndex{Namespace: "team-a", WorkspaceID: "ws", Namespaced: true, Layers: []gate.Layer{
		rawLayer("a", 0, gate.Requirement{Key: "app", Operator: gate.OperatorIn, Values: []string{"web"}}),
		rawLayer("b", 3),
	}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte(`{}`))
	f.Add([]byte(``))
	f.Add(bytes.Replace(data, []byte(`"In"`), []byte(`"Gt"`), 1))
	f.Fuzz(func(t *testing.T, data []byte) {
		idx, err := gate.LoadLayersIndex(data, "")
		if err != nil {
			if _, ok := err.(*gate.SnapshotError); !ok {
				t.Fatalf("LoadLayersIndex error is %T, want *SnapshotError", err)
			}
			return
		}
		// An index that loads is canonical: building it again gives the same bytes.
		again, err := gate.BuildLayersIndex(*idx)
		if err != nil || !bytes.Equal(again, data) {
			t.Fatalf("a loaded index does not rebuild to its bytes (%v):\n%q\n%q", err, data, again)
		}
	})
}
