package gate

import (
	"slices"
	"sync"
)

// toolIndex finds the rules whose patterns can match a tool: exact names by map lookup,
// globs by matching, and pattern-less rules always. Results are memoized per tool name, up to
// maxMemo names, so a steady workload pays only a map lookup.
type toolIndex struct {
	exact map[string][]int
	globs []globRule
	all   []int

	mu   sync.RWMutex
	memo map[string][]int
}

type globRule struct {
	pattern *toolPattern
	rule    int
}

const maxMemo = 4096

func newToolIndex(rules []compiledRule) *toolIndex {
	idx := &toolIndex{exact: map[string][]int{}, memo: map[string][]int{}}
	for i, r := range rules {
		if len(r.Tools) == 0 {
			idx.all = append(idx.all, i)
			continue
		}
		for j := range r.patterns {
			if p := &r.patterns[j]; p.literal {
				idx.exact[p.text] = append(idx.exact[p.text], i)
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

// candidates returns the indexes of the rules that can match the tool, in rule order.
func (idx *toolIndex) candidates(tool string) []int {
	idx.mu.RLock()
	c, ok := idx.memo[tool]
	idx.mu.RUnlock()
	if ok {
		return c
	}
	name := normalizeToolName(tool)
	c = append(c, idx.all...)
	c = append(c, idx.exact[name]...)
	if folded := foldAll(name); folded != name {
		c = append(c, idx.exact[folded]...) // literal patterns that do not start with mcp__
	}
	for _, g := range idx.globs {
		if g.pattern.match(name) {
			c = append(c, g.rule)
		}
	}
	slices.Sort(c)
	c = slices.Compact(c)
	idx.mu.Lock()
	if len(idx.memo) < maxMemo {
		idx.memo[tool] = c
	}
	idx.mu.Unlock()
	return c
}
