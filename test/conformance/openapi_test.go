//go:build conformance

package conformance

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/gateapi"
)

// openapiClient is a client of the gate HTTP API as harness or workflow code writes one:
// openapi-fetch typed by the paths openapi-typescript generated from GET /openapi.yaml. It
// calls a real gate API and prints one case line per call; the @ts-expect-error lines are the
// type-level controls (tsc fails if any of them is not an error).
const openapiClient = `import createClient from "openapi-fetch";
import type { paths, components } from "./gate-api.js";

declare const process: { env: Record<string, string | undefined> };

const gate = createClient<paths>({ baseUrl: process.env.BASE_URL });
const line = (c: string, ok: boolean, detail: unknown) => console.log(JSON.stringify({ case: c, ok, detail }));

const health = await gate.GET("/healthz", { parseAs: "text" });
line("GET /healthz answers ok", health.response.status === 200 && health.data === "ok\n", health.data);

const guard = await gate.POST("/v1/guard", { body: { tool: "Bash", input: { command: "rm -rf /" }, surface: "harness" } });
const verdict: components["schemas"]["Verdict"] | undefined = guard.data?.verdict;
line("POST /v1/guard: a Block, typed as the document's Decision", verdict === "Block" && guard.data?.message?.startsWith("[Intutic Governance] BLOCKED: ") === true && !!guard.data?.incidentId, guard.data ?? guard.error);

const allowed = await gate.POST("/v1/workflow/needs-approval", { body: { toolName: "read", input: { file_path: "a" } } });
line("POST /v1/workflow/needs-approval: an Allow needs no approval", allowed.data?.needsApproval === false, allowed.data ?? allowed.error);

const blocked = await gate.POST("/v1/workflow/needs-approval", { body: { toolName: "bash", toolCallId: "c1", input: { command: "rm -rf /" } } });
const fatal = blocked.error as components["schemas"]["FatalError"] | undefined;
line("POST /v1/workflow/needs-approval: a Block is a 403 FatalError", blocked.response.status === 403 && fatal?.name === "FatalError" && fatal?.fatal === true && fatal?.code === "destructive_command", blocked.error);

const refused = await gate.POST("/v1/guard", { body: { tool: "" } });
line("POST /v1/guard: a refused request is the document's Error", refused.response.status === 400 && typeof refused.error?.error === "string", refused.error);

// Type-level controls.
// @ts-expect-error: a field the request does not have
const extra: components["schemas"]["GuardRequest"] = { tool: "read", allowAll: true };
void extra;
// @ts-expect-error: a surface the API does not know
void gate.POST("/v1/guard", { body: { tool: "read", surface: "browser" } });
// @ts-expect-error: a route the API does not serve
void gate.GET("/metrics");
// @ts-expect-error: a verdict the API does not answer
const maybe: components["schemas"]["Verdict"] = "Maybe";
void maybe;
`

// TestOpenAPIClient generates TypeScript types from the document a gate API serves (GET
// /openapi.yaml) with the pinned openapi-typescript, type-checks a client written with the
// pinned openapi-fetch against them with the suite's tsc, then runs it against that gate API.
func TestOpenAPIClient(t *testing.T) {
	const peer = "openapi-fetch"
	g := loadGate(t, []gate.Rule{{Name: "no-root-rm", Tools: []string{"bash"}, When: `input.command.contains("rm -rf /")`, Action: gate.Block,
		Reason: "destructive command on the root filesystem", Code: "destructive_command"}})
	srv := httptest.NewServer((&gateapi.API{Gate: g, Log: logr.Discard()}).Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(doc, gateapi.OpenAPIDocument) {
		t.Fatalf("GET /openapi.yaml: %d, %d bytes", resp.StatusCode, len(doc))
	}

	dir := t.TempDir()
	modules, err := filepath.Abs("node_modules")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	tsconfig := `{"compilerOptions": {"strict": true, "module": "nodenext", "moduleResolution": "nodenext", "target": "es2022", "skipLibCheck": true, "outDir": "out"}, "files": ["client.mts"]}`
	for name, content := range map[string][]byte{"openapi.yaml": doc, "client.mts": []byte(openapiClient), "tsconfig.json": []byte(tsconfig)} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// openapi-typescript builds its output with the TypeScript 5 compiler API, which the
	// suite's TypeScript 7 does not have: it is installed with its own (openapi-gen/).
	cli, err := filepath.Abs(filepath.Join("openapi-gen", "node_modules", "openapi-typescript", "bin", "cli.js"))
	if err != nil {
		t.Fatal(err)
	}
	genOut, err := run(dir, "node", cli, "openapi.yaml", "-o", "gate-api.d.ts")
	record(t, "openapi-typescript", "generates the types of the document GET /openapi.yaml serves", err == nil, genOut)
	if err != nil {
		return
	}
	// The client imports the generated types as ./gate-api.js, which gate-api.d.ts declares;
	// the import is a type import, gone from the emitted client.mjs.
	tscOut, err := run(dir, filepath.Join(modules, ".bin", "tsc"), "-p", "tsconfig.json", "--pretty", "false")
	record(t, peer, "tsc "+version("typescript")+" type-checks an openapi-fetch client against the generated types, the controls refused", err == nil, tscOut)
	if err != nil {
		return
	}
	out := node(t, filepath.Join(dir, "out", "client.mjs"), []string{"BASE_URL=" + srv.URL}, nil)
	for _, c := range cases(t, out) {
		record(t, peer, c.Case, c.OK, string(c.Detail))
	}
}

// run runs a command in dir and returns its combined output and error.
func run(dir, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return strings.TrimSpace(out.String()), err
}
