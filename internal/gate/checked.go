//go:build !nocel

package gate

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common"
	celast "cel.dev/cel-go/common/ast"
	exprpb "google.golang.org/genproto/googleapis/api/expr/v1alpha1"
	"google.golang.org/protobuf/proto"

	"github.com/intutic/gate-operator/internal/gate/checkedwire"
)

// The checked rules file (CheckedFileName) carries every rule's expression as the operator
// type-checked it, so a one-shot gate-hook-cel plans it without parsing: cel-go's first parse
// builds ANTLR's tables, about a millisecond, and each parse and check costs tens of
// microseconds more. It is a cache, never a source of truth: it is used only for the snapshot
// whose digest it names, only by a build of the same cel-go version and file format whose CEL
// environments declare what the ones the file was checked in declared (envDigest: the digests
// of the base and the full environment), and any problem with it (absent, unreadable, another
// snapshot's, another version's or environment's, an entry that does not decode, plan or
// yield a bool) makes the rule compile from its source, as it would without the file: a
// mismatch never plans an expression against declarations it was not checked with.

// checkedFormat names the file's format; the environments are named by their digests.
const checkedFormat = "gate.intutic.io/checked-rules/v3"

// The file is text, one field per line, so a rule's entry is found without decoding the others
// (a JSON form cost gate-hook-cel 0.4 ms to decode, measured, for 100 rules):
//
//	gate.intutic.io/checked-rules/v3
//	cel <cel-go version>
//	env <digest of the base environment> <digest of the full environment>
//	snapshot <the snapshot's digest>
//	rules <how many>
//	<one line per rule, in the snapshot's order: its serialized
//	 google.api.expr.v1alpha1.CheckedExpr in standard base64, or "-" for a rule without a when>
type checkedFile struct {
	CEL string
	// BaseEnv and FullEnv are the envDigests of the environments the rules were checked in:
	// a rule that names nothing of callLibrary is planned in the base one, others in the full.
	BaseEnv, FullEnv string
	SnapshotDigest   string
	// Rules are the serialized CheckedExprs in base64, nil for a rule without a when.
	Rules [][]byte
}

func (f *checkedFile) encode() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\ncel %s\nenv %s %s\nsnapshot %s\nrules %d\n", checkedFormat, f.CEL, f.BaseEnv, f.FullEnv, f.SnapshotDigest, len(f.Rules))
	for _, r := range f.Rules {
		if r == nil {
			b.WriteString("-\n")
			continue
		}
		b.Write(r)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// parseCheckedFile reads the header and splits the entries, without decoding them; ok is false
// when the file is not in this format.
func parseCheckedFile(data []byte) (f checkedFile, ok bool) {
	lines := bytes.Split(data, []byte("\n"))
	if len(lines) < 6 || string(lines[0]) != checkedFormat || len(lines[len(lines)-1]) != 0 {
		return checkedFile{}, false
	}
	version, ok1 := bytes.CutPrefix(lines[1], []byte("cel "))
	envs, ok2 := bytes.CutPrefix(lines[2], []byte("env "))
	baseEnv, fullEnv, ok3 := bytes.Cut(envs, []byte(" "))
	digest, ok4 := bytes.CutPrefix(lines[3], []byte("snapshot "))
	n, ok5 := bytes.CutPrefix(lines[4], []byte("rules "))
	entries := lines[5 : len(lines)-1]
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || string(n) != strconv.Itoa(len(entries)) {
		return checkedFile{}, false
	}
	f = checkedFile{CEL: string(version), BaseEnv: string(baseEnv), FullEnv: string(fullEnv), SnapshotDigest: string(digest), Rules: entries}
	for i, e := range entries {
		if string(e) == "-" {
			f.Rules[i] = nil
		}
	}
	return f, true
}

// celVersion is the cel-go module version this binary is built with ("unknown" when the
// build carries no module information, as in some test binaries).
var celVersion = sync.OnceValue(func() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "cel.dev/cel-go" {
				if d.Replace != nil {
					return d.Replace.Path + "@" + d.Replace.Version
				}
				return d.Version
			}
		}
	}
	return "unknown"
})

// encodeChecked encodes the checked rules file of a snapshot from its rules' checked
// expressions (nil for a rule without a when); nil when no rule has one.
func encodeChecked(digest string, checked []*cel.Ast) ([]byte, error) {
	if !slices.ContainsFunc(checked, func(a *cel.Ast) bool { return a != nil }) {
		return nil, nil
	}
	f := checkedFile{CEL: celVersion(), BaseEnv: baseEnvDigest(), FullEnv: fullEnvDigest(), SnapshotDigest: digest, Rules: make([][]byte, len(checked))}
	if f.BaseEnv == "" || f.FullEnv == "" {
		return nil, errors.New("the CEL environments cannot be built, so the checked rules file cannot name them")
	}
	if strings.ContainsAny(f.CEL+f.SnapshotDigest, "\n\r") {
		return nil, fmt.Errorf("the checked rules file cannot carry %q and %q on one line each", f.CEL, f.SnapshotDigest)
	}
	opts := proto.MarshalOptions{Deterministic: true}
	for i, a := range checked {
		if a == nil {
			continue
		}
		pb, err := cel.AstToCheckedExpr(a)
		if err != nil {
			return nil, err
		}
		b, err := opts.Marshal(pb)
		if err != nil {
			return nil, err
		}
		f.Rules[i] = base64.StdEncoding.AppendEncode(nil, b)
	}
	return f.encode(), nil
}

// precompiled is the checked rules file beside a snapshot loaded from a file, read on first
// use (a call its prefilters decide never reads it).
type precompiled struct {
	path   string
	digest string
	rules  int

	once    sync.Once
	entries [][]byte // in base64
	fullEnv string   // the digest of the full environment the file's rules were checked in
}

func newPrecompiled(path string, s *Snapshot) *precompiled {
	return &precompiled{path: path, digest: s.Digest, rules: len(s.Rules)}
}

func (p *precompiled) load() {
	data, err := os.ReadFile(p.path)
	if err != nil {
		return
	}
	f, ok := parseCheckedFile(data)
	if !ok || f.CEL != celVersion() || f.SnapshotDigest != p.digest || len(f.Rules) != p.rules || f.BaseEnv != baseEnvDigest() {
		return
	}
	p.entries, p.fullEnv = f.Rules, f.FullEnv
}

// checkedIn reports whether the file's expressions were checked in the environment this build
// plans one in: the base one (load compared its digest), or the full one when full.
func (p *precompiled) checkedIn(full bool) bool {
	return p != nil && p.entries != nil && (!full || p.fullEnv == fullEnvDigest())
}

// ast returns rule i's checked expression, or nil when the file does not have one to trust.
// It is read with checkedwire.Decode, or, for what that reader does not take, with protobuf-go
// as cel-go reads it.
func (p *precompiled) ast(i int, when string) *celast.AST {
	if p == nil {
		return nil
	}
	p.once.Do(p.load)
	if i < 0 || i >= len(p.entries) || len(p.entries[i]) == 0 {
		return nil
	}
	b, err := base64.StdEncoding.AppendDecode(nil, p.entries[i])
	if err != nil {
		return nil
	}
	if a, err := checkedwire.Decode(b, when); err == nil && a.IsChecked() {
		return a
	}
	var pb exprpb.CheckedExpr
	if proto.Unmarshal(b, &pb) != nil {
		return nil
	}
	a, err := cel.CheckedExprToAstWithSource(&pb, common.NewTextSource(when))
	if err != nil || !a.IsChecked() {
		return nil
	}
	return a.NativeRep()
}
