package main

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/intutic/gate-operator/internal/gate"
)

// identityRules decide by who calls: a Bash call is blocked with a reason that names what the
// hook told the rules, and asks when the pod is not known.
func identityRules() []gate.Rule {
	return []gate.Rule{
		{Name: "known-pod", Tools: []string{"bash"}, Action: gate.Block, Reason: "pod coding-agent-0 of agents/coding-agents in its session",
			When: `caller.pod == "coding-agent-0" && caller.namespace == "agents" && caller.policy == "coding-agents" && caller.session == "9b2c1f0e-4d1a-4a57-8f0e-1c2d3e4f5a6b" && caller.serviceAccount == "" && caller.agent == ""`},
		{Name: "unknown-pod", Tools: []string{"bash"}, When: `caller.pod == ""`, Action: gate.Ask, Reason: "a pod the gate cannot name"},
	}
}

// hookDir writes the identity rules' snapshot into a fresh directory, with the pod's name file
// beside it when name is not nil, and returns the snapshot's path.
func hookDir(t *testing.T, name *string) string {
	t.Helper()
	s, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "agents/coding-agents", Generation: 1}, identityRules())
	if err != nil {
		t.Fatal(err)
	}
	data, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	snap := filepath.Join(dir, gate.SnapshotFileName)
	if err := os.WriteFile(snap, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if name != nil {
		if err := os.MkdirAll(filepath.Join(dir, "pod"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, gate.PodNameFile), []byte(*name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return snap
}

// TestHookCaller: the hook tells the rules its pod's name from the file beside the snapshot, and
// nothing from its environment, which the agent's settings files can set.
func TestHookCaller(t *testing.T) {
	pod, bad := "coding-agent-0", "Coding Agent"
	spoof := []string{"POD_NAME=coding-agent-0", "HOSTNAME=coding-agent-0", "KUBERNETES_POD_NAME=coding-agent-0", "INTUTIC_POD_NAME=coding-agent-0"}
	for _, tc := range []struct {
		name string
		file *string
		env  []string
		want string // ask or deny
	}{
		{"the pod's name beside the snapshot", &pod, nil, "deny"},
		{"no name file: the pod is unknown", nil, nil, "ask"},
		{"the environment names a pod: ignored", nil, spoof, "ask"},
		{"a file that holds no pod name: unknown", &bad, nil, "ask"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := hookDir(t, tc.file)
			r := runHook(t, payload("Bash", map[string]any{"command": "ls"}, nil), tc.env, "--snapshot", snap)
			d := decision(t, r.stdout)
			if d.PermissionDecision != tc.want || tc.want == "deny" && d.PermissionDecisionReason != gate.RefusalPrefix+identityRules()[0].Reason {
				t.Fatalf("want %s, got %+v", tc.want, r)
			}
		})
	}
}

// TestSandboxExamplesMountThePodName: the documented pods put the downward API's metadata.name
// exactly where gate-hook reads it, in the same read-only volume as the snapshot.
func TestSandboxExamplesMountThePodName(t *testing.T) {
	for _, file := range []string{"sandbox-pod.yaml", "sandboxtemplate.yaml"} {
		t.Run(file, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "examples", file))
			if err != nil {
				t.Fatal(err)
			}
			var spec corev1.PodSpec
			var doc struct {
				Kind string         `json:"kind"`
				Spec map[string]any `json:"spec"`
			}
			if err := yaml.Unmarshal(raw, &doc); err != nil {
				t.Fatal(err)
			}
			podSpec := doc.Spec
			if doc.Kind == "SandboxTemplate" {
				podSpec = doc.Spec["podTemplate"].(map[string]any)["spec"].(map[string]any)
			}
			b, _ := yaml.Marshal(podSpec)
			if err := yaml.Unmarshal(b, &spec); err != nil {
				t.Fatal(err)
			}
			var hooks string
			for _, m := range spec.Containers[0].VolumeMounts {
				if m.MountPath == "/opt/intutic/hooks" {
					hooks = m.Name
					if !m.ReadOnly {
						t.Error("the hooks volume is mounted writable")
					}
				}
			}
			for _, v := range spec.Volumes {
				if v.Name != hooks {
					continue
				}
				if v.Projected == nil {
					t.Fatalf("volume %s is not a projected volume", hooks)
				}
				var configMap, podName bool
				for _, src := range v.Projected.Sources {
					if src.ConfigMap != nil && src.ConfigMap.Name == "coding-agents-bootstrap" && len(src.ConfigMap.Items) == 0 {
						configMap = true
					}
					if src.DownwardAPI != nil {
						for _, item := range src.DownwardAPI.Items {
							if item.Path == gate.PodNameFile && item.FieldRef != nil && item.FieldRef.FieldPath == "metadata.name" {
								podName = true
							}
						}
					}
				}
				if !configMap || !podName {
					t.Fatalf("volume %s: the whole bootstrap ConfigMap %v, metadata.name at %s %v", hooks, configMap, gate.PodNameFile, podName)
				}
				return
			}
			t.Fatal("no volume is mounted at /opt/intutic/hooks")
		})
	}
}
