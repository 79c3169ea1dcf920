// Package shellparse reads what an agent's shell command line would do without running it: the
// commands it runs (through pipes, lists, subshells, substitutions, eval and sh -c, and
// wrappers such as sudo, env and xargs), their arguments and redirections, the files and URLs
// they touch, and whether all of that is statically known. It also holds the path arithmetic
// (Clean, Resolve, IsUnder) that it and the gate's CEL functions share. It parses with
// mvdan.cc/sh/v3 and never executes anything.
package shellparse
