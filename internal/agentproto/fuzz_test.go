package agentproto

import (
	"bytes"
	"testing"
)

// FuzzDecodeRequest: decoding never panics; a request it accepts encodes back to the same
// bytes; and any request that encodes decodes back to itself.
func FuzzDecodeRequest(f *testing.F) {
	r := sampleRequest()
	msg, _ := EncodeRequest(&r)
	f.Add(msg, r.Nonce, r.Runtime, r.Version, r.Token, r.Workspace, uint8(3), r.Input)
	f.Add([]byte("gate-agent/1\n\n"), nonce, "x", "-", "", "", uint8(0), []byte{})
	f.Add([]byte("gate-agent/1\nnonce "+nonce+"\nruntime a\nversion b\ntoken -\nflags -\nworkspace -\nlength 0\n\n"), nonce, "a", "b", "-", "-", uint8(1), []byte("\n\n"))
	f.Fuzz(func(t *testing.T, msg []byte, nonce, runtime, version, token, workspace string, flags uint8, input []byte) {
		if got, err := DecodeRequest(msg); err == nil {
			again, err := EncodeRequest(&got)
			if err != nil {
				t.Fatalf("decoded %+v does not encode: %v", got, err)
			}
			if !bytes.Equal(again, msg) {
				t.Fatalf("decoded and encoded again:\n%q\nwas\n%q", again, msg)
			}
		}
		if got, err := ReadRequest(bytes.NewReader(msg), nil); err == nil {
			if want, err := DecodeRequest(msg); err != nil || !sameRequest(got, want) {
				t.Fatalf("ReadRequest accepted %q, which DecodeRequest decodes as %+v, %v", msg, want, err)
			}
		}
		x := Request{Nonce: nonce, Runtime: runtime, Version: version, Token: token, Workspace: workspace,
			Flags: Flags{Layers: flags&1 != 0, ExplicitAllow: flags&2 != 0}, Input: input}
		enc, err := EncodeRequest(&x)
		if err != nil {
			return
		}
		back, err := DecodeRequest(enc)
		if err != nil || !sameRequest(back, x) {
			t.Fatalf("%+v encoded as %q decodes as %+v, %v", x, enc, back, err)
		}
	})
}

// FuzzDecodeResponse is FuzzDecodeRequest for responses.
func FuzzDecodeResponse(f *testing.F) {
	r := sampleResponse()
	msg, _ := EncodeResponse(&r)
	f.Add(msg, r.Nonce, r.Version, r.Digest, uint8(2), r.Stdout, r.Stderr)
	f.Add([]byte("gate-agent/1\nnonce "+nonce+"\nversion v\ndigest -\nexit 0\nstdout 0\nstderr 0\n\n"), nonce, "v", "", uint8(0), []byte{}, []byte{})
	f.Fuzz(func(t *testing.T, msg []byte, nonce, version, digest string, exit uint8, stdout, stderr []byte) {
		if got, err := DecodeResponse(msg); err == nil {
			again, err := EncodeResponse(&got)
			if err != nil {
				t.Fatalf("decoded %+v does not encode: %v", got, err)
			}
			if !bytes.Equal(again, msg) {
				t.Fatalf("decoded and encoded again:\n%q\nwas\n%q", again, msg)
			}
		}
		if got, err := ReadResponse(bytes.NewReader(msg)); err == nil {
			if want, err := DecodeResponse(msg); err != nil || !sameResponse(got, want) {
				t.Fatalf("ReadResponse accepted %q, which DecodeResponse decodes as %+v, %v", msg, want, err)
			}
		}
		x := Response{Nonce: nonce, Version: version, Digest: digest, Exit: int(exit), Stdout: stdout, Stderr: stderr}
		enc, err := EncodeResponse(&x)
		if err != nil {
			return
		}
		back, err := DecodeResponse(enc)
		if err != nil || !sameResponse(back, x) {
			t.Fatalf("%+v encoded as %q decodes as %+v, %v", x, enc, back, err)
		}
	})
}
