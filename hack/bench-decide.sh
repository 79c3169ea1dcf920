#!/usr/bin/env bash
# Measures one decision side by side: the gate against cel-go (the call's tool's 25 rules, and
# all 100) and OPA, on the same 100 rules (25 per tool, each a regex with a literal it
# requires) and a shell call that matches none. All engines run in one process, -count times
# interleaved; prints each engine's median ns/op and allocs/op and its ratio to the gate's.
# The benchmark is a module of its own (hack/bench-decide), so the product does not depend on OPA.
# Usage: hack/bench-decide.sh [-count N] [-benchtime D]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/bench-decide"
count=10 benchtime=1s
while [ $# -gt 0 ]; do
	case "$1" in
	-count) count=$2; shift 2 ;;
	-benchtime) benchtime=$2; shift 2 ;;
	*) echo "usage: $0 [-count N] [-benchtime D]" >&2; exit 2 ;;
	esac
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
go test -run TestEnginesAgree -count=1 .
go test -run '^$' -bench BenchmarkDecide -benchmem -count "$count" -benchtime "$benchtime" . | tee /dev/stderr |
	awk '/^BenchmarkDecide\// {
		name = $1; sub(/^BenchmarkDecide\//, "", name); sub(/-[0-9]+$/, "", name)
		if (!(name in n)) order[++k] = name
		ns[name, ++n[name]] = $3; allocs[name] = $(NF-1)
	}
	END {
		for (i = 1; i <= k; i++) {
			name = order[i]; m = n[name]
			# median by insertion sort of the runs
			for (a = 1; a <= m; a++) v[a] = ns[name, a]
			for (a = 2; a <= m; a++) { x = v[a]; b = a - 1; while (b > 0 && v[b] > x) { v[b+1] = v[b]; b-- } v[b+1] = x }
			med[name] = (m % 2) ? v[(m+1)/2] : (v[m/2] + v[m/2+1]) / 2
		}
		base = med[order[1]]
		printf "\n%-32s %12s %10s %10s\n", "engine (median of runs)", "ns/op", "allocs/op", "x gate"
		for (i = 1; i <= k; i++) printf "%-32s %12.1f %10s %10.1f\n", order[i], med[order[i]], allocs[order[i]], med[order[i]] / base
	}'
