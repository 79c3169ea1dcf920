// Package e2e runs the demo's flow on the local control plane, with kube-controller-manager,
// and asserts what a user would notice.
package e2e

import (
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/anthropic/anthropictest"
	"github.com/intutic/gate-operator/internal/localenv"
	"github.com/intutic/gate-operator/internal/testutil"
)

const ns = "agents"

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestEndToEnd(t *testing.T) {
	ctx := testutil.Context(t, 10*time.Minute)
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	env, err := localenv.Start(ctx, root, logWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Stop()
	dnsAddr, err := env.StartDNS(map[string]string{"api.anthropic.com": "192.0.2.10", "github.com": "192.0.2.20"})
	if err != nil {
		t.Fatal(err)
	}
	if err := env.StartManager("--nameserver=" + dnsAddr); err != nil {
		t.Fatal(err)
	}
	const key = "sk-ant-e2e"
	fake := anthropictest.New(key)
	defer fake.Close()
	ids := fake.AddSession("sesn_e2e", "agent_e2e",
		anthropictest.ToolUse{Name: "bash", Input: map[string]any{"command": "rm -rf /"}, Permission: "ask"},
		anthropictest.ToolUse{Name: "read", Input: map[string]any{"file_path": "README.md"}, Permission: "ask"},
	)

	c := env.Client
	must(t, env.ApplySamples(ctx, localenv.Samples{Namespace: ns, APIKey: key, WebhookKey: "whsec_ZTJlIHdlYmhvb2sga2V5", BaseURL: fake.URL, AgentID: "agent_e2e"}))
	policy := &gatev1.HarnessAgentPolicy{}

	key2 := types.NamespacedName{Namespace: ns, Name: "coding-agents"}
	wait(t, "the policy is Ready", func() bool {
		return c.Get(ctx, key2, policy) == nil && meta.IsStatusConditionTrue(policy.Status.Conditions, gatev1.ConditionReady)
	})
	conf, err := env.RunConfirmer(ctx, ns, "coding-agents")
	if err != nil {
		t.Fatal(err)
	}

	// The blocked call's deny_message reaches the API; the allowed one is allowed.
	wait(t, "both calls are confirmed", func() bool { return len(fake.Confirmations("sesn_e2e")) == 2 })
	for _, e := range fake.Confirmations("sesn_e2e") {
		switch e["tool_use_id"] {
		case ids[0]:
			if e["result"] != "deny" || e["deny_message"] != "[Intutic Governance] BLOCKED: destructive command on the root filesystem" {
				t.Fatalf("the blocked call: %v", e)
			}
		case ids[1]:
			if e["result"] != "allow" {
				t.Fatalf("the allowed call: %v", e)
			}
		}
	}

	// A policy edit reaches the running confirmer as a new snapshot digest.
	before := policy.Status.SnapshotDigest
	if readyDigest(t, conf.Addr) != before {
		t.Fatalf("the confirmer does not report the policy's digest %s", before)
	}
	policy.Spec.Rules[0].Reason = "no deleting the root filesystem"
	must(t, c.Update(ctx, policy))
	var after string
	wait(t, "the policy publishes a new snapshot", func() bool {
		if c.Get(ctx, key2, policy) != nil {
			return false
		}
		after = policy.Status.SnapshotDigest
		return after != before && policy.Status.ObservedGeneration == policy.Generation
	})
	wait(t, "the confirmer reloads it", func() bool { return readyDigest(t, conf.Addr) == after })

	// Deleting the policy garbage-collects its children (kube-controller-manager).
	must(t, c.Delete(ctx, policy))
	wait(t, "the children are garbage-collected", func() bool {
		cmErr := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "coding-agents-bootstrap"}, &corev1.ConfigMap{})
		npErr := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "coding-agents-egress"}, &networkingv1.NetworkPolicy{})
		return apierrors.IsNotFound(cmErr) && apierrors.IsNotFound(npErr)
	})
	// And the SessionConfirmer says its policy is gone.
	wait(t, "the SessionConfirmer reports the missing policy", func() bool {
		got := &gatev1.SessionConfirmer{}
		if c.Get(ctx, key2, got) != nil {
			return false
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, gatev1.ConditionPolicyResolved)
		return cond != nil && cond.Reason == "PolicyNotFound"
	})
}

func readyDigest(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var out struct {
		SnapshotDigest string `json:"snapshotDigest"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return out.SnapshotDigest
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wait fails the test unless cond holds within a minute; what names the awaited state.
func wait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, 60*time.Second, func() error {
		if !cond() {
			return errors.New(what)
		}
		return nil
	})
}
