//go:build conformance

package conformance

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Codex and Gemini CLI reach for hosts of their own (telemetry, update checks, account
// services). Every run of either happens offline: in a network namespace of its own with only
// loopback up, where its model API stand-in listens, so no route leads off the machine; and under
// strace, so the suite sees every connect it made and fails a run that tried any address but the
// stand-in's.

// offlineRun is one run of a CLI in a private network namespace.
type offlineRun struct {
	// stdout and stderr are the CLI's; trace is strace's log of its connects.
	stdout, stderr string
	trace          string
	// standIn is the stand-in's address, the one the CLI may connect to.
	standIn string
}

// offlineStandIn is where the stand-in listens in each run's namespace: the same address in every
// run, since each namespace has a loopback of its own.
const offlineStandIn = "127.0.0.1:8080"

// runOffline serves handler at offlineStandIn in a new network namespace with only loopback up,
// runs cmd there under strace (its connects logged to a file), and returns what it printed. The
// namespace belongs to one OS thread, which ends with the run; the processes started there keep
// it until they exit.
func runOffline(t *testing.T, handler http.Handler, cmd *exec.Cmd) offlineRun {
	t.Helper()
	trace, err := os.CreateTemp(t.TempDir(), "connects-")
	if err != nil {
		t.Fatal(err)
	}
	trace.Close()
	type outcome struct {
		run offlineRun
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		// Never unlocked: the thread, with its namespace, ends with this goroutine.
		runtime.LockOSThread()
		r, err := func() (offlineRun, error) {
			if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
				return offlineRun{}, fmt.Errorf("a private network namespace: %w", err)
			}
			if out, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
				return offlineRun{}, fmt.Errorf("ip link set lo up: %v: %s", err, out)
			}
			ln, err := net.Listen("tcp", offlineStandIn)
			if err != nil {
				return offlineRun{}, err
			}
			srv := &http.Server{Handler: handler}
			go srv.Serve(ln) //nolint:errcheck // ends with Close below
			defer srv.Close()
			r := offlineRun{standIn: ln.Addr().String()}
			cmd.Args = append([]string{"strace", "-f", "-qq", "-e", "trace=connect", "-o", trace.Name(), "--", cmd.Path}, cmd.Args[1:]...)
			cmd.Path, err = exec.LookPath("strace")
			if err != nil {
				return r, err
			}
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err = cmd.Run()
			r.stdout, r.stderr = stdout.String(), stderr.String()
			if err != nil {
				t.Logf("%s exited: %v", cmd.Args[len(cmd.Args)-1], err)
			}
			b, _ := os.ReadFile(trace.Name())
			r.trace = string(b)
			return r, nil
		}()
		done <- outcome{r, err}
	}()
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	return o.run
}

// inetConnect matches strace's line of a connect to an IPv4 or IPv6 address.
var inetConnect = regexp.MustCompile(`connect\(\d+, \{sa_family=AF_INET6?, sin6?_port=htons\((\d+)\)(?:, sin6?_flowinfo=[^,]*)?, (?:sin_addr=inet_addr\("([^"]+)"\)|inet_pton\(AF_INET6, "([^"]+)", &sin6_addr\))`)

// strayConnects are the connects in a strace log to any address but allowed: each as
// "address:port", with how many times it was tried.
func strayConnects(trace, allowed string) ([]string, error) {
	if !strings.Contains(trace, "connect(") && trace != "" {
		return nil, errors.New("the strace log holds no connect at all, not even the stand-in's: it did not trace the run")
	}
	seen := map[string]int{}
	var order []string
	for sc := bufio.NewScanner(strings.NewReader(trace)); sc.Scan(); {
		m := inetConnect.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		addr := m[2]
		if addr == "" {
			addr = m[3]
		}
		dst := net.JoinHostPort(addr, m[1])
		if dst == allowed {
			continue
		}
		if seen[dst] == 0 {
			order = append(order, dst)
		}
		seen[dst]++
	}
	out := make([]string, len(order))
	for i, d := range order {
		out[i] = d + " (" + strconv.Itoa(seen[d]) + "×)"
	}
	return out, nil
}

// strayLog collects, over a CLI's offline runs, every connect to an address but the stand-in's,
// for the suite's one "offline" row per CLI.
type strayLog struct {
	runs  int
	stray []string
}

// check adds the stray connects of the run of case name.
func (l *strayLog) check(name string, r offlineRun) {
	l.runs++
	if s, err := strayConnects(r.trace, r.standIn); err != nil {
		l.stray = append(l.stray, name+": "+err.Error())
	} else if len(s) > 0 {
		l.stray = append(l.stray, name+": "+strings.Join(s, ", "))
	}
}

// record records the row: it passes when no run connected anywhere but the stand-in.
func (l *strayLog) record(t *testing.T, peer string) {
	t.Helper()
	record(t, peer, fmt.Sprintf("offline: in %d runs, no connect to any address but the stand-in's", l.runs), len(l.stray) == 0, strings.Join(l.stray, "; "))
}

// TestStrayConnects reads strace's connect lines as this machine's strace 6.1 writes them.
func TestStrayConnects(t *testing.T) {
	trace := `123 connect(21, {sa_family=AF_INET, sin_port=htons(41233), sin_addr=inet_addr("127.0.0.1")}, 16) = 0
124 connect(22, {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("10.255.255.53")}, 16) = -1 ENETUNREACH (Network is unreachable)
125 connect(23, {sa_family=AF_INET6, sin6_port=htons(443), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, "2001:db8::1", &sin6_addr), sin6_scope_id=0}, 28) = -1 ENETUNREACH (Network is unreachable)
126 connect(24, {sa_family=AF_UNIX, sun_path="/run/x.sock"}, 110) = 0
127 connect(25, {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("10.255.255.53")}, 16) = -1 ENETUNREACH (Network is unreachable)
`
	got, err := strayConnects(trace, "127.0.0.1:41233")
	if err != nil || strings.Join(got, ",") != "10.255.255.53:53 (2×),[2001:db8::1]:443 (1×)" {
		t.Fatalf("got %q, %v", got, err)
	}
}
