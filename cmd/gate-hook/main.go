// Command gate-hook is the in-sandbox hook of gate-operator: Claude Code's PreToolUse hook and,
// with --runtime, Codex's PreToolUse and Gemini CLI's BeforeTool hook (internal/runtime/runtimes).
// It reads the hook JSON on stdin, decides the call with the policy snapshot, and answers in the
// runtime's hook contract; for Claude Code, Allow exits 0 with no decision, Ask answers
// permissionDecision "ask", Block answers "deny" with the refusal message, prints it on stderr
// and exits 2. Every failure of its own is a
// Block. Under Audit, an Ask or Block that is recorded and not enforced exits 0 with only a
// systemMessage saying so. It never prints the tool input.
//
// It is built twice. gate-hook, built with the nocel tag, links no CEL, so it starts about as
// fast as a no-op binary: it decides every call the rules' prefilters decide alone (no candidate
// rule with a when that its prefilter does not rule out) and replaces itself with gate-hook-cel,
// installed beside it, for the others. gate-hook-cel, built without the tag, decides every call
// with CEL; run alone under the name gate-hook, it is a complete hook too.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/intutic/gate-operator/internal/gate"
	"github.com/intutic/gate-operator/internal/runtime/claudecode"
	"github.com/intutic/gate-operator/internal/runtime/runtimes"
)

const defaultSnapshot = "/opt/intutic/hooks/" + gate.SnapshotFileName

// celHook is the name of the build with CEL, beside gate-hook: gate-hook hands it the calls
// that need CEL, and --install installs it too.
const celHook = "gate-hook-cel"

// gateClient is the gate-agent sidecar's client, which --install installs beside gate-hook when
// the image has it.
const gateClient = "gate-client"

// defaultRuntime answers until --runtime is read: a refusal of flags that do not parse is
// answered in Claude Code's format, whose exit status 2 every runtime takes as a deny.
var defaultRuntime, _ = runtimes.Lookup(runtimes.Default)

// memoryLimit bounds the heap of one call. The hook lives for one call and allocates a few
// megabytes, so it runs without collecting garbage (a collection costs more than it frees)
// until its heap nears this limit; gate-hook-cel is started with the same settings.
const memoryLimit = 256 << 20

func main() {
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(memoryLimit)
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) (exit int) {
	// a answers on stdout and stderr, after the answer line once the token is known.
	a := answerer{stdout: stdout, stderr: stderr, runtime: defaultRuntime}
	// Whatever happens below, the call is refused rather than let through by a crash.
	defer func() {
		if r := recover(); r != nil {
			exit = a.answer(gate.Refuse(gate.CodeGateCrashed, fmt.Sprintf("gate-hook failed (%T)", r)))
		}
	}()

	fs := flag.NewFlagSet("gate-hook", flag.ContinueOnError)
	fs.SetOutput(stderr)
	// Flags only, never the environment: Claude Code hands hooks the env of settings files the
	// agent can write, so nothing there may choose the snapshot or change how the hook answers.
	snapshot := fs.String("snapshot", defaultSnapshot, "path of the policy snapshot")
	workspace := fs.String("workspace", "", "refuse snapshots of any other workspace")
	install := fs.String("install", "", "copy this binary into the given directory and exit (for an init container: the image needs no shell)")
	explicitAllow := fs.Bool("explicit-allow", false, "answer Allow with permissionDecision \"allow\" instead of no decision")
	token := fs.String("answer-token", "", "begin every answer with the line \"gate-answer <token>\" (the registered command's per-call token)")
	runtimeName := fs.String("runtime", runtimes.Default, "the agent runtime whose hook input is read and answered: "+strings.Join(runtimes.Names(), ", "))
	layered := fs.Bool("layers", false, "decide with the layers of the bundle in the snapshot's directory, which must have its index ("+gate.LayersFileName+"): the cluster policies that select the pod, and the namespace's "+gate.SnapshotFileName+" when the index names it")
	fs.StringVar(&a.spool.reason, "fallback-reason", "", "why gate-client handed this call over instead of the gate-agent sidecar deciding it (one of its reason codes); recorded in --fallback-spool")
	fs.StringVar(&a.spool.path, "fallback-spool", "", "append one JSON line about the decision to this file, for the gate-agent sidecar to report (set by gate-client when it hands a call over)")
	if err := fs.Parse(args); err != nil {
		return a.answer(gate.Refuse(gate.CodeInputInvalid, "gate-hook was started with invalid flags"))
	}
	// A runtime gate-hook does not know is refused before the token is taken: without the
	// answer line, the registered command denies in its own runtime's format, which gate-hook
	// cannot write for a runtime it does not know.
	rt, ok := runtimes.Lookup(*runtimeName)
	if !ok {
		return a.answer(gate.Refuse(gate.CodeInputInvalid, "gate-hook does not know the runtime "+strconv.Quote(*runtimeName)))
	}
	a.runtime = rt
	if *token != "" {
		if err := claudecode.CheckAnswerToken(*token); err != nil {
			return a.answer(gate.Refuse(gate.CodeInputInvalid, "gate-hook was started with an invalid --answer-token: "+err.Error()))
		}
		a.token = *token
	}
	a.explicitAllow = *explicitAllow
	if *install != "" {
		if err := installSelf(*install); err != nil {
			fmt.Fprintln(stderr, "gate-hook --install:", err)
			return 1
		}
		return 0
	}

	// Read once, and kept: a call that needs CEL is handed on with the same bytes.
	data, err := claudecode.ReadHookInput(stdin)
	a.input = data
	if err != nil {
		return a.answer(gate.Refuse(gate.CodeInputInvalid, err.Error()))
	}
	call, err := rt.Parse(data)
	if err != nil {
		return a.answer(gate.Refuse(gate.CodeInputInvalid, err.Error()))
	}
	a.tool = gate.CanonicalToolName(call.Tool, call.Server)
	policy, caller, err := load(*snapshot, *workspace, *layered, call)
	if err != nil {
		se := &gate.SnapshotError{Code: gate.CodeSnapshotCorrupt, Reason: err.Error()}
		errors.As(err, &se)
		return a.answer(gate.Refuse(se.Code, se.Reason))
	}
	call.Caller = caller
	if gate.BuiltWithCEL {
		return a.answer(policy.Decide(call))
	}
	if d, decided := policy.DecideWithoutCEL(call); decided {
		return a.answer(d)
	}
	// A rule needs CEL: gate-hook-cel decides the call from the start, reading the snapshot
	// itself, and writes the fallback spool's line when there is one (it gets the same
	// arguments). execWithStdin returns only if it could not be started.
	err = handOff(args, data)
	return a.answer(gate.Refuse(gate.CodeGateCrashed, "gate-hook could not start "+celHook+": "+err.Error()))
}

// decider is what decides the call: one policy, or the layers of a layered bundle.
type decider interface {
	Decide(*gate.Call) gate.Decision
	DecideWithoutCEL(*gate.Call) (gate.Decision, bool)
}

// load loads what decides the call, compiled for its tool, and who is calling: the pod's name
// from the file beside the snapshot, in the read-only volume the snapshot comes from, and
// never from the environment, which the agent's settings set. With layered, the whole bundle
// in the snapshot's directory is read from one version of the volume (gate.LoadLayered), and
// its index must be there.
func load(snapshot, workspace string, layered bool, call *gate.Call) (decider, gate.Caller, error) {
	dir := filepath.Dir(snapshot)
	if layered {
		set, err := gate.LoadLayered(dir, workspace)
		if err != nil {
			return nil, gate.Caller{}, err
		}
		return set.CompileFor(call.Tool, call.Server), set.Caller, nil
	}
	snap, err := gate.LoadSnapshotFile(snapshot, workspace)
	if err != nil {
		return nil, gate.Caller{}, err
	}
	policy, _ := gate.CompileFor(snap, call.Tool, call.Server)
	return policy, gate.PodCaller(dir), nil
}

// handOff replaces this process with gate-hook-cel beside it, with the same arguments and the
// hook JSON on stdin.
func handOff(args []string, data []byte) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if filepath.Base(self) == celHook {
		// A build without CEL installed under the other's name would hand calls to itself.
		return errors.New("it is itself " + celHook + ", built without CEL")
	}
	return execWithStdin(filepath.Join(filepath.Dir(self), celHook), args, data)
}

// installSelf copies the running binary to dir/gate-hook, atomically, and when it is built
// without CEL gate-hook-cel beside it to dir/gate-hook-cel first: a gate-hook without it would
// refuse every call that needs CEL, so its absence fails the install. gate-client, the gate-agent
// sidecar's client, is installed too when it is beside the binary; without it the wrapper runs
// gate-hook alone, as before the sidecar.
func installSelf(dir string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if !gate.BuiltWithCEL {
		if err := installCopy(filepath.Join(filepath.Dir(self), celHook), dir, celHook); err != nil {
			return err
		}
	}
	if client := filepath.Join(filepath.Dir(self), gateClient); fileExists(client) {
		if err := installCopy(client, dir, gateClient); err != nil {
			return err
		}
	}
	return installCopy(self, dir, "gate-hook")
}

// fileExists reports whether path names a file (a symlink followed).
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// installCopy copies the file src to dir/name, executable, atomically.
func installCopy(src, dir, name string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(dir, "."+name+"-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, name))
}

// answerer writes gate-hook's answers, and the fallback spool's line of each when gate-client
// handed the call over (spool set).
type answerer struct {
	stdout, stderr io.Writer
	// runtime is the contract the answer is written in (--runtime).
	runtime runtimes.Runtime
	// token, when set, is echoed on the answer line before every answer
	// (claudecode.AnswerLine): the registered command lets an exit 0 through only after it.
	token         string
	explicitAllow bool
	spool         fallbackSpool
	// input and tool are the call's, once read: the spool's line records them.
	input []byte
	tool  string
}

// answer writes the answer to d and returns the exit status. The answer line and the answer
// go out in one write, so the registered command never sees the line without the answer.
func (a answerer) answer(d gate.Decision) int {
	out, msg, exit := a.runtime.Answer(d, a.token, a.explicitAllow)
	if len(out) > 0 {
		if _, err := a.stdout.Write(out); err != nil && d.Verdict != gate.Allow {
			// An Ask or a deny that cannot be delivered must still stop the call.
			exit = 2
			if msg == nil {
				msg = []byte(gate.RefusalPrefix + "gate-hook could not write its answer\n")
			}
		}
	}
	if msg != nil {
		_, _ = a.stderr.Write(msg)
	}
	a.spool.record(d, a.input, a.runtime.Name, a.tool)
	return exit
}
