// Package gatetest holds rule sets shared by the gate's tests, benchmarks and hack/ scripts.
package gatetest

import (
	"fmt"

	"github.com/intutic/gate-operator/internal/gate"
)

// RealisticRules returns n rules in a mix seen in coding-agent policies: 40% shell, 25% file
// writes and edits, 15% web fetches and 20% MCP tools over five servers. Every rule has a
// `when`; the Block rules come in the shapes platform teams write (regex on the command,
// path prefixes and suffixes, URL hosts, MCP arguments).
func RealisticRules(n int) []gate.Rule {
	rules := make([]gate.Rule, 0, n)
	for i := range n {
		name := fmt.Sprintf("rule-%d", i)
		var r gate.Rule
		switch k := i % 20; {
		case k < 8: // shell
			switch i % 4 {
			case 0:
				r = gate.Rule{Tools: []string{"bash"}, When: fmt.Sprintf(`input.command.matches("tool%d\\s+--force")`, i), Action: gate.Block}
			case 1:
				r = gate.Rule{Tools: []string{"bash"}, When: fmt.Sprintf(`input.command.contains("curl%d ") && input.command.contains("| sh")`, i), Action: gate.Block}
			case 2:
				r = gate.Rule{Tools: []string{"Bash"}, When: fmt.Sprintf(`input.command.startsWith("sudo%d ")`, i), Action: gate.Ask}
			default:
				r = gate.Rule{Tools: []string{"bash"}, When: fmt.Sprintf(`input.command.matches("rm\\s+-rf\\s+/data%d")`, i), Action: gate.Block}
			}
		case k < 13: // writes and edits
			switch i % 3 {
			case 0:
				r = gate.Rule{Tools: []string{"write", "edit"}, When: fmt.Sprintf(`input.file_path.startsWith("/etc/app%d/")`, i), Action: gate.Block}
			case 1:
				r = gate.Rule{Tools: []string{"Write"}, When: fmt.Sprintf(`input.file_path.endsWith(".key%d")`, i), Action: gate.Block}
			default:
				r = gate.Rule{Tools: []string{"edit", "multi_edit"}, When: fmt.Sprintf(`input.file_path.matches("secrets%d?/")`, i), Action: gate.Ask}
			}
		case k < 16: // web fetches
			r = gate.Rule{Tools: []string{"web_fetch"}, When: fmt.Sprintf(`input.url.contains("paste%d.example")`, i), Action: gate.Block}
		default: // MCP
			r = gate.Rule{Tools: []string{fmt.Sprintf("mcp__server%d__*", i%5)}, When: fmt.Sprintf(`has(input.environment) && input.environment == "prod%d"`, i), Action: gate.Block}
		}
		r.Name = name
		r.Reason = "reason of " + name
		rules = append(rules, r)
	}
	return rules
}
