package bootstrap

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/egress"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/golden"
)

// samplePolicy reads config/samples' HarnessAgentPolicy, with the schema defaults a real API
// server would fill in.
func samplePolicy(t *testing.T) *gatev1.HarnessAgentPolicy {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "gate_v1alpha1_harnessagentpolicy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := &gatev1.HarnessAgentPolicy{}
	if err := yaml.UnmarshalStrict(data, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func snapshotOf(t *testing.T, p *gatev1.HarnessAgentPolicy) []byte {
	t.Helper()
	meta, rules := SnapshotSource(p)
	meta.Generation = 1 // as the API server would number the sample's first version
	s, err := gate.BuildSnapshot(meta, rules)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRenderGolden(t *testing.T) {
	p := samplePolicy(t)
	b, err := Render(&p.Spec, snapshotOf(t, p), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range b.Data {
		golden.Check(t, filepath.Join("sample", k), []byte(v))
	}
	if len(b.Data) != 10 {
		t.Fatalf("want the 10 bundle keys, got %d", len(b.Data))
	}
	if b.Data[KeyBootstrapHash] != b.Hash || !strings.HasPrefix(b.Hash, "sha256:") {
		t.Fatalf("bootstrap-hash %q vs %q", b.Data[KeyBootstrapHash], b.Hash)
	}

	// Deny-all egress, bash not filtered, no tool approvals, no workspace.
	p.Spec.Egress = gatev1.EgressSpec{}
	p.Spec.FilterBash = ptr.To(false)
	p.Spec.Tools = gatev1.StaticToolApprovals{}
	p.Spec.WorkspaceID = ""
	p.Spec.PermissionMode = gatev1.PermissionModeAllowReads
	b, err = Render(&p.Spec, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "deny-all/"+KeyHarnessSettings, []byte(b.Data[KeyHarnessSettings]))
	golden.Check(t, "deny-all/"+KeyHarnessNetworkPolicy, []byte(b.Data[KeyHarnessNetworkPolicy]))
	golden.Check(t, "deny-all/"+KeyHookScript, []byte(b.Data[KeyHookScript]))
	if v, ok := b.Data[KeySnapshot]; !ok || v != "" {
		t.Fatalf("an empty snapshot must be an empty file, got present=%v %q", ok, v)
	}
}

// TestHarnessSettings: harness-settings.json holds only HarnessAgentSettings fields (the
// conformance suite type-checks it against the real type), and the network policy is its own
// file, in HarnessV1NetworkPolicy form.
func TestHarnessSettings(t *testing.T) {
	p := samplePolicy(t)
	b, err := Render(&p.Spec, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var hs map[string]any
	if err := json.Unmarshal([]byte(b.Data[KeyHarnessSettings]), &hs); err != nil {
		t.Fatal(err)
	}
	for k := range hs {
		if k != "permissionMode" && k != "inactiveTools" && k != "toolApproval" {
			t.Errorf("harness-settings.json has %q, which is not one of the settings gate-operator recommends", k)
		}
	}
	if hs["permissionMode"] != "allow-edits" || fmt.Sprint(hs["inactiveTools"]) != "[bash]" {
		t.Errorf("permissionMode/inactiveTools: %v", hs)
	}
	if fmt.Sprint(hs["toolApproval"]) != "map[deployService:user-approval dropDatabase:denied]" {
		t.Errorf("toolApproval: %v", hs["toolApproval"])
	}

	var np struct {
		Mode         string   `json:"mode"`
		AllowedHosts []string `json:"allowedHosts"`
		AllowedCIDRs []string `json:"allowedCIDRs"`
		DeniedCIDRs  []string `json:"deniedCIDRs"`
	}
	dec := json.NewDecoder(strings.NewReader(b.Data[KeyHarnessNetworkPolicy]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&np); err != nil {
		t.Fatal(err)
	}
	if np.Mode != "custom" || fmt.Sprint(np.AllowedHosts) != "[api.anthropic.com github.com]" || np.AllowedCIDRs != nil {
		t.Fatalf("network policy: %+v", np)
	}
	for _, m := range egress.MetadataCIDRs {
		if !slices.Contains(np.DeniedCIDRs, m) {
			t.Errorf("deniedCIDRs %v lacks %s", np.DeniedCIDRs, m)
		}
	}

	// Only denied CIDRs allow nothing: deny-all, not a custom policy the type rejects.
	p.Spec.Egress = gatev1.EgressSpec{DeniedCIDRs: []gatev1.CIDR{"10.0.0.0/8"}}
	if b, err = Render(&p.Spec, nil, Options{}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(strings.Fields(b.Data[KeyHarnessNetworkPolicy]), ""); got != `{"mode":"deny-all"}` {
		t.Errorf("deny-only egress: %s", got)
	}
}

// TestKeep: a kept bundle keeps the files the spec decided (snapshot, harness settings and
// network policy) and re-renders those the installation decides; any of them missing or
// edited fails Verify.
func TestKeep(t *testing.T) {
	p := samplePolicy(t)
	published, err := Render(&p.Spec, snapshotOf(t, p), Options{})
	if err != nil {
		t.Fatal(err)
	}
	install := Options{MountDir: "/etc/intutic", HookTimeout: 20}
	kept, err := Keep(published.Data, p.Spec.WorkspaceID, Layers{}, "", install)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{KeySnapshot, KeyHarnessSettings, KeyHarnessNetworkPolicy} {
		if kept.Data[k] != published.Data[k] {
			t.Errorf("%s was not kept", k)
		}
	}
	for _, k := range []string{KeyHookScript, KeyManagedSettings, KeySettings} {
		if kept.Data[k] == published.Data[k] {
			t.Errorf("%s was not re-rendered for the installation", k)
		}
	}
	if !Verify(kept.Data, p.Spec.WorkspaceID, install) || Verify(kept.Data, p.Spec.WorkspaceID, Options{}) {
		t.Error("a kept bundle verifies for its installation only")
	}
	for _, k := range hashedKeys {
		missing := maps.Clone(kept.Data)
		delete(missing, k)
		edited := maps.Clone(kept.Data)
		edited[k] += " "
		if Verify(missing, p.Spec.WorkspaceID, install) || Verify(edited, p.Spec.WorkspaceID, install) {
			t.Errorf("a bundle with %s missing or edited verified", k)
		}
	}
}

func TestBootstrapHash(t *testing.T) {
	p := samplePolicy(t)
	snap := snapshotOf(t, p)
	base, err := Render(&p.Spec, snap, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for range 20 { // map iteration order differs between runs; the hash must not
		again, _ := Render(&p.Spec, snap, Options{})
		if again.Hash != base.Hash {
			t.Fatal("the same input gave two hashes")
		}
	}
	changes := map[string]func(*gatev1.HarnessAgentPolicySpec, *Options) []byte{
		"snapshot": func(_ *gatev1.HarnessAgentPolicySpec, _ *Options) []byte {
			return append(append([]byte{}, snap...), ' ')
		},
		"mount directory": func(_ *gatev1.HarnessAgentPolicySpec, o *Options) []byte { o.MountDir = "/etc/intutic"; return snap },
		"workspace":       func(s *gatev1.HarnessAgentPolicySpec, _ *Options) []byte { s.WorkspaceID = "ws_other"; return snap },
		"permission mode": func(s *gatev1.HarnessAgentPolicySpec, _ *Options) []byte {
			s.PermissionMode = "allow-reads"
			return snap
		},
		"egress host": func(s *gatev1.HarnessAgentPolicySpec, _ *Options) []byte {
			s.Egress.AllowedHosts = s.Egress.AllowedHosts[:1]
			return snap
		},
		"hook timeout": func(_ *gatev1.HarnessAgentPolicySpec, o *Options) []byte { o.HookTimeout = 20; return snap },
	}
	for name, change := range changes {
		p := samplePolicy(t)
		opts := Options{}
		s := change(&p.Spec, &opts)
		b, err := Render(&p.Spec, s, opts)
		if err != nil {
			t.Fatal(err)
		}
		if b.Hash == base.Hash {
			t.Errorf("changing the %s left the hash unchanged", name)
		}
	}
	if _, err := Render(&p.Spec, snap, Options{HookTimeout: 5, HookLimit: 5}); err == nil {
		t.Error("a hook limit not below the registered timeout was accepted")
	}
}

// TestHookScript runs the rendered wrapper with every POSIX shell on the machine against
// stand-in binaries for each way gate-hook can end, and checks that only 0 and 2 pass while
// everything else blocks, whatever the environment says.
func TestHookScript(t *testing.T) {
	var shells [][]string
	for _, sh := range [][]string{{"/bin/sh"}, {"dash"}, {"bash", "--posix"}, {"bash"}, {"busybox", "sh"}} {
		if p, err := exec.LookPath(sh[0]); err == nil {
			shells = append(shells, append([]string{p}, sh[1:]...))
		}
	}
	if len(shells) == 0 {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	stub := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The environment an agent's settings file could hand the hook: another binary, a PATH
	// whose first sleep allows, the Go runtime's knobs.
	hostile := []string{"INTUTIC_GATE_HOOK_BIN=" + stub("true", "exit 0"), "PATH=" + dir + ":" + os.Getenv("PATH"), "GODEBUG=panicnil=1"}
	stub("sleep", "exit 0")
	cases := []struct {
		name, bin  string
		closeStdin bool
		exit       int
		stdout     string
	}{
		{name: "allow passes", bin: stub("allow", `cat >/dev/null; exit 0`), exit: 0},
		{name: "deny passes", bin: stub("deny", `cat >/dev/null; echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"no"}}'; exit 2`), exit: 2, stdout: `"permissionDecisionReason":"no"`},
		{name: "stdin and flags reach the hook", bin: stub("echo", `read line; case "$line" in *PreToolUse*) ;; *) exit 1;; esac; [ "$1 $2 $3 $4" = "--snapshot `+filepath.Join(dir, KeySnapshot)+` --workspace ws_1" ] || exit 1; exit 0`), exit: 0},
		{name: "the environment does not reach the hook", bin: stub("env", `[ -z "$GODEBUG" ] && [ "$PATH" = /usr/bin:/bin ] || exit 1; exit 0`), exit: 0},
		{name: "missing binary blocks", bin: filepath.Join(dir, "absent"), exit: 2, stdout: "the gate-hook binary is missing"},
		{name: "exit 1 blocks", bin: stub("one", `exit 1`), exit: 2, stdout: "gate-hook failed (exit status 1)"},
		{name: "crash blocks", bin: stub("crash", `kill -SEGV $$`), exit: 2, stdout: "gate-hook failed (exit status"},
		{name: "time limit blocks", bin: stub("slow", `exec /bin/sleep 5`), exit: 2, stdout: "gate-hook failed (exit status 137)"},
		{name: "a shell error (no stdin to hand over) blocks", bin: stub("allow2", `exit 0`), closeStdin: true, exit: 2, stdout: gate.RefusalPrefix},
	}
	for _, tc := range cases {
		b, err := Render(&gatev1.HarnessAgentPolicySpec{WorkspaceID: "ws_1"}, nil, Options{MountDir: dir, HookBin: tc.bin, HookTimeout: 3, HookLimit: 1})
		if err != nil {
			t.Fatal(err)
		}
		script := filepath.Join(t.TempDir(), KeyHookScript)
		if err := os.WriteFile(script, []byte(b.Data[KeyHookScript]), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, sh := range shells {
			t.Run(tc.name+"/"+strings.Join(sh, " "), func(t *testing.T) {
				argv := append(append([]string{}, sh...), script)
				if tc.closeStdin {
					// Run the wrapper with fd 0 closed, so its "exec 3<&0" fails.
					argv = append([]string{"/bin/sh", "-c", `exec "$@" <&-`, "sh"}, argv...)
				}
				cmd := exec.Command(argv[0], argv[1:]...)
				cmd.Env = append(os.Environ(), hostile...)
				if !tc.closeStdin {
					cmd.Stdin = strings.NewReader(`{"hook_event_name":"PreToolUse","tool_name":"Bash"}` + "\n")
				}
				stdout, stderr, exit := runCommand(t, cmd)
				if exit != tc.exit || !strings.Contains(stdout, tc.stdout) {
					t.Fatalf("exit %d stdout %q stderr %q; want exit %d with %q", exit, stdout, stderr, tc.exit, tc.stdout)
				}
				if tc.exit == 2 && tc.stdout != "" && !strings.Contains(stdout, `"permissionDecision":"deny"`) {
					t.Fatalf("a block must answer a deny decision, got %q", stdout)
				}
			})
		}
	}
}

func TestHookCommandQuoting(t *testing.T) {
	for dir, want := range map[string]string{
		"/opt/intutic/hooks":   "/usr/bin/env -i /bin/sh /opt/intutic/hooks/gate-hook.sh",
		"/tmp/a dir (1)/hooks": "/usr/bin/env -i /bin/sh '/tmp/a dir (1)/hooks/gate-hook.sh'",
		"/tmp/it's/hooks":      `/usr/bin/env -i /bin/sh '/tmp/it'\''s/hooks/gate-hook.sh'`,
	} {
		b, err := Render(&gatev1.HarnessAgentPolicySpec{}, nil, Options{MountDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			Hooks map[string][]struct {
				Hooks []struct{ Command string } `json:"hooks"`
			} `json:"hooks"`
		}
		if err := json.Unmarshal([]byte(b.Data[KeyManagedSettings]), &s); err != nil {
			t.Fatal(err)
		}
		if got := s.Hooks["PreToolUse"][0].Hooks[0].Command; !strings.Contains(got, "\no=$("+want+` "$n"); s=$?`+"\n") {
			t.Errorf("mount dir %q: command %q, want %q", dir, got, want)
		}
	}
}

// TestHookScriptAllowIsQuiet: ending the watchdog never prints a decision. The watchdog
// subshell inherited the wrapper's EXIT trap, and under bash a SIGTERM could run it before
// the subshell's redirections applied: an allow came out as exit 0 with a deny on stdout.
func TestHookScriptAllowIsQuiet(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal("bash is needed: it is the shell in which the watchdog could print")
	}
	dir := t.TempDir()
	allow := filepath.Join(dir, "allow")
	if err := os.WriteFile(allow, []byte("#!/bin/sh\ncat >/dev/null\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := Render(&gatev1.HarnessAgentPolicySpec{}, nil, Options{MountDir: dir, HookBin: allow})
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, KeyHookScript)
	if err := os.WriteFile(script, []byte(b.Data[KeyHookScript]), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		cmd := exec.Command(bash, "--posix", script)
		cmd.Stdin = strings.NewReader(`{"hook_event_name":"PreToolUse","tool_name":"Bash"}` + "\n")
		var stdout bytes.Buffer
		cmd.Stdout = &stdout
		if err := cmd.Run(); err != nil || stdout.Len() != 0 {
			t.Fatalf("run %d: an allow must exit 0 with nothing on stdout; got %v, stdout %q", i, err, stdout.String())
		}
	}
}

// TestConfigMapName: the name sandbox pods and the confirmer mount, <policy>-bootstrap, as the
// examples in docs/ write it.
func TestConfigMapName(t *testing.T) {
	if got := ConfigMapName("coding-agents"); got != "coding-agents-bootstrap" {
		t.Fatalf("ConfigMapName(coding-agents) = %q, want coding-agents-bootstrap", got)
	}
}
