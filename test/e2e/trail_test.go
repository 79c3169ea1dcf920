package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/intutic/gate-operator/internal/decisionlog"
	"github.com/intutic/gate-operator/internal/decisionlog/decisionlogtest"
	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/localenv"
	"github.com/intutic/gate-operator/internal/testutil"
)

// testDecisionTrail: kubectl gate decisions reads, through the API server, the records of the
// confirmer replicas and of the sandbox pod's gate-agent, merged in time order: the Managed
// Agents call the confirmer blocked before the sandbox pod started, then the hook's block in
// the pod; every record the schema admits. --pod and --session select each side, and the table
// names both.
func testDecisionTrail(ctx context.Context, t *testing.T, env *localenv.Env, sandbox, session string) {
	var recs []decisionlog.Record
	var confirmed, hooked int
	testutil.Eventually(t, time.Minute, func() error {
		out, err := env.Gate(ctx, "decisions", "-n", ns, "--since", "30m", "-o", "json")
		if err != nil {
			return err
		}
		recs = decisionlogtest.ValidateLines(t, out)
		confirmed = slices.IndexFunc(recs, func(r decisionlog.Record) bool {
			return r.Surface == gate.SurfaceManagedAgents && r.Session == session && r.Verdict == "Block" && r.Rule == "no-root-rm" &&
				r.ReportedBy == decisionlog.ReportedByConfirmer && r.Confirmer == "coding-agents" && r.Policy == ns+"/coding-agents"
		})
		hooked = slices.IndexFunc(recs, func(r decisionlog.Record) bool {
			return r.Surface == decisionlog.SurfaceHookSidecar && r.Pod == sandbox && r.Verdict == "Block" && r.Rule == "no-root-rm" && r.Tool == "Bash"
		})
		if confirmed < 0 || hooked < 0 {
			return fmt.Errorf("%d records, the confirmer's block at %d, the hook's at %d:\n%s", len(recs), confirmed, hooked, out)
		}
		return nil
	})
	if confirmed > hooked || !slices.IsSortedFunc(recs, func(a, b decisionlog.Record) int { return strings.Compare(a.Time, b.Time) }) {
		t.Fatalf("not in time order: the confirmer's block at %d, the hook's at %d", confirmed, hooked)
	}
	for _, c := range []struct {
		args []string
		want func(decisionlog.Record) bool
	}{
		{[]string{"--pod", sandbox}, func(r decisionlog.Record) bool { return r.Pod == sandbox }},
		{[]string{"--session", session}, func(r decisionlog.Record) bool { return r.Session == session }},
		{[]string{"--verdict", "Block", "--policy", "coding-agents"}, func(r decisionlog.Record) bool { return r.Verdict == "Block" }},
	} {
		out, err := env.Gate(ctx, append([]string{"decisions", "-n", ns, "--since", "30m", "-o", "json"}, c.args...)...)
		must(t, err)
		got := decisionlogtest.ValidateLines(t, out)
		if len(got) == 0 || !slices.ContainsFunc(got, c.want) || slices.ContainsFunc(got, func(r decisionlog.Record) bool { return !c.want(r) }) {
			t.Errorf("kubectl gate decisions %s: %d records\n%s", strings.Join(c.args, " "), len(got), out)
		}
	}
	table, err := env.Gate(ctx, "decisions", "-n", ns, "--since", "30m", "--verdict", "Block")
	must(t, err)
	t.Logf("kubectl gate decisions -n %s --since 30m --verdict Block:\n%s", ns, table)
	if !strings.Contains(table, "pod "+sandbox) || !strings.Contains(table, "session "+session) {
		t.Errorf("the table names neither the pod nor the session:\n%s", table)
	}
}
