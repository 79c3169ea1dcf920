package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/decisionlog"
	"github.com/intutic/gate-operator/internal/decisionlog/decisionlogtest"
)

// fakeLogs serves pods and their logs from memory; a log keyed "ns/pod/container" (with
// "/previous" for the run before a restart), a forbidden one by its key in forbidden.
type fakeLogs struct {
	podList   []corev1.Pod
	logText   map[string]string
	forbidden map[string]bool
	asked     []string
}

func (f *fakeLogs) pods(_ context.Context, ns string) ([]corev1.Pod, error) {
	var out []corev1.Pod
	for _, p := range f.podList {
		if ns == "" || p.Namespace == ns {
			out = append(out, p)
		}
	}
	return out, nil
}

func (f *fakeLogs) logs(_ context.Context, src logSource, previous bool, _ time.Duration) (io.ReadCloser, error) {
	key := src.namespace + "/" + src.pod + "/" + src.container
	if previous {
		key += "/previous"
	}
	f.asked = append(f.asked, key)
	if f.forbidden[key] {
		return nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods/log"}, src.pod, fmt.Errorf("no"))
	}
	text, ok := f.logText[key]
	if !ok {
		return nil, apierrors.NewBadRequest("container not started")
	}
	return io.NopCloser(strings.NewReader(text)), nil
}

func sandboxPod(ns, name string, restarts int32) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "egress-wait"}, {Name: "gate-agent", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}},
			Containers:     []corev1.Container{{Name: "agent"}}},
		Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{{Name: "gate-agent", RestartCount: restarts}}}}
}

func confirmerPod(ns, name string) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{gatev1.LabelConfirmer: "coding-agents"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "confirmer"}}}}
}

// line is a record as a component writes it.
func line(t *testing.T, at time.Time, id string, mutate func(*decisionlog.Record)) string {
	t.Helper()
	rec := decisionlog.Record{Schema: decisionlog.Schema, Time: at.UTC().Format(time.RFC3339Nano), DecisionID: id, ReportedBy: "gate-agent",
		Surface: "hook-sidecar", Verdict: "Allow", Enforcement: "enforce", InputSHA256: strings.Repeat("0", 64)}
	mutate(&rec)
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

// TestDecisions: the records of every sidecar and confirmer are read, a restarted container's
// previous run too, other lines skipped, filters applied, and the rest merged in time order;
// -o json prints them as stored; a log RBAC refuses is a warning, unless no log can be read.
func TestDecisions(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	at := func(minutes int) time.Time { return now.Add(time.Duration(minutes) * time.Minute) }
	block := func(pod string) func(*decisionlog.Record) {
		return func(r *decisionlog.Record) {
			r.Pod, r.Namespace, r.Verdict, r.Rule, r.Tool, r.Reason, r.Policy = pod, "agents", "Block", "no-root-rm", "Bash", "destructive command on the root filesystem", "agents/coding-agents"
		}
	}
	f := &fakeLogs{
		podList: []corev1.Pod{sandboxPod("agents", "sandbox-a", 1), sandboxPod("agents", "sandbox-b", 0), confirmerPod("agents", "confirmer-0"),
			{ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: "web"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "confirmer"}}}},
			sandboxPod("other", "sandbox-c", 0)},
		logText: map[string]string{
			"agents/sandbox-a/gate-agent/previous": line(t, at(-50), "a0", block("sandbox-a")),
			"agents/sandbox-a/gate-agent": `{"level":"INFO","msg":"gate-agent serving"}` + "\n" + line(t, at(-30), "a1", block("sandbox-a")) +
				line(t, at(-5), "a2", func(r *decisionlog.Record) { r.Pod, r.Tool = "sandbox-a", "Read" }) +
				line(t, at(-90), "a-old", block("sandbox-a")) + "not json " + decisionlog.Schema + "\n",
			"agents/sandbox-b/gate-agent": line(t, at(-20), "b1", func(r *decisionlog.Record) {
				block("sandbox-b")(r)
				r.Surface, r.ReportedBy, r.Untrusted, r.FallbackReason = "hook-fallback", "hook", true, "sidecar-unreachable"
			}),
			"agents/confirmer-0/confirmer": line(t, at(-40), "c1", func(r *decisionlog.Record) {
				r.Surface, r.ReportedBy, r.Session, r.Tool, r.Verdict, r.Policy = "managed-agents", "confirmer", "sesn_1", "bash", "Block", "agents/coding-agents"
			}) + line(t, at(-10), "c2", func(r *decisionlog.Record) {
				r.Surface, r.ReportedBy, r.Session, r.Tool, r.Verdict, r.Reason = "tool-approval", "confirmer", "sesn_1", "web_fetch", "Allow", "fetches need a human"
				r.Approval = &decisionlog.ApprovalRecord{Name: "web-fetch-0123", State: "Approved", Outcome: "Allowed", User: "alice"}
			}),
			"other/sandbox-c/gate-agent": line(t, at(-1), "x1", block("sandbox-c")),
		},
	}
	read := func(ns string, filter decisionFilter) []string {
		t.Helper()
		filter.since = now.Add(-time.Hour)
		var warn bytes.Buffer
		recs, err := readDecisions(context.Background(), f, ns, time.Hour, filter, &warn)
		if err != nil || warn.Len() > 0 {
			t.Fatalf("%v; warnings %s", err, warn.String())
		}
		var ids []string
		for _, r := range recs {
			ids = append(ids, r.rec.DecisionID)
		}
		return ids
	}
	for name, c := range map[string]struct {
		ns     string
		filter decisionFilter
		want   string
	}{
		"a namespace, in time order": {"agents", decisionFilter{}, "a0 c1 a1 b1 c2 a2"},
		"every namespace":            {"", decisionFilter{}, "a0 c1 a1 b1 c2 a2 x1"},
		"one pod":                    {"agents", decisionFilter{pod: "sandbox-a"}, "a0 a1 a2"},
		"blocks":                     {"agents", decisionFilter{verdict: "block"}, "a0 c1 a1 b1"},
		"a session":                  {"agents", decisionFilter{session: "sesn_1"}, "c1 c2"},
		"a policy":                   {"agents", decisionFilter{policy: "coding-agents"}, "a0 c1 a1 b1"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := strings.Join(read(c.ns, c.filter), " "); got != c.want {
				t.Fatalf("records %s, want %s", got, c.want)
			}
		})
	}

	t.Run("output", func(t *testing.T) {
		recs, err := readDecisions(context.Background(), f, "agents", time.Hour, decisionFilter{since: now.Add(-time.Hour)}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := printDecisions(recs, "json", &out, io.Discard, "agents"); err != nil {
			t.Fatal(err)
		}
		stored := decisionlogtest.ValidateLines(t, out.String())
		if len(stored) != 6 || !strings.Contains(f.logText["agents/confirmer-0/confirmer"], strings.Split(out.String(), "\n")[1]) {
			t.Fatalf("-o json:\n%s", out.String())
		}
		out.Reset()
		if err := printDecisions(recs, "", &out, io.Discard, "agents"); err != nil {
			t.Fatal(err)
		}
		table := strings.Split(strings.TrimSpace(out.String()), "\n")
		for i, want := range []string{
			"TIME NAMESPACE SURFACE FROM TOOL VERDICT RULE REASON",
			"2026-12-06T11:10:00.000Z agents hook-sidecar pod sandbox-a Bash Block no-root-rm destructive command on the root filesystem",
			"2026-12-06T11:20:00.000Z agents managed-agents session sesn_1 bash Block <none> <none>",
			"2026-12-06T11:30:00.000Z agents hook-sidecar pod sandbox-a Bash Block no-root-rm destructive command on the root filesystem",
			"2026-12-06T11:40:00.000Z agents hook-fallback pod sandbox-b Bash Block (hook, unverified) no-root-rm destructive command on the root filesystem",
			"2026-12-06T11:50:00.000Z agents tool-approval approval web-fetch-0123 by alice web_fetch Allow <none> fetches need a human",
			"2026-12-06T11:55:00.000Z agents hook-sidecar pod sandbox-a Read Allow <none> <none>",
		} {
			if got := strings.Join(strings.Fields(table[i]), " "); got != want {
				t.Errorf("row %d:\n%s\nwant\n%s", i, got, want)
			}
		}
	})

	t.Run("forbidden", func(t *testing.T) {
		f.forbidden = map[string]bool{"agents/confirmer-0/confirmer": true}
		defer func() { f.forbidden = nil }()
		var warn bytes.Buffer
		recs, err := readDecisions(context.Background(), f, "agents", time.Hour, decisionFilter{since: now.Add(-time.Hour)}, &warn)
		if err != nil || len(recs) != 4 || !strings.Contains(warn.String(), "confirmer-0") || !strings.Contains(warn.String(), "pods/log") {
			t.Fatalf("%d records, %v; warnings %s", len(recs), err, warn.String())
		}
		f.forbidden = map[string]bool{"other/sandbox-c/gate-agent": true}
		if _, err := readDecisions(context.Background(), f, "other", time.Hour, decisionFilter{}, io.Discard); err == nil || !strings.Contains(err.Error(), "no decision log could be read") {
			t.Fatalf("every log refused: %v", err)
		}
	})
}

// TestDecisionsUsage: bad flags are refused before the cluster is asked.
func TestDecisionsUsage(t *testing.T) {
	for _, args := range [][]string{
		{"decisions", "-o", "yaml"}, {"decisions", "--verdict", "Maybe"}, {"decisions", "--since", "-1h"}, {"decisions", "extra"},
	} {
		var stderr bytes.Buffer
		if code := run(context.Background(), nil, args, io.Discard, &stderr); code != exitUsage {
			t.Errorf("%q: exit %d, want %d; %s", args, code, exitUsage, stderr.String())
		}
	}
}
