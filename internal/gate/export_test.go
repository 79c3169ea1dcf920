package gate

// CompiledRules is how many rules a policy compiled, for tests of CompileFor.
func CompiledRules(p *Policy) int { return len(p.rules) }
