package gate

import (
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/intutic/gate-operator/internal/gate/toolname"
)

// toolIndex finds the rules whose patterns can match a tool: exact names by map lookup,
// globs by matching, and pattern-less rules always. Results are memoized per tool name, up to
// maxMemo names, with the screen of their rules (prefilter_screen.go), so a steady workload
// pays one lock-free map lookup. Names with the same candidate rules share one entry.
type toolIndex struct {
	exact  map[string][]int
	globs  []globRule
	all    []int
	screen *screen

	byName sync.Map // canonical tool name -> *toolEntry

	mu     sync.Mutex
	names  int                   // entries in byName
	shared map[string]*toolEntry // by candidate list
}

// toolEntry is what the index knows of one tool: its candidate rules in rule order, and their
// screen (nil when the screen rules none of them out).
type toolEntry struct {
	candidates []int
	screen     *toolScreen
}

type globRule struct {
	pattern *toolname.Pattern
	rule    int
}

const maxMemo = 4096

// newToolIndex indexes the rules; sc, when not nil, is screened for each tool's candidates.
func newToolIndex(rules []compiledRule, sc *screen) *toolIndex {
	idx := &toolIndex{exact: map[string][]int{}, screen: sc, shared: map[string]*toolEntry{}}
	for i, r := range rules {
		if len(r.Tools) == 0 {
			idx.all = append(idx.all, i)
			continue
		}
		for j := range r.patterns {
			p := &r.patterns[j]
			if text, ok := p.Literal(); ok {
				idx.exact[text] = append(idx.exact[text], i)
			} else {
				idx.globs = append(idx.globs, globRule{p, i})
			}
		}
		if len(r.patterns) < len(r.Tools) {
			// A malformed pattern: the rule is candidate for every tool, so its error surfaces.
			idx.all = append(idx.all, i)
		}
	}
	return idx
}

// lookup returns the entry of a resolved tool.
func (idx *toolIndex) lookup(tool toolname.Tool) *toolEntry {
	if e, ok := idx.byName.Load(tool.Name); ok {
		return e.(*toolEntry)
	}
	c := idx.match(tool.Key)
	key := candidateKey(c)
	idx.mu.Lock()
	defer idx.mu.Unlock()
	e, ok := idx.shared[key]
	if !ok {
		e = &toolEntry{candidates: c, screen: idx.screen.forCandidates(c)}
		if len(idx.shared) < maxMemo {
			idx.shared[key] = e
		}
	}
	if idx.names < maxMemo {
		if _, loaded := idx.byName.LoadOrStore(tool.Name, e); !loaded {
			idx.names++
		}
	}
	return e
}

// match returns the indexes of the rules that can match a tool's key (toolname.Tool), in rule
// order.
func (idx *toolIndex) match(name string) []int {
	var c []int
	c = append(c, idx.all...)
	c = append(c, idx.exact[name]...)
	if folded := toolname.Fold(name); folded != name {
		c = append(c, idx.exact[folded]...) // literal patterns that do not start with mcp__
	}
	for _, g := range idx.globs {
		if g.pattern.Match(name) {
			c = append(c, g.rule)
		}
	}
	slices.Sort(c)
	return slices.Compact(c)
}

func candidateKey(c []int) string {
	var b strings.Builder
	for _, i := range c {
		b.WriteString(strconv.Itoa(i))
		b.WriteByte(',')
	}
	return b.String()
}
