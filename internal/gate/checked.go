//go:build !nocel

package gate

import (
	"encoding/json"
	"os"
	"runtime/debug"
	"slices"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common"
	celast "cel.dev/cel-go/common/ast"
	exprpb "google.golang.org/genproto/googleapis/api/expr/v1alpha1"
	"google.golang.org/protobuf/proto"
)

// The checked rules file (CheckedFileName) carries every rule's expression as the operator
// type-checked it, so a one-shot gate-hook-cel plans it without parsing: cel-go's first parse
// builds ANTLR's tables, about a millisecond, and each parse and check costs tens of
// microseconds more. It is a cache, never a source of truth: it is used only for the snapshot
// whose digest it names, only by a build of the same cel-go version and file format, and any
// problem with it (absent, unreadable, another snapshot's, another version's, an entry that
// does not decode, plan or yield a bool) makes the rule compile from its source, as it would
// without the file.

// checkedFormat names the file's format and the environment the expressions were checked in;
// it changes when either does, so files written for another never match.
const checkedFormat = "gate.intutic.io/checked-rules/v1"

type checkedFile struct {
	Format         string `json:"format"`
	CEL            string `json:"cel"`
	SnapshotDigest string `json:"snapshotDigest"`
	// Rules are the serialized google.api.expr.v1alpha1.CheckedExpr of each rule, in the
	// snapshot's order; null for a rule without a when.
	Rules [][]byte `json:"rules"`
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
	f := checkedFile{Format: checkedFormat, CEL: celVersion(), SnapshotDigest: digest, Rules: make([][]byte, len(checked))}
	opts := proto.MarshalOptions{Deterministic: true}
	for i, a := range checked {
		if a == nil {
			continue
		}
		pb, err := cel.AstToCheckedExpr(a)
		if err != nil {
			return nil, err
		}
		if f.Rules[i], err = opts.Marshal(pb); err != nil {
			return nil, err
		}
	}
	return json.Marshal(&f)
}

// precompiled is the checked rules file beside a snapshot loaded from a file, read on first
// use (a call its prefilters decide never reads it).
type precompiled struct {
	path   string
	digest string
	rules  int

	once    sync.Once
	entries [][]byte
}

func newPrecompiled(path string, s *Snapshot) *precompiled {
	return &precompiled{path: path, digest: s.Digest, rules: len(s.Rules)}
}

func (p *precompiled) load() {
	data, err := os.ReadFile(p.path)
	if err != nil {
		return
	}
	var f checkedFile
	if json.Unmarshal(data, &f) != nil || f.Format != checkedFormat || f.CEL != celVersion() ||
		f.SnapshotDigest != p.digest || len(f.Rules) != p.rules {
		return
	}
	p.entries = f.Rules
}

// ast returns rule i's checked expression, or nil when the file does not have one to trust.
// It is read with decodeCheckedWire, or, for what that reader does not take, with protobuf-go
// as cel-go reads it.
func (p *precompiled) ast(i int, when string) *celast.AST {
	if p == nil {
		return nil
	}
	p.once.Do(p.load)
	if i < 0 || i >= len(p.entries) || len(p.entries[i]) == 0 {
		return nil
	}
	if a, err := decodeCheckedWire(p.entries[i], when); err == nil && a.IsChecked() {
		return a
	}
	var pb exprpb.CheckedExpr
	if proto.Unmarshal(p.entries[i], &pb) != nil {
		return nil
	}
	a, err := cel.CheckedExprToAstWithSource(&pb, common.NewTextSource(when))
	if err != nil || !a.IsChecked() {
		return nil
	}
	return a.NativeRep()
}
