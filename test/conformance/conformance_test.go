//go:build conformance

// Package conformance drives gate-operator's artefacts through the real, pinned peer packages
// from the npm registry (package.json, package-lock.json). `make conformance` runs it.
package conformance

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/ptr"

	"github.com/intutic/gate-operator/internal/anthropic"
	"github.com/intutic/gate-operator/internal/anthropic/anthropictest"
	"github.com/intutic/gate-operator/internal/confirm"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gateapi"
)

// result is one row of the table printed at the end.
type result struct {
	peer, version, name string
	ok                  bool
}

var (
	mu      sync.Mutex
	results []result
)

func record(t *testing.T, peer, name string, ok bool, detail string) {
	t.Helper()
	mu.Lock()
	results = append(results, result{peer, version(peer), name, ok})
	mu.Unlock()
	if !ok {
		t.Errorf("%s: %s: %s", peer, name, detail)
	}
}

// version reads the installed version of a peer package, from node_modules or, for
// openapi-typescript, from openapi-gen's (it needs a TypeScript of its own).
func version(pkg string) string {
	b, err := os.ReadFile(filepath.Join("node_modules", pkg, "package.json"))
	if err != nil {
		if b, err = os.ReadFile(filepath.Join("openapi-gen", "node_modules", pkg, "package.json")); err != nil {
			return "?"
		}
	}
	var p struct{ Version string }
	_ = json.Unmarshal(b, &p)
	return p.Version
}

func TestMain(m *testing.M) {
	if err := install(); err != nil {
		fmt.Fprintln(os.Stderr, "conformance: installing the peers:", err)
		os.Exit(1)
	}
	code := m.Run()
	sort.SliceStable(results, func(i, j int) bool { return results[i].peer < results[j].peer })
	fmt.Println("\npeer                            version    result  case")
	for _, r := range results {
		status := "PASS"
		if !r.ok {
			status = "FAIL"
		}
		fmt.Printf("%-31s %-10s %-7s %s\n", r.peer, r.version, status, r.name)
	}
	os.Exit(code)
}

// overrides are the peers that can be verified at another version than the lock pins: set
// the variable (make conformance ANTHROPIC_SDK_VERSION=1.15.0) and that version is installed
// over the locked one for this run.
var overrides = []struct{ env, pkg string }{
	{"CLAUDE_AGENT_SDK_VERSION", "@anthropic-ai/claude-agent-sdk"},
	{"HARNESS_VERSION", "@ai-sdk/harness"},
	{"ANTHROPIC_SDK_VERSION", "@anthropic-ai/sdk"},
	{"STANDARDWEBHOOKS_VERSION", "standardwebhooks"},
	{"WORKFLOW_ERRORS_VERSION", "@workflow/errors"},
	{"CODEX_VERSION", "@openai/codex"},
	{"GEMINI_CLI_VERSION", "@google/gemini-cli"},
}

// install runs `npm ci` unless node_modules was installed from this very lock file, then
// installs any overridden versions.
func install() error {
	lock, err := os.ReadFile("package-lock.json")
	if err != nil {
		return err
	}
	sum := sha256.Sum256(lock)
	want := hex.EncodeToString(sum[:])
	marker := filepath.Join("node_modules", ".gate-operator-lock-sha256")
	var extra []string
	for _, o := range overrides {
		if v := os.Getenv(o.env); v != "" {
			extra = append(extra, o.pkg+"@"+v)
		}
	}
	if len(extra) > 0 {
		defer func() {
			// The next run without overrides reinstalls from the lock.
			_ = os.Remove(marker)
		}()
	}
	if got, _ := os.ReadFile(marker); string(got) == want {
		return installOverrides(extra)
	}
	fmt.Println("conformance: npm ci (the pinned peers from package-lock.json)")
	cmd := exec.Command("npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return err
	}
	if err := os.WriteFile(marker, []byte(want), 0o644); err != nil {
		return err
	}
	return installOverrides(extra)
}

func installOverrides(pkgs []string) error {
	if len(pkgs) == 0 {
		return nil
	}
	fmt.Println("conformance: installing", strings.Join(pkgs, " "), "over the lock for this run")
	cmd := exec.Command("npm", append([]string{"install", "--no-save", "--ignore-scripts", "--no-audit", "--no-fund"}, pkgs...)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}

// node runs a peer script and returns its stdout.
func node(t *testing.T, script string, env []string, stdin []byte) []byte {
	t.Helper()
	cmd := exec.Command("node", script)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s: %v\n%s%s", script, err, out.String(), errb.String())
	}
	return out.Bytes()
}

type caseLine struct {
	Case   string          `json:"case"`
	OK     bool            `json:"ok"`
	Detail json.RawMessage `json:"detail"`
}

func cases(t *testing.T, out []byte) []caseLine {
	t.Helper()
	var cs []caseLine
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var c caseLine
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("not a case line: %s", sc.Text())
		}
		cs = append(cs, c)
	}
	return cs
}

// TestAnthropicSDK points @anthropic-ai/sdk at the fake Sessions API: anything the real SDK
// sends that the fake rejects, or answers the SDK cannot read, is a bug in the fake or the spec.
func TestAnthropicSDK(t *testing.T) {
	const key = "sk-ant-conformance"
	fake := anthropictest.New(key)
	defer fake.Close()
	fake.PingInterval = 50 * time.Millisecond
	var calls []anthropictest.ToolUse
	for i := range 6 {
		calls = append(calls, anthropictest.ToolUse{Name: "read", Input: map[string]any{"file_path": fmt.Sprint(i)}, Permission: "ask"})
	}
	fake.AddSession("sesn_sdk", "agent_sdk", calls...)
	fake.AddSession("sesn_other", "agent_other")
	fake.AddAgent(anthropictest.Agent{ID: "agent_sdk", Name: "sdk", Tools: []anthropictest.Toolset{
		{Default: anthropic.PolicyAlwaysAsk, Configs: []anthropictest.ToolConfig{{Name: "web_fetch", Policy: anthropic.PolicyAlwaysAllow}, {Name: "bash", Enabled: ptr.To(false)}}},
		{MCPServer: "deploy", Default: anthropic.PolicyAuto, Configs: []anthropictest.ToolConfig{{Name: "release", Policy: anthropic.PolicyAlwaysAsk}}},
	}, CustomTools: []string{"lookup"}})

	out := node(t, "sdk.mjs", []string{"BASE_URL=" + fake.URL, "API_KEY=" + key, "SESSION=sesn_sdk", "AGENT=agent_sdk"}, nil)
	var retrieved json.RawMessage
	for _, c := range cases(t, out) {
		record(t, "@anthropic-ai/sdk", c.Case, c.OK, string(c.Detail))
		if c.Case == "agents.retrieve reads the agent and its tools' policies" && c.OK {
			retrieved = c.Detail
		}
	}
	same, detail := sameAgent(t, fake, key, retrieved)
	record(t, "@anthropic-ai/sdk", "the agent as the SDK reads it is the agent as anthropic.GetAgent reads it", same, detail)

	pages, typed, beta := 0, false, true
	for _, r := range fake.Requests() {
		if r.Header.Get("anthropic-beta") != anthropictest.BetaHeader || r.Header.Get("Authorization") != "Bearer "+key {
			beta = false
		}
		if r.Path == "/v1/sessions/sesn_sdk/events" && strings.Contains(r.RawQuery, "page=") {
			pages++
		}
		if strings.Contains(r.RawQuery, "types%5B%5D=agent.tool_use") {
			typed = true
		}
	}
	record(t, "@anthropic-ai/sdk", "at least three pages followed with page=", pages >= 3, fmt.Sprintf("%d page requests", pages))
	record(t, "@anthropic-ai/sdk", "types sent as types[]= (bracket encoding)", typed, "no types%5B%5D= in any query")
	record(t, "@anthropic-ai/sdk", "beta header and bearer key on every request", beta, "a request lacked them")
}

// sameAgent compares the agent the SDK retrieved (sdk.mjs's detail) with what
// anthropic.Client.GetAgent reads of it, field by field as sdk.mjs writes them.
func sameAgent(t *testing.T, fake *anthropictest.Server, key string, retrieved json.RawMessage) (bool, string) {
	t.Helper()
	if retrieved == nil {
		return false, "the SDK did not retrieve the agent"
	}
	c, err := anthropic.NewClient(anthropic.ClientOptions{BaseURL: fake.URL, APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.GetAgent(t.Context(), "agent_sdk")
	if err != nil {
		return false, err.Error()
	}
	type toolset struct {
		Type          string  `json:"type"`
		MCPServerName string  `json:"mcp_server_name,omitempty"`
		Default       [2]any  `json:"default"`
		Configs       [][]any `json:"configs"`
	}
	policy := func(c *anthropic.ToolConfig) [2]any {
		if c == nil || c.Enabled == nil || c.PermissionPolicy == nil {
			return [2]any{}
		}
		return [2]any{*c.Enabled, c.PermissionPolicy.Type}
	}
	var policies []toolset
	for _, tool := range a.Tools {
		if tool.Type == anthropic.ToolCustom {
			continue
		}
		ts := toolset{Type: tool.Type, MCPServerName: tool.MCPServerName, Default: policy(tool.DefaultConfig), Configs: [][]any{}}
		for _, cfg := range tool.Configs {
			p := policy(&cfg)
			ts.Configs = append(ts.Configs, []any{cfg.Name, p[0], p[1]})
		}
		policies = append(policies, ts)
	}
	ours, _ := json.Marshal(map[string]any{"id": a.ID, "version": a.Version, "name": a.Name, "policies": policies})
	var sdk, mine any
	_ = json.Unmarshal(retrieved, &sdk)
	_ = json.Unmarshal(ours, &mine)
	if !reflect.DeepEqual(sdk, mine) {
		return false, fmt.Sprintf("the SDK read %s, GetAgent %s", retrieved, ours)
	}
	return true, ""
}

// TestStandardWebhooks has standardwebhooks sign deliveries and posts them to the confirmer's
// webhook receiver: only the valid ones are accepted and acted on.
func TestStandardWebhooks(t *testing.T) {
	secret := "whsec_Y29uZm9ybWFuY2Ugd2ViaG9vayBrZXkgMzIgYnl0ZXMhIQ=="
	other := "whsec_YW5vdGhlciBrZXksIG5vdCB0aGUgY29uZmlndXJlZCBvbmU="
	out := node(t, "webhooks.mjs", []string{"SECRET=" + secret, "OTHER_SECRET=" + other}, nil)
	var deliveries []struct {
		Case           string            `json:"case"`
		Headers        map[string]string `json:"headers"`
		Body           string            `json:"body"`
		Expect         int               `json:"expect"`
		LibraryAccepts bool              `json:"libraryAccepts"`
	}
	if err := json.Unmarshal(out, &deliveries); err != nil {
		t.Fatal(err)
	}

	const key = "sk-ant-conformance"
	fake := anthropictest.New(key)
	defer fake.Close()
	for _, d := range deliveries {
		fake.AddSession("sesn_"+d.Headers["webhook-id"], "agent_wh", anthropictest.ToolUse{Name: "read", Permission: "ask"})
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "key"), []byte(key), 0o600); err != nil {
		t.Fatal(err)
	}
	client, err := anthropic.NewClient(anthropic.ClientOptions{BaseURL: fake.URL, APIKeyFile: filepath.Join(dir, "key")})
	if err != nil {
		t.Fatal(err)
	}
	g := loadGate(t, nil)
	c := &confirm.Confirmer{Client: client, Gate: g, Deadline: time.Minute, Log: logr.Discard()}
	q := confirm.NewQueue(c, 16)
	verifier, err := anthropic.NewWebhookVerifier(secret)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&gateapi.API{Gate: g, Webhook: verifier, Queue: q, Log: logr.Discard()}).Handler())
	defer srv.Close()

	for _, d := range deliveries {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/webhooks/anthropic", strings.NewReader(d.Body))
		for k, v := range d.Headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		record(t, "standardwebhooks", fmt.Sprintf("%s: HTTP %d", d.Case, d.Expect), resp.StatusCode == d.Expect, fmt.Sprintf("got %d", resp.StatusCode))
		accepted := resp.StatusCode < 300
		record(t, "standardwebhooks", d.Case+": same verdict as the library's verify", accepted == d.LibraryAccepts, fmt.Sprintf("library %v, receiver %v", d.LibraryAccepts, accepted))
	}
	// The queue answers the sessions the accepted deliveries named; the rejected ones were
	// never queued.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { q.Run(ctx, 2); close(done) }()
	deadline := time.Now().Add(20 * time.Second)
	for len(fake.Confirmations("sesn_msg_valid")) == 0 || len(fake.Confirmations("sesn_msg_multi")) == 0 {
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	for _, d := range deliveries {
		if d.Case == "replayed" {
			continue
		}
		acted := len(fake.Confirmations("sesn_"+d.Headers["webhook-id"])) > 0
		record(t, "standardwebhooks", d.Case+": acted on only if valid", acted == (d.Expect == 202), fmt.Sprintf("acted %v", acted))
	}
}

// TestWorkflowErrors has @workflow/errors judge the needs-approval refusal bodies.
func TestWorkflowErrors(t *testing.T) {
	body := func(g *gate.Gate, wantStatus int) json.RawMessage {
		srv := httptest.NewServer((&gateapi.API{Gate: g, Log: logr.Discard()}).Handler())
		defer srv.Close()
		resp, err := http.Post(srv.URL+"/v1/workflow/needs-approval", "application/json", strings.NewReader(`{"toolName":"bash","input":{"command":"rm -rf /"}}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != wantStatus {
			t.Fatalf("status %d, want %d: %s", resp.StatusCode, wantStatus, b)
		}
		return b
	}
	block := loadGate(t, []gate.Rule{{Name: "no-root-rm", Tools: []string{"bash"}, When: `input.command.contains("rm -rf /")`, Action: gate.Block, Reason: "destructive"}})
	in, _ := json.Marshal(map[string]json.RawMessage{"fatal": body(block, 403), "retryable": body(gate.New(""), 503)})
	for _, c := range cases(t, node(t, "workflow.mjs", nil, in)) {
		record(t, "@workflow/errors", c.Case, c.OK, string(c.Detail))
	}
}

func loadGate(t *testing.T, rules []gate.Rule) *gate.Gate {
	t.Helper()
	s, err := gate.BuildSnapshot(gate.PolicyMeta{Policy: "conformance/p"}, rules)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := s.Encode()
	g := gate.New("")
	if err := g.Load(data); err != nil {
		t.Fatal(err)
	}
	return g
}
