// Command noop exits 0 at once: the baseline of hack/bench-hook.sh, a static Go binary that
// does nothing, so the hook's own cost can be told from process start-up.
package main

func main() {}
