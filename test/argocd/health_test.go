// Package argocd_test runs the Argo CD health checks of the custom resources, as Argo CD
// does: the live object is the global obj of the Lua script, and the script returns a table
// with status and message.
package argocd_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"
	"sigs.k8s.io/yaml"
)

// repoRoot is the root of the repository, found from this file's path.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot find the path of the test file")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// scriptPath is the health check: both kinds share one script, as they share the Ready
// semantics.
func scriptPath(t *testing.T) string {
	return filepath.Join(repoRoot(t), "charts", "gate-operator", "argocd", "health.lua")
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// toLua converts a value decoded from JSON into a Lua value: maps become tables, lists
// 1-based arrays, numbers Lua numbers.
func toLua(L *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(v)
	case string:
		return lua.LString(v)
	case float64:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case map[string]any:
		t := L.NewTable()
		for k, e := range v {
			t.RawSetString(k, toLua(L, e))
		}
		return t
	case []any:
		t := L.NewTable()
		for i, e := range v {
			t.RawSetInt(i+1, toLua(L, e))
		}
		return t
	default:
		panic(fmt.Sprintf("unexpected %T in decoded YAML", v))
	}
}

type health struct{ status, message string }

// runHealth runs a health script against the object of a YAML file.
func runHealth(t *testing.T, script, objectFile string) health {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(readFile(t, objectFile)), &obj); err != nil {
		t.Fatalf("%s: %v", objectFile, err)
	}
	L := lua.NewState()
	defer L.Close()
	L.SetGlobal("obj", toLua(L, obj))
	if err := L.DoString(script); err != nil {
		t.Fatalf("running the health script on %s: %v", objectFile, err)
	}
	hs, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		t.Fatalf("the health script returned %s, not a table", L.Get(-1).Type())
	}
	field := func(name string) string {
		s, ok := hs.RawGetString(name).(lua.LString)
		if !ok {
			t.Fatalf("hs.%s is %s, not a string", name, hs.RawGetString(name).Type())
		}
		return string(s)
	}
	return health{status: field("status"), message: field("message")}
}

func TestHealth(t *testing.T) {
	type tc struct {
		file    string // under testdata, without the kind prefix
		status  string
		message string // a substring of hs.message
	}
	kinds := []struct {
		kind  string
		cases []tc
	}{
		{"HarnessAgentPolicy", []tc{
			{"no-status", "Progressing", "waiting for the controller to observe generation 3"},
			{"stale-observed-generation", "Progressing", "waiting for the controller to observe generation 3"},
			{"no-ready-condition", "Progressing", "waiting for the Ready condition"},
			{"ready-true", "Healthy", "the policy is in force"},
			{"ready-false", "Degraded", "CompileFailed: RulesCompiled: rule no-root-rm: undeclared reference"},
			{"ready-unknown", "Progressing", "Reconciling: resolving the egress hosts"},
			{"ready-stale-generation", "Progressing", "waiting for the controller to observe generation 3"},
		}},
		{"SessionConfirmer", []tc{
			{"no-status", "Progressing", "waiting for the controller to observe generation 3"},
			{"stale-observed-generation", "Progressing", "waiting for the controller to observe generation 3"},
			{"no-ready-condition", "Progressing", "waiting for the Ready condition"},
			{"ready-true", "Healthy", "the confirmer is answering paused tool calls"},
			{"ready-false", "Degraded", "PolicyNotFound: PolicyResolved: HarnessAgentPolicy agents/coding-agents does not exist"},
			{"ready-unknown", "Progressing", "Unavailable: Deployment coding-agents-confirmer has 1 of 2 replicas available"},
			{"ready-stale-generation", "Progressing", "waiting for the controller to observe generation 3"},
		}},
	}
	for _, k := range kinds {
		script := readFile(t, scriptPath(t))
		for _, c := range k.cases {
			t.Run(k.kind+"/"+c.file, func(t *testing.T) {
				file := filepath.Join("testdata", strings.ToLower(k.kind)+"-"+c.file+".yaml")
				got := runHealth(t, script, file)
				if got.status != c.status {
					t.Errorf("hs.status = %q, want %q (hs.message %q)", got.status, c.status, got.message)
				}
				if !strings.Contains(got.message, c.message) {
					t.Errorf("hs.message = %q, want it to contain %q", got.message, c.message)
				}
			})
		}
	}
}

// TestDocsEmbedScripts: the argocd-cm snippet of docs/argocd.md carries each script
// verbatim, as the value Argo CD will read.
func TestDocsEmbedScripts(t *testing.T) {
	doc := filepath.Join(repoRoot(t), "docs", "argocd.md")
	type configMap struct {
		Kind     string            `json:"kind"`
		Metadata map[string]any    `json:"metadata"`
		Data     map[string]string `json:"data"`
	}
	var cm *configMap
	for _, block := range yamlBlocks(t, doc) {
		var c configMap
		if err := yaml.Unmarshal([]byte(block), &c); err != nil {
			t.Fatalf("a yaml block of %s does not parse: %v", doc, err)
		}
		if c.Kind == "ConfigMap" && c.Metadata["name"] == "argocd-cm" {
			cm = &c
			break
		}
	}
	if cm == nil {
		t.Fatalf("%s has no yaml block with the argocd-cm ConfigMap", doc)
	}
	for _, kind := range []string{"HarnessAgentPolicy", "SessionConfirmer"} {
		key := "resource.customizations.health.gate.intutic.io_" + kind
		got, ok := cm.Data[key]
		if !ok {
			t.Errorf("the argocd-cm snippet has no key %s", key)
			continue
		}
		if want := readFile(t, scriptPath(t)); got != want {
			t.Errorf("the argocd-cm snippet's %s is not the contents of %s;\nregenerate the snippet from the file\n--- snippet\n%s\n--- file\n%s",
				key, scriptPath(t), got, want)
		}
	}
}

// yamlBlocks returns the contents of the ```yaml fenced blocks of a Markdown file.
func yamlBlocks(t *testing.T, path string) []string {
	t.Helper()
	var blocks []string
	var cur *strings.Builder
	sc := bufio.NewScanner(strings.NewReader(readFile(t, path)))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```yaml":
			cur = &strings.Builder{}
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line)
			cur.WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("%s has an unterminated ```yaml block", path)
	}
	return blocks
}
