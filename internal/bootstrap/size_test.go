package bootstrap

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	gatev1 "github.com/intutic/gate-operator/api/v1alpha1"
	"github.com/intutic/gate-operator/internal/gate"
)

// rulesText is what the schema's rule on spec.rules adds up (MaxRulesTextBytes).
func rulesText(rules []gatev1.Rule) int {
	n := 0
	for _, r := range rules {
		n += len(r.Name) + len(r.When) + len(r.Reason) + len(r.Code)
		for _, t := range r.Tools {
			n += len(t)
		}
	}
	return n
}

// chain joins predicates with op until the expression reaches size bytes.
func chain(size int, op string, pred func(i int) string) string {
	var b strings.Builder
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteString(op)
		}
		b.WriteString(pred(i))
	}
	return b.String()
}

func renderRules(t *testing.T, rules []gatev1.Rule) (Bundle, error) {
	t.Helper()
	p := &gatev1.HarnessAgentPolicy{}
	p.Namespace, p.Name, p.Generation = "agents", "big", 1
	p.Spec.Rules = rules
	s, err := gate.BuildSnapshot(SnapshotSource(p))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return Render(&p.Spec, snap, Options{})
}

// TestSnapshotSizeRatio measures the snapshot's bytes against its rules' text for the shapes
// that used to blow up (long && / || chains, whose prefilters nested once per operand and were
// indented at every level) and bounds the ratio.
func TestSnapshotSizeRatio(t *testing.T) {
	shapes := map[string]func(i int) string{
		"&& chain of contains": func(i int) string { return fmt.Sprintf(`input.command.contains("token-%d")`, i) },
		"|| chain of startsWith": func(i int) string {
			return fmt.Sprintf(`input.file_path.startsWith("/etc/dir-%d/")`, i)
		},
		"&& chain with opaque parts": func(i int) string {
			return fmt.Sprintf(`(has(input.n%d) && input.command != "v%d")`, i, i)
		},
		"regexes": func(i int) string { return fmt.Sprintf(`input.command.matches("rm\\s+-rf\\s+/srv/%d")`, i) },
	}
	for name, pred := range shapes {
		t.Run(name, func(t *testing.T) {
			op := " && "
			if strings.HasPrefix(name, "||") {
				op = " || "
			}
			var rules []gatev1.Rule
			for i := range 40 { // 40 rules of about 3.9 KB, as in the review
				rules = append(rules, gatev1.Rule{Name: fmt.Sprintf("rule-%d", i), Tools: []string{"bash"},
					When: chain(3900, op, pred), Action: gatev1.ActionBlock, Reason: "no"})
			}
			b, err := renderRules(t, rules)
			if err != nil {
				t.Fatal(err)
			}
			ratio := float64(len(b.Data[KeySnapshot])) / float64(rulesText(rules))
			t.Logf("%s: %d bytes of rules, snapshot %d bytes, ratio %.2f", name, rulesText(rules), len(b.Data[KeySnapshot]), ratio)
			if ratio > 3.5 {
				t.Errorf("the snapshot is %.2f times its rules' text; the bound is 3.5", ratio)
			}
		})
	}
}

// TestLargestPolicyFits builds the largest policy the schema admits, written to be as costly
// to encode as printable text gets (every literal a run of quotes, which JSON escapes and the
// prefilter repeats), and checks that its bundle fits in a ConfigMap.
func TestLargestPolicyFits(t *testing.T) {
	const rules = 512 // spec.rules MaxItems
	per := gatev1.MaxRulesTextBytes / rules
	var list []gatev1.Rule
	for i := range rules {
		r := gatev1.Rule{Name: fmt.Sprintf("r%d-%s", i, strings.Repeat("x", 40)), Tools: []string{"bash"},
			Action: gatev1.ActionBlock, Reason: strings.Repeat(`"`, 40), Code: "c"}
		left := per - rulesText([]gatev1.Rule{r})
		r.When = chain(left-40, " && ", func(j int) string { return fmt.Sprintf(`input.c%d.contains("%s")`, j%10, strings.Repeat(`\"`, 8)) })
		list = append(list, r)
	}
	if got := rulesText(list); got > gatev1.MaxRulesTextBytes || got < gatev1.MaxRulesTextBytes*9/10 {
		t.Fatalf("the test policy has %d bytes of rules; it must be within 10%% under the schema's %d", got, gatev1.MaxRulesTextBytes)
	}
	b, err := renderRules(t, list)
	if err != nil {
		t.Fatalf("the largest policy the schema admits does not fit: %v", err)
	}
	size := configMapSize(b.Data)
	t.Logf("%d bytes of rules: bundle %d bytes (snapshot %d), limit %d", rulesText(list), size, len(b.Data[KeySnapshot]), MaxBundleBytes)
}

// TestBundleTooLarge: a bundle that cannot fit is an error naming its size, never a ConfigMap
// the API server would refuse.
func TestBundleTooLarge(t *testing.T) {
	snap := []byte(strings.Repeat("x", MaxBundleBytes))
	_, err := Render(&gatev1.HarnessAgentPolicySpec{}, snap, Options{})
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Size <= MaxBundleBytes {
		t.Fatalf("want a TooLargeError over %d bytes, got %v", MaxBundleBytes, err)
	}
}
