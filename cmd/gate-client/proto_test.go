package main

// proto.go spells again the part of internal/agentproto the client uses; these tests hold the
// two to each other: the same constants, the same request bytes, and the same responses read
// (or refused) from the same stream, however it is cut into reads.

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/intutic/gate-operator/internal/agentproto"
)

func TestProtoConstantsAreAgentproto(t *testing.T) {
	for _, c := range []struct{ name, got, want string }{
		{"Magic", magic, agentproto.Magic},
		{"None", none, agentproto.None},
		{"NoVersion", noVersion, agentproto.NoVersion},
		{"RuntimeClaudeCode", runtimeClaudeCode, agentproto.RuntimeClaudeCode},
		{"SnapshotFileName", snapshotFileName, agentproto.SnapshotFileName},
		{"AnswerPrefix", answerPrefix, agentproto.AnswerPrefix},
		{"RefusalPrefix", refusalPrefix, agentproto.RefusalPrefix},
		{"FallbackUnreachable", fallbackUnreachable, agentproto.FallbackUnreachable},
		{"FallbackTimeout", fallbackTimeout, agentproto.FallbackTimeout},
		{"FallbackGarbage", fallbackGarbage, agentproto.FallbackGarbage},
		{"FallbackVersion", fallbackVersion, agentproto.FallbackVersion},
		{"FallbackNoVolume", fallbackNoVolume, agentproto.FallbackNoVolume},
		{"FallbackArgs", fallbackArgs, agentproto.FallbackArgs},
		{"FallbackInputTooLarge", fallbackInputTooLarge, agentproto.FallbackInputTooLarge},
	} {
		if c.got != c.want {
			t.Errorf("%s is %q here, %q in agentproto", c.name, c.got, c.want)
		}
	}
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"MaxInput", maxInput, agentproto.MaxInput},
		{"MaxAnswer", maxAnswer, agentproto.MaxAnswer},
		{"MaxDigest", maxDigest, agentproto.MaxDigest},
		{"MaxVersion", maxVersion, agentproto.MaxVersion},
		{"MaxRuntime", maxRuntime, agentproto.MaxRuntime},
		{"MaxToken", maxToken, agentproto.MaxToken},
		{"MaxWorkspace", maxWorkspace, agentproto.MaxWorkspace},
		{"NonceLen", nonceLen, agentproto.NonceLen},
	} {
		if c.got != c.want {
			t.Errorf("%s is %d here, %d in agentproto", c.name, c.got, c.want)
		}
	}
	for _, reason := range []string{fallbackUnreachable, fallbackTimeout, fallbackGarbage, fallbackVersion, fallbackNoVolume, fallbackArgs, fallbackInputTooLarge} {
		if !agentproto.KnownFallbackReason(reason) {
			t.Errorf("agentproto does not know the fall-back reason %q", reason)
		}
	}
}

const testNonce = "0123456789abcdef0123456789abcdef"

// FuzzEncodeRequest: the client encodes a request exactly as agentproto does, and refuses the
// same ones.
func FuzzEncodeRequest(f *testing.F) {
	f.Add(testNonce, "claude-code", "..2026_12_04_22_00_00.000000001", token, "ws_123", uint8(3), []byte(`{"tool_name":"Bash"}`))
	f.Add(testNonce, "gemini-cli", "v", "", "", uint8(0), []byte{})
	f.Add(testNonce, "codex", "v", "-", "-", uint8(1), []byte("\n\n"))
	f.Add("0123", "Claude Code", "a/b", "a b", "ws 1", uint8(2), []byte("x"))
	f.Add(testNonce, strings.Repeat("a", maxRuntime+1), strings.Repeat("v", maxVersion+1), strings.Repeat("t", maxToken+1), strings.Repeat("w", maxWorkspace+1), uint8(0), []byte{})
	f.Fuzz(func(t *testing.T, nonce, runtime, version, token, workspace string, flags uint8, input []byte) {
		want, wantErr := agentproto.EncodeRequest(&agentproto.Request{Nonce: nonce, Runtime: runtime, Version: version, Token: token,
			Flags: agentproto.Flags{Layers: flags&1 != 0, ExplicitAllow: flags&2 != 0}, Workspace: workspace, Input: input})
		got, ok := encodeRequest(&request{nonce: nonce, runtime: runtime, version: version, token: token,
			layers: flags&1 != 0, explicitAllow: flags&2 != 0, workspace: workspace, input: input})
		if ok != (wantErr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("encoded %q, %v; agentproto %q, %v", got, ok, want, wantErr)
		}
	})
}

func TestEncodeRequestBounds(t *testing.T) {
	for _, size := range []int{maxInput, maxInput + 1} {
		input := make([]byte, size)
		want, wantErr := agentproto.EncodeRequest(&agentproto.Request{Nonce: testNonce, Runtime: "claude-code", Version: "v", Input: input})
		got, ok := encodeRequest(&request{nonce: testNonce, runtime: "claude-code", version: "v", input: input})
		if ok != (wantErr == nil) || !bytes.Equal(got, want) {
			t.Errorf("an input of %d bytes: encoded %v, agentproto %v", size, ok, wantErr)
		}
	}
}

// errCut is a stream's error other than its end, as a deadline or a reset is.
var errCut = errors.New("the stream was cut")

// chunked reads msg in reads of the sizes cuts gives in turn (at least 1 byte each), then ends
// with io.EOF, or with errCut when cut is set.
type chunked struct {
	msg  []byte
	cuts []byte
	i    int
	cut  bool
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.msg) == 0 {
		if c.cut {
			return 0, errCut
		}
		return 0, io.EOF
	}
	size := len(c.msg)
	if len(c.cuts) > 0 {
		size = int(c.cuts[c.i%len(c.cuts)]) + 1
		c.i++
	}
	n := copy(p, c.msg[:min(size, len(c.msg))])
	c.msg = c.msg[n:]
	return n, nil
}

// read is chunked as readResponse reads: errEOF for io.EOF.
func (c *chunked) read(p []byte) (int, error) {
	n, err := c.Read(p)
	if err == io.EOF {
		err = errEOF
	}
	return n, err
}

func responseMessage(t testing.TB, r agentproto.Response) []byte {
	t.Helper()
	msg, err := agentproto.EncodeResponse(&r)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// FuzzReadResponse: the client reads the same responses from a stream as agentproto does,
// refuses the same ones, and passes on the stream's own error when agentproto does.
func FuzzReadResponse(f *testing.F) {
	ok := agentproto.Response{Nonce: testNonce, Version: "..2026_12_04_22_00_00.000000001", Digest: "sha256:ab", Exit: 2, Stdout: []byte("out\n"), Stderr: []byte("err\n")}
	msg := responseMessage(f, ok)
	f.Add(msg, []byte{}, false)
	f.Add(msg, []byte{0, 1, 5}, false)
	f.Add(msg[:len(msg)-3], []byte{7}, true)
	f.Add(append(msg, 'x'), []byte{}, false)
	f.Add([]byte("HTTP/1.1 200 OK\r\n\r\n"), []byte{}, false)
	f.Add([]byte("gate-agent/1\nnonce "+testNonce+"\nversion v\ndigest -\nexit 0\nstdout 0\nstderr 0\n\n"), []byte{2}, false)
	f.Add([]byte("gate-agent/1\nnonce "+testNonce+"\nversion v\ndigest -\nexit 1\nstdout 0\nstderr 0\n\n"), []byte{}, false)
	f.Add([]byte("gate-agent/1\nnonce "+testNonce+"\nversion v\ndigest -\nexit 0\nstdout 01\nstderr 0\n\nx"), []byte{}, false)
	f.Add([]byte("gate-agent/1\nnonce "+testNonce+"\nversion v\ndigest -\nexit 0\nstdout 0\nstderr 0\nextra 1\n\n"), []byte{}, false)
	f.Add([]byte("gate-agent/1\n"), []byte{}, true)
	f.Add([]byte("gate-agent/1\nnonce "+testNonce+"\nversion v\ndigest -\nexit 0\nstdout 1048577\nstderr 0\n\n"), []byte{}, false)
	f.Fuzz(func(t *testing.T, msg, cuts []byte, cut bool) {
		want, wantErr := agentproto.ReadResponse(&chunked{msg: msg, cuts: cuts, cut: cut})
		got, err := readResponse((&chunked{msg: msg, cuts: cuts, cut: cut}).read)
		sameResponse(t, got, err, want, wantErr)
	})
}

// TestReadResponseBounds: a digest of agentproto.MaxDigest (a header near its bound) and
// answers of MaxAnswer are read as agentproto reads them; a header past the bound is refused.
func TestReadResponseBounds(t *testing.T) {
	big := agentproto.Response{Nonce: testNonce, Version: "v", Digest: strings.Repeat("a", agentproto.MaxDigest), Stdout: bytes.Repeat([]byte("o"), agentproto.MaxAnswer), Stderr: bytes.Repeat([]byte("e"), agentproto.MaxAnswer)}
	msg := responseMessage(t, big)
	long := append([]byte("gate-agent/1\nnonce "+testNonce+"\nversion v\ndigest "), bytes.Repeat([]byte("a"), maxResponseHeader)...)
	for _, tc := range []struct {
		name string
		msg  []byte
	}{
		{"largest", msg},
		{"header past its bound", long},
	} {
		for _, cuts := range [][]byte{nil, {255}, {3, 200}} {
			want, wantErr := agentproto.ReadResponse(&chunked{msg: tc.msg, cuts: cuts})
			got, err := readResponse((&chunked{msg: tc.msg, cuts: cuts}).read)
			t.Run(tc.name, func(t *testing.T) { sameResponse(t, got, err, want, wantErr) })
		}
	}
}

func sameResponse(t *testing.T, got response, err error, want agentproto.Response, wantErr error) {
	t.Helper()
	switch {
	case (err == nil) != (wantErr == nil):
		t.Fatalf("read: %v; agentproto: %v", err, wantErr)
	case errors.Is(wantErr, errCut) != errors.Is(err, errCut):
		t.Fatalf("read: %v; agentproto: %v (the stream's own error)", err, wantErr)
	case err == nil && (got.nonce != want.Nonce || got.version != want.Version || got.exit != want.Exit ||
		!bytes.Equal(got.stdout, want.Stdout) || !bytes.Equal(got.stderr, want.Stderr)):
		t.Fatalf("read %+v; agentproto %+v", got, want)
	}
}

// FuzzChecks: the client's checks of a runtime, version, token and workspace are agentproto's,
// and so is its nonce.
func FuzzChecks(f *testing.F) {
	for _, s := range []string{"", "-", "claude-code", "Claude Code", "..2026_12_04_22_00_00.000000001", token, "ws_123", "ws 1", "a\x7f", strings.Repeat("a", 129)} {
		f.Add(s, []byte("0123456789abcdef"))
	}
	f.Fuzz(func(t *testing.T, s string, random []byte) {
		for _, c := range []struct {
			name      string
			got, want bool
		}{
			{"runtime", validRuntime(s), agentproto.ValidRuntime(s)},
			{"version", validVersion(s), agentproto.ValidVersion(s)},
			{"token", validToken(s), agentproto.ValidToken(s)},
			{"workspace", validWorkspace(s) && s != none, agentproto.ValidWorkspace(s)},
		} {
			if c.got != c.want {
				t.Errorf("%q as a %s: %v here, %v in agentproto", s, c.name, c.got, c.want)
			}
		}
		var b [16]byte
		copy(b[:], random)
		if got, want := hexNonce(b), agentproto.HexNonce(b); got != want {
			t.Errorf("nonce %q, agentproto %q", got, want)
		}
	})
}
