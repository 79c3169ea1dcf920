// Command gatectl tests HarnessAgentPolicies before they ship. `gatectl test` builds a policy's
// rules snapshot with the controller's recipe (bootstrap.Build), loads it into a gate as the
// confirmer does, decides a file of cases with it, and prints a pass/fail table with an exit
// status for CI. It never prints a case's input: inputs may carry secrets.
package main

import (
	"fmt"
	"io"
	"os"
)

// Exit statuses, as CI reads them.
const (
	exitPass  = 0 // every case passed
	exitFail  = 1 // a case failed, or a policy's rules do not compile
	exitUsage = 2 // bad flags, or a policy or cases file that cannot be read
)

const usage = `gatectl tests HarnessAgentPolicies with the gate the cluster runs.

Usage:
  gatectl test -f POLICY.yaml -c CASES.yaml [-o table|json]
  gatectl test POLICY.yaml CASES.yaml [-o table|json]

Exit status: 0 when every case passes, 1 when a case fails or the rules do not compile,
2 for usage errors and files that cannot be read.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "test":
		return runTest(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitPass
	default:
		fmt.Fprintf(stderr, "gatectl: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
}
