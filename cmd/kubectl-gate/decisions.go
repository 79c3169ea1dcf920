package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/decisionlog"
	"github.com/intutic/gate-operator/internal/webhook"
)

// cmdDecisions is the command that reads the decision trail.
const cmdDecisions = "decisions"

// runDecisions runs kubectl gate decisions with args (after the command's name).
func runDecisions(ctx context.Context, clk clock.PassiveClock, args []string, stdout, stderr io.Writer) int {
	fs, o := flags(cmdDecisions, stderr)
	var all bool
	var since time.Duration
	var output string
	var f decisionFilter
	fs.BoolVarP(&all, "all-namespaces", "A", false, "read the decisions of every namespace")
	fs.StringVar(&f.pod, "pod", "", "only the calls of this sandbox pod")
	fs.StringVar(&f.policy, "policy", "", "only decisions under this policy (a HarnessAgentPolicy or a ClusterHarnessAgentPolicy layer)")
	fs.StringVar(&f.session, "session", "", "only the calls of this session")
	fs.StringVar(&f.verdict, "verdict", "", "only this verdict: Allow, Ask or Block")
	fs.DurationVar(&since, "since", time.Hour, "only decisions made this long ago or since")
	fs.StringVarP(&output, "output", "o", "", "json: the records as stored, one per line")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	var bad string
	switch {
	case fs.NArg() != 0:
		bad = fmt.Sprintf("want no arguments, got %q", fs.Args())
	case output != "" && output != "json":
		bad = fmt.Sprintf("--output %q: only json", output)
	case f.verdict != "" && !slices.ContainsFunc([]string{"Allow", "Ask", "Block"}, func(v string) bool { return strings.EqualFold(v, f.verdict) }):
		bad = fmt.Sprintf("--verdict %q: one of Allow, Ask, Block", f.verdict)
	case since <= 0:
		bad = fmt.Sprintf("--since %s: a positive duration", since)
	}
	if bad != "" {
		fmt.Fprintf(stderr, "kubectl gate decisions: %s\n\n%s", bad, usage)
		return exitUsage
	}
	cs, ns, err := o.clientset()
	if err == nil {
		if all {
			ns = ""
		}
		f.since = clk.Now().Add(-since)
		var recs []storedRecord
		if recs, err = readDecisions(ctx, kubeLogs{cs}, ns, since, f, stderr); err == nil {
			err = printDecisions(recs, output, stdout, stderr, ns)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return exitFailed
	}
	return exitOK
}

// Containers whose stdout is a decision trail (internal/decisionlog): the gate-agent sidecar of
// a governed pod, and a SessionConfirmer's confirmer.
const (
	confirmerContainer = "confirmer"
	// maxRecordLine bounds one line read from a log; a record is far smaller.
	maxRecordLine = 1 << 20
)

// decisionFilter selects records; empty fields select all.
type decisionFilter struct {
	pod, policy, session, verdict string
	since                         time.Time
}

// logSource is one container whose log holds records.
type logSource struct {
	namespace, pod, container string
	// previous: the container restarted; the log of its previous run is read too.
	previous bool
}

// logReader reads the records' sources: the pods of a namespace ("" all) and their logs.
type logReader interface {
	pods(ctx context.Context, namespace string) ([]corev1.Pod, error)
	logs(ctx context.Context, src logSource, previous bool, since time.Duration) (io.ReadCloser, error)
}

// kubeLogs reads pods and their logs through the API server (pods/log), so RBAC decides whose
// records a user sees.
type kubeLogs struct{ cs kubernetes.Interface }

func (k kubeLogs) pods(ctx context.Context, namespace string) ([]corev1.Pod, error) {
	list, err := k.cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

func (k kubeLogs) logs(ctx context.Context, src logSource, previous bool, since time.Duration) (io.ReadCloser, error) {
	secs := int64(since.Seconds()) + 1
	return k.cs.CoreV1().Pods(src.namespace).GetLogs(src.pod, &corev1.PodLogOptions{Container: src.container, Previous: previous, SinceSeconds: &secs}).Stream(ctx)
}

// sources are the containers of pods whose logs hold records: every container named gate-agent
// (the injected sidecar, an init container with restartPolicy Always), and the confirmer
// container of a SessionConfirmer's pods.
func sources(pods []corev1.Pod) []logSource {
	var out []logSource
	for _, p := range pods {
		restarted := map[string]bool{}
		for _, st := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
			restarted[st.Name] = st.RestartCount > 0
		}
		for _, c := range append(slices.Clone(p.Spec.InitContainers), p.Spec.Containers...) {
			_, confirmer := p.Labels[gatev1.LabelConfirmer]
			if c.Name == webhook.GateAgentContainerName || (confirmer && c.Name == confirmerContainer) {
				out = append(out, logSource{namespace: p.Namespace, pod: p.Name, container: c.Name, previous: restarted[c.Name]})
			}
		}
	}
	return out
}

// storedRecord is one record as a log holds it: its line and what the reader sorts and filters by.
type storedRecord struct {
	line []byte
	rec  decisionlog.Record
	time time.Time
	src  logSource
}

// readDecisions reads the records of every source in namespace ("" all) written within since of
// now that f selects, in time order. A source it may not read (RBAC) or that has no log yet (a
// container not started) is reported on warn and skipped; it fails only when no source could be
// read.
func readDecisions(ctx context.Context, r logReader, namespace string, since time.Duration, f decisionFilter, warn io.Writer) ([]storedRecord, error) {
	pods, err := r.pods(ctx, namespace)
	if err != nil {
		return nil, err
	}
	srcs := sources(pods)
	var out []storedRecord
	var read int
	var errs []error
	for _, src := range srcs {
		for _, previous := range []bool{true, false} {
			if previous && !src.previous {
				continue
			}
			recs, err := readSource(ctx, r, src, previous, since, f)
			if err != nil {
				if !previous {
					errs = append(errs, err)
					fmt.Fprintf(warn, "warning: the log of %s/%s container %s: %v\n", src.namespace, src.pod, src.container, err)
				}
				continue
			}
			read++
			out = append(out, recs...)
		}
	}
	if read == 0 && len(errs) > 0 {
		return nil, fmt.Errorf("no decision log could be read: %w", errors.Join(errs...))
	}
	slices.SortStableFunc(out, func(a, b storedRecord) int {
		return cmp.Or(a.time.Compare(b.time), strings.Compare(a.rec.DecisionID, b.rec.DecisionID))
	})
	return out, nil
}

// readSource reads one log: every line that is a record of the schema and that f selects.
// Other lines (a component's own logs, if it writes them to stdout) are skipped.
func readSource(ctx context.Context, r logReader, src logSource, previous bool, since time.Duration, f decisionFilter) ([]storedRecord, error) {
	rc, err := r.logs(ctx, src, previous, since)
	if err != nil {
		if apierrors.IsForbidden(err) {
			return nil, fmt.Errorf("forbidden (reading records needs get on pods/log): %w", err)
		}
		return nil, err
	}
	defer rc.Close()
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 0, 64<<10), maxRecordLine)
	var out []storedRecord
	for sc.Scan() {
		line := sc.Bytes()
		if !strings.Contains(string(line), decisionlog.Schema) {
			continue
		}
		var rec decisionlog.Record
		if json.Unmarshal(line, &rec) != nil || rec.Schema != decisionlog.Schema {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, rec.Time)
		if err != nil || !f.selects(&rec, t) {
			continue
		}
		out = append(out, storedRecord{line: slices.Clone(line), rec: rec, time: t, src: src})
	}
	return out, sc.Err()
}

// selects reports whether f selects rec, decided at t.
func (f decisionFilter) selects(rec *decisionlog.Record, t time.Time) bool {
	switch {
	case t.Before(f.since):
		return false
	case f.pod != "" && rec.Pod != f.pod:
		return false
	case f.session != "" && rec.Session != f.session:
		return false
	case f.verdict != "" && !strings.EqualFold(rec.Verdict, f.verdict):
		return false
	case f.policy != "" && !namesPolicy(rec, f.policy):
		return false
	}
	return true
}

// namesPolicy reports whether rec was decided under the policy name: its own policy
// (<namespace>/<name>) or one of its layers (…/<name>).
func namesPolicy(rec *decisionlog.Record, name string) bool {
	matches := func(s string) bool { return s == name || strings.HasSuffix(s, "/"+name) }
	if matches(rec.Policy) || matches(rec.Layer) {
		return true
	}
	return slices.ContainsFunc(rec.Layers, func(l decisionlog.LayerRecord) bool { return matches(l.Layer) })
}

// printDecisions prints the records as a table a person scans, or as storedRecord (-o json: one
// record per line, NDJSON, in time order).
func printDecisions(recs []storedRecord, output string, stdout, stderr io.Writer, namespace string) error {
	if output == "json" {
		for _, s := range recs {
			if _, err := stdout.Write(append(s.line, '\n')); err != nil {
				return err
			}
		}
		return nil
	}
	if len(recs) == 0 {
		where := "in namespace " + namespace
		if namespace == "" {
			where = "in any namespace"
		}
		fmt.Fprintf(stderr, "No decisions %s.\n", where)
		return nil
	}
	w := tabwriter.NewWriter(stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, "TIME\tNAMESPACE\tSURFACE\tFROM\tTOOL\tVERDICT\tRULE\tREASON")
	for _, s := range recs {
		r := s.rec
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.time.UTC().Format("2006-01-02T15:04:05.000Z"), cmp.Or(r.Namespace, s.src.namespace),
			r.Surface, from(&r), orNone(r.Tool), verdictOf(&r), orNone(r.Rule), oneLine(cmp.Or(r.Reason, r.Code), 72))
	}
	return w.Flush()
}

// from is who made the call, as the record's surface knows it: the pod (hook), the session
// (Managed Agents), the caller (gate API), the approver (a ToolApproval's outcome).
func from(r *decisionlog.Record) string {
	switch {
	case r.Approval != nil && r.Approval.User != "":
		return "approval " + r.Approval.Name + " by " + r.Approval.User
	case r.Approval != nil:
		return "approval " + r.Approval.Name
	case r.Pod != "":
		return "pod " + r.Pod
	case r.Session != "":
		return "session " + r.Session
	case r.Caller != "":
		return "caller " + r.Caller
	}
	return "<none>"
}

// verdictOf is the verdict in effect, with what Audit recorded and let through, and a mark on a
// record the agent's own user wrote (a gate-hook fallback).
func verdictOf(r *decisionlog.Record) string {
	v := r.Verdict
	if r.Would != nil {
		v += " (audit: would " + r.Would.Verdict + ")"
	}
	if r.Untrusted {
		v += " (hook, unverified)"
	}
	return v
}

// oneLine is s on one line, at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return orNone(s)
}
