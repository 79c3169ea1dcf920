package anthropic

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// rawKey is the signing key the vectors use; secret is its whsec_ form.
var (
	rawKey = []byte("gate-operator webhook test key!!")
	secret = "whsec_" + base64.StdEncoding.EncodeToString(rawKey)
)

// signV1 is the documented algorithm, written out independently of the verifier:
// base64(HMAC-SHA256(key, "<id>.<ts>.<body>")).
func signV1(key []byte, id string, ts int64, body string) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + strconv.FormatInt(ts, 10) + "." + body))
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

func headers(id string, ts int64, sig string) http.Header {
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	h.Set("webhook-signature", sig)
	return h
}

func TestWebhookVectors(t *testing.T) {
	now := time.Unix(1_790_000_000, 0)
	body := `{"id":"wevt_1","created_at":"2026-09-21T12:00:00Z","type":"event","data":{"id":"sesn_1","organization_id":"org_1","workspace_id":"wrkspc_1","type":"session.requires_action"}}`
	good := signV1(rawKey, "msg_1", now.Unix(), body)
	cases := []struct {
		name    string
		secret  string
		h       http.Header
		body    string
		wantErr error
	}{
		{"valid", secret, headers("msg_1", now.Unix(), good), body, nil},
		{"valid with a bare key", base64.StdEncoding.EncodeToString(rawKey), headers("msg_2", now.Unix(), signV1(rawKey, "msg_2", now.Unix(), body)), body, nil},
		{"valid with an unpadded key", "whsec_" + base64.RawStdEncoding.EncodeToString(rawKey), headers("msg_3", now.Unix(), signV1(rawKey, "msg_3", now.Unix(), body)), body, nil},
		{"several signatures, one matching", secret, headers("msg_4", now.Unix(), "v1,bm90IGl0 v2,"+signV1(rawKey, "msg_4", now.Unix(), body)[3:]+" "+signV1(rawKey, "msg_4", now.Unix(), body)), body, nil},
		{"tampered body", secret, headers("msg_1", now.Unix(), good), body + " ", ErrWebhookSignature},
		{"wrong key", "whsec_" + base64.StdEncoding.EncodeToString([]byte("another key entirely, 32 bytes!")), headers("msg_1", now.Unix(), good), body, ErrWebhookSignature},
		{"only a non-v1 signature", secret, headers("msg_1", now.Unix(), "v1a,"+good[3:]), body, ErrWebhookSignature},
		{"too old", secret, headers("msg_5", now.Add(-301*time.Second).Unix(), signV1(rawKey, "msg_5", now.Add(-301*time.Second).Unix(), body)), body, ErrWebhookTooOld},
		{"too new", secret, headers("msg_6", now.Add(301*time.Second).Unix(), signV1(rawKey, "msg_6", now.Add(301*time.Second).Unix(), body)), body, ErrWebhookTooNew},
		{"edge of the window", secret, headers("msg_7", now.Add(-300*time.Second).Unix(), signV1(rawKey, "msg_7", now.Add(-300*time.Second).Unix(), body)), body, nil},
		{"missing header", secret, http.Header{"Webhook-Id": {"x"}}, body, ErrWebhookHeaders},
		{"timestamp not a number", secret, http.Header{"Webhook-Id": {"x"}, "Webhook-Timestamp": {"soon"}, "Webhook-Signature": {good}}, body, ErrWebhookTimestamp},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := NewWebhookVerifier(tc.secret)
			if err != nil {
				t.Fatal(err)
			}
			v.now = func() time.Time { return now }
			if err := v.Verify(tc.h, []byte(tc.body)); !errors.Is(err, tc.wantErr) {
				t.Fatalf("got %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func TestWebhookReplay(t *testing.T) {
	now := time.Unix(1_790_000_000, 0)
	v, _ := NewWebhookVerifier(secret)
	v.now = func() time.Time { return now }
	h := headers("msg_r", now.Unix(), signV1(rawKey, "msg_r", now.Unix(), "{}"))
	if err := v.Verify(h, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(h, []byte("{}")); !errors.Is(err, ErrWebhookReplayed) {
		t.Fatalf("a replayed webhook-id: %v", err)
	}
	// A replay with a forged signature is a signature failure, not a replay.
	if err := v.Verify(headers("msg_r", now.Unix(), "v1,Zm9yZ2Vk"), []byte("{}")); !errors.Is(err, ErrWebhookSignature) {
		t.Fatalf("got %v", err)
	}
}

func TestWebhookKeys(t *testing.T) {
	for _, bad := range []string{"", "whsec_", "abc", "whsec_a-b_c-d_", "whsec_" + base64.StdEncoding.EncodeToString(rawKey) + "==="} {
		if _, err := NewWebhookVerifier(bad); err == nil {
			t.Errorf("key %q was accepted", bad)
		}
	}
}

func FuzzWebhookVerify(f *testing.F) {
	now := time.Unix(1_790_000_000, 0)
	f.Add("msg_1", strconv.FormatInt(now.Unix(), 10), signV1(rawKey, "msg_1", now.Unix(), "{}"), "{}")
	f.Add("", "", "", "")
	f.Add("id", "-1", "v1,", "x")
	f.Add("id", "99999999999999999999", "v1,a v1,b v2", "x")
	f.Fuzz(func(t *testing.T, id, ts, sig, body string) {
		v, _ := NewWebhookVerifier(secret)
		v.now = func() time.Time { return now }
		h := http.Header{}
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", ts)
		h.Set("webhook-signature", sig)
		err := v.Verify(h, []byte(body))
		if err == nil {
			// Only a correct signature may pass.
			secs, perr := strconv.ParseInt(ts, 10, 64)
			if perr != nil {
				t.Fatalf("accepted a non-numeric timestamp %q", ts)
			}
			want := signV1(rawKey, id, secs, body)
			found := false
			for _, s := range splitSpaces(sig) {
				if s == want {
					found = true
				}
			}
			if !found {
				t.Fatalf("accepted %q without a matching signature", fmt.Sprint(sig))
			}
		}
	})
}

func splitSpaces(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ' ' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}
