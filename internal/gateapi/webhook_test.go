package gateapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/intutic/gate-operator/internal/anthropic/anthropictest"
	"github.com/intutic/gate-operator/internal/gate/gatetest"
)

// rawKey is the webhook signing key of the tests; secret is its whsec_ form.
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

func TestWebhookEndpoint(t *testing.T) {
	f := newAPI(t, gatetest.CodingAgents(t))
	f.fake.AddSession("sesn_wh", "agent_1", anthropictest.ToolUse{Name: "read", Permission: "ask"})
	post := func(id, body, sig string, ts int64) int {
		req, _ := http.NewRequest("POST", f.srv.URL+"/v1/webhooks/anthropic", strings.NewReader(body))
		req.Header = headers(id, ts, sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	now := time.Now().Unix()
	body := `{"id":"wevt_1","created_at":"2026-12-01T00:00:00Z","type":"event","data":{"id":"sesn_wh","organization_id":"o","workspace_id":"w","type":"session.requires_action"}}`
	if got := post("msg_1", body, "v1,Zm9yZ2Vk", now); got != 401 {
		t.Fatalf("bad signature: %d", got)
	}
	if got := post("msg_2", "not json", signV1(rawKey, "msg_2", now, "not json"), now); got != 400 {
		t.Fatalf("bad body: %d", got)
	}
	if got := post("msg_3", body, signV1(rawKey, "msg_3", now, body), now); got != 202 {
		t.Fatalf("requires_action: %d", got)
	}
	if got := post("msg_3", body, signV1(rawKey, "msg_3", now, body), now); got != 200 {
		t.Fatalf("replay: %d", got)
	}
	other := `{"id":"wevt_2","created_at":"2026-12-01T00:00:00Z","type":"event","data":{"id":"sesn_wh","type":"session.running"}}`
	if got := post("msg_4", other, signV1(rawKey, "msg_4", now, other), now); got != 200 {
		t.Fatalf("another event type: %d", got)
	}
	// Nothing was acted on yet: the queue's workers are not running in this test.
	if n := len(f.fake.Confirmations("sesn_wh")); n != 0 {
		t.Fatalf("%d confirmations before the queue ran", n)
	}
}
