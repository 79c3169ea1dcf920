package agentproto

import (
	"bytes"
	"errors"
	"go/parser"
	"go/token"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/runtime/claudecode"
)

const nonce = "0123456789abcdef0123456789abcdef"

func sampleRequest() Request {
	return Request{Nonce: nonce, Runtime: RuntimeClaudeCode, Version: "..2026_12_04_22_00_00.0001", Token: "0b8e2a4c-5d6f-4a1b-9c3d-7e8f9a0b1c2d",
		Flags: Flags{Layers: true, ExplicitAllow: true}, Workspace: "ws_123", Input: []byte(`{"tool_name":"Bash"}` + "\n")}
}

func sampleResponse() Response {
	return Response{Nonce: nonce, Version: "..2026_12_04_22_00_00.0001", Digest: "sha256:" + strings.Repeat("ab", 32), Exit: 2,
		Stdout: []byte("gate-answer t\n{}\n"), Stderr: []byte("[Intutic Governance] BLOCKED: no\n")}
}

// TestRequestWire: a request encodes as the documented lines, and decodes back.
func TestRequestWire(t *testing.T) {
	r := sampleRequest()
	got, err := EncodeRequest(&r)
	if err != nil {
		t.Fatal(err)
	}
	want := "gate-agent/1\nnonce " + nonce + "\nruntime claude-code\nversion ..2026_12_04_22_00_00.0001\n" +
		"token 0b8e2a4c-5d6f-4a1b-9c3d-7e8f9a0b1c2d\nflags layers,explicit-allow\nworkspace ws_123\nlength 21\n\n" +
		`{"tool_name":"Bash"}` + "\n"
	if string(got) != want {
		t.Fatalf("encoded\n%q\nwant\n%q", got, want)
	}
	back, err := DecodeRequest(got)
	if err != nil || !sameRequest(back, r) {
		t.Fatalf("decoded %+v, %v; want %+v", back, err, r)
	}
	empty := Request{Nonce: nonce, Runtime: "claude-code", Version: "v1"}
	got, err = EncodeRequest(&empty)
	if err != nil {
		t.Fatal(err)
	}
	if want := "gate-agent/1\nnonce " + nonce + "\nruntime claude-code\nversion v1\ntoken -\nflags -\nworkspace -\nlength 0\n\n"; string(got) != want {
		t.Fatalf("encoded %q, want %q", got, want)
	}
}

// TestResponseWire: a response encodes as the documented lines, and decodes back.
func TestResponseWire(t *testing.T) {
	r := sampleResponse()
	got, err := EncodeResponse(&r)
	if err != nil {
		t.Fatal(err)
	}
	want := "gate-agent/1\nnonce " + nonce + "\nversion ..2026_12_04_22_00_00.0001\ndigest " + r.Digest + "\nexit 2\nstdout 17\nstderr 33\n\n" +
		"gate-answer t\n{}\n[Intutic Governance] BLOCKED: no\n"
	if string(got) != want {
		t.Fatalf("encoded\n%q\nwant\n%q", got, want)
	}
	back, err := DecodeResponse(got)
	if err != nil || !sameResponse(back, r) {
		t.Fatalf("decoded %+v, %v; want %+v", back, err, r)
	}
}

// TestDecodeRejects: every line is required once, in order, with a valid value, and the body
// is exactly as long as the header says.
func TestDecodeRejects(t *testing.T) {
	req := sampleRequest()
	good, _ := EncodeRequest(&req)
	s := string(good)
	for name, msg := range map[string]string{
		"another protocol version": strings.Replace(s, "gate-agent/1", "gate-agent/2", 1),
		"lines out of order":       strings.Replace(strings.Replace(s, "runtime claude-code\n", "", 1), "token ", "runtime claude-code\ntoken ", 1),
		"a line twice":             strings.Replace(s, "flags ", "flags -\nflags ", 1),
		"an unknown line":          strings.Replace(s, "length ", "colour blue\nlength ", 1),
		"a line missing":           strings.Replace(s, "workspace ws_123\n", "", 1),
		"nonce upper case":         strings.Replace(s, nonce, strings.ToUpper(nonce), 1),
		"nonce short":              strings.Replace(s, nonce, nonce[1:], 1),
		"runtime upper case":       strings.Replace(s, "claude-code", "Claude-Code", 1),
		"version with a slash":     strings.Replace(s, "..2026_12_04", "../2026_12_04", 1),
		"token with a space":       strings.Replace(s, "token 0b8e", "token 0 b8e", 1),
		"flags out of order":       strings.Replace(s, "layers,explicit-allow", "explicit-allow,layers", 1),
		"flags repeated":           strings.Replace(s, "layers,explicit-allow", "layers,layers", 1),
		"an unknown flag":          strings.Replace(s, "layers,explicit-allow", "layers,allow-all", 1),
		"an empty flag":            strings.Replace(s, "layers,explicit-allow", "layers,", 1),
		"a space before a value":   strings.Replace(s, "length 21", "length  21", 1),
		"a length with a sign":     strings.Replace(s, "length 21", "length +21", 1),
		"a leading zero":           strings.Replace(s, "length 21", "length 021", 1),
		"a length over 4 MiB":      strings.Replace(s, "length 21", "length 4194305", 1),
		"body too short":           strings.Replace(s, "length 21", "length 22", 1),
		"body too long":            strings.Replace(s, "length 21", "length 20", 1),
		"a carriage return":        strings.Replace(s, "runtime claude-code\n", "runtime claude-code\r\n", 1),
		"no empty line":            strings.Replace(s, "\n\n", "\n", 1),
		"nothing":                  "",
	} {
		if _, err := DecodeRequest([]byte(msg)); err == nil {
			t.Errorf("request %s: accepted", name)
		}
	}

	resp := sampleResponse()
	good, _ = EncodeResponse(&resp)
	s = string(good)
	for name, msg := range map[string]string{
		"exit 1":                 strings.Replace(s, "exit 2", "exit 1", 1),
		"exit 02":                strings.Replace(s, "exit 2", "exit 02", 1),
		"digest upper case":      strings.Replace(s, "sha256:", "SHA256:", 1),
		"stdout over 1 MiB":      strings.Replace(s, "stdout 17", "stdout 1048577", 1),
		"stderr before stdout":   strings.Replace(strings.Replace(s, "stdout 17\n", "", 1), "stderr 33\n", "stderr 33\nstdout 17\n", 1),
		"cut short":              s[:len(s)-1],
		"a byte too many":        s + "x",
		"a request's first line": strings.Replace(s, "version ", "runtime claude-code\nversion ", 1),
	} {
		if _, err := DecodeResponse([]byte(msg)); err == nil {
			t.Errorf("response %s: accepted", name)
		}
	}
}

// TestEncodeRejects: a field the wire cannot carry as it is is an error, never a silent change:
// a token or workspace of "-" would read back as none.
func TestEncodeRejects(t *testing.T) {
	for name, edit := range map[string]func(*Request){
		"token -":          func(r *Request) { r.Token = None },
		"workspace -":      func(r *Request) { r.Workspace = None },
		"workspace space":  func(r *Request) { r.Workspace = "ws 1" },
		"no version":       func(r *Request) { r.Version = "" },
		"runtime too long": func(r *Request) { r.Runtime = strings.Repeat("a", MaxRuntime+1) },
		"input too large":  func(r *Request) { r.Input = make([]byte, MaxInput+1) },
		"nonce short":      func(r *Request) { r.Nonce = "abc" },
	} {
		r := sampleRequest()
		edit(&r)
		if _, err := EncodeRequest(&r); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
	for name, edit := range map[string]func(*Response){
		"exit 1":          func(r *Response) { r.Exit = 1 },
		"digest newline":  func(r *Response) { r.Digest = "sha256:a\nexit 0" },
		"stderr too long": func(r *Response) { r.Stderr = make([]byte, MaxAnswer+1) },
	} {
		r := sampleResponse()
		edit(&r)
		if _, err := EncodeResponse(&r); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
}

// TestReadRequest: a request read from a stream, a byte at a time or at once, is the request
// sent; reserve learns the body's length before the body is read, and its error ends the read;
// a stream that ends early or carries more than one message is an error.
func TestReadRequest(t *testing.T) {
	r := sampleRequest()
	msg, _ := EncodeRequest(&r)
	for name, rd := range map[string]io.Reader{
		"at once":          bytes.NewReader(msg),
		"a byte at a time": iotest.OneByteReader(bytes.NewReader(msg)),
	} {
		reserved := -1
		got, err := ReadRequest(rd, func(n int) error { reserved = n; return nil })
		if err != nil || !sameRequest(got, r) || reserved != len(r.Input) {
			t.Errorf("%s: read %+v, %v, reserved %d", name, got, err, reserved)
		}
	}
	full := errors.New("no memory left")
	if _, err := ReadRequest(bytes.NewReader(msg), func(int) error { return full }); !errors.Is(err, full) {
		t.Errorf("reserve's error: got %v", err)
	}
	if _, err := ReadRequest(bytes.NewReader(msg[:len(msg)-3]), nil); err == nil {
		t.Error("a request cut short was read")
	}
	if _, err := ReadRequest(bytes.NewReader(append(msg[:len(msg):len(msg)], msg...)), nil); err == nil {
		t.Error("two requests on one connection were read as one")
	}
	if _, err := ReadRequest(strings.NewReader(strings.Repeat("x", 4096)), nil); err == nil {
		t.Error("a header without end was read")
	}
	timeout := errors.New("i/o timeout")
	if _, err := ReadRequest(iotest.ErrReader(timeout), nil); !errors.Is(err, timeout) {
		t.Errorf("the reader's error is not returned: %v", err)
	}
}

// TestReadResponse: a response split across reads at every byte is read whole.
func TestReadResponse(t *testing.T) {
	r := sampleResponse()
	msg, _ := EncodeResponse(&r)
	got, err := ReadResponse(iotest.HalfReader(bytes.NewReader(msg)))
	if err != nil || !sameResponse(got, r) {
		t.Fatalf("read %+v, %v", got, err)
	}
	big := r
	big.Digest = strings.Repeat("sha256:"+strings.Repeat("ab", 32)+",", MaxDigest/72-1) + "sha256:" + strings.Repeat("ab", 32)
	bigMsg, err := EncodeResponse(&big)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ReadResponse(bytes.NewReader(bigMsg)); err != nil || got.Digest != big.Digest {
		t.Fatalf("a response with a %d-byte digest: %v", len(big.Digest), err)
	}
	for i := range len(msg) - 1 {
		if _, err := ReadResponse(bytes.NewReader(msg[:i])); err == nil {
			t.Fatalf("a response cut after %d bytes was read", i)
		}
	}
}

// TestBoundsAgreeWithClaudeCode: the client sends what gate-hook would read, and a token the
// registered command's check accepts, no more.
func TestBoundsAgreeWithClaudeCode(t *testing.T) {
	if MaxInput != claudecode.MaxHookInput || MaxToken != claudecode.MaxAnswerToken {
		t.Fatalf("MaxInput %d, MaxToken %d; claudecode: %d, %d", MaxInput, MaxToken, claudecode.MaxHookInput, claudecode.MaxAnswerToken)
	}
	for _, tok := range []string{"0b8e2a4c-5d6f-4a1b-9c3d-7e8f9a0b1c2d", "-", "a", strings.Repeat("a", 64), strings.Repeat("a", 65), "", "a b", "a\nb", "ä", "a_b"} {
		if got, want := ValidToken(tok), claudecode.CheckAnswerToken(tok) == nil; got != want {
			t.Errorf("token %q: ValidToken %v, CheckAnswerToken accepts %v", tok, got, want)
		}
	}
}

// TestConstantsAgreeWithTheGate: the names the client checks without linking the gate are the
// gate's.
func TestConstantsAgreeWithTheGate(t *testing.T) {
	if SnapshotFileName != gate.SnapshotFileName || RefusalPrefix != gate.RefusalPrefix || AnswerPrefix != claudecode.AnswerPrefix {
		t.Fatalf("SnapshotFileName %q, RefusalPrefix %q, AnswerPrefix %q; the gate's and Claude Code's: %q, %q, %q",
			SnapshotFileName, RefusalPrefix, AnswerPrefix, gate.SnapshotFileName, gate.RefusalPrefix, claudecode.AnswerPrefix)
	}
}

// TestImportsStaySmall: gate-hook links this package, and every fallback pays its start-up.
func TestImportsStaySmall(t *testing.T) {
	allowed := map[string]bool{"bytes": true, "errors": true, "io": true, "strconv": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); !allowed[p] {
				t.Errorf("%s imports %s", f, p)
			}
		}
	}
}

func TestHexNonce(t *testing.T) {
	var b [16]byte
	for i := range b {
		b[i] = byte(i * 17)
	}
	if got := HexNonce(b); got != "00112233445566778899aabbccddeeff" || !validNonce([]byte(got)) {
		t.Fatalf("HexNonce = %q", got)
	}
}

func sameRequest(a, b Request) bool {
	return a.Nonce == b.Nonce && a.Runtime == b.Runtime && a.Version == b.Version && a.Token == b.Token &&
		a.Flags == b.Flags && a.Workspace == b.Workspace && bytes.Equal(a.Input, b.Input)
}

func sameResponse(a, b Response) bool {
	return a.Nonce == b.Nonce && a.Version == b.Version && a.Digest == b.Digest && a.Exit == b.Exit &&
		bytes.Equal(a.Stdout, b.Stdout) && bytes.Equal(a.Stderr, b.Stderr)
}
