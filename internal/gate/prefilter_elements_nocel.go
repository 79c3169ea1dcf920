//go:build nocel

package gate

// compileElements compiles nothing: this build does not build the call's view (it links no shell
// parser), so an exists is false only when its list is known to be empty without the view.
func (p *Prefilter) compileElements() quick { return nil }

// parsedShellKnown is not known: this build does not parse command lines.
func (a *activation) parsedShellKnown() (known, ok bool) { return false, false }
