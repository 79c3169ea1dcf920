package promquery

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// The PromQL this package reads: vector selectors with matchers, range vectors and subqueries,
// offset and @ modifiers, the functions in functions, the aggregations in aggregations (with
// by or without), binary operators with bool, on, ignoring, group_left and group_right, numbers,
// strings and parentheses. Anything else (a selector by __name__ alone, label_replace,
// count_values, an unknown function) is an error, never skipped: a query this package cannot
// read fully is reported, so none passes the check unread.

// node is an expression: a selector, a call, an aggregation, a binary operation or a literal.
type node interface{ isNode() }

type (
	// selector is a vector selector: a metric and the labels its matchers name.
	selector struct {
		metric string
		labels []string
	}
	// literal is a number or a string.
	literal struct{}
	// call is a function call; functions says which labels its result keeps.
	call struct {
		fn   string
		args []node
	}
	// aggregation is sum, topk and the like, with a by or without clause (grouping nil for
	// neither).
	aggregation struct {
		op       string
		without  bool
		grouping []string
		args     []node
	}
	// binary is an operation between two expressions, with its vector matching.
	binary struct {
		op               string
		lhs, rhs         node
		on               bool
		matching         []string // on(...) or ignoring(...)
		groupLeft        bool
		groupRight       bool
		include          []string // group_left(...) or group_right(...)
		hasMatchModifier bool
	}
)

func (selector) isNode()    {}
func (literal) isNode()     {}
func (call) isNode()        {}
func (aggregation) isNode() {}
func (binary) isNode()      {}

// aggregations are PromQL's aggregation operators this package reads; the ones whose result
// keeps the input's labels (they select series) are true.
var aggregations = map[string]bool{
	"sum": false, "avg": false, "min": false, "max": false, "count": false, "group": false,
	"stddev": false, "stdvar": false, "quantile": false,
	"topk": true, "bottomk": true, "limitk": true,
}

// functions are the PromQL functions this package reads, by what their result carries: the
// labels of their vector argument (sameLabels), those less le (histogram_quantile), or none (a
// scalar, or a vector without labels).
var functions = map[string]resultLabels{
	"abs": sameLabels, "ceil": sameLabels, "floor": sameLabels, "round": sameLabels, "exp": sameLabels,
	"ln": sameLabels, "log2": sameLabels, "log10": sameLabels, "sqrt": sameLabels, "sgn": sameLabels,
	"clamp": sameLabels, "clamp_min": sameLabels, "clamp_max": sameLabels,
	"rate": sameLabels, "irate": sameLabels, "increase": sameLabels, "delta": sameLabels, "idelta": sameLabels,
	"deriv": sameLabels, "predict_linear": sameLabels, "resets": sameLabels, "changes": sameLabels,
	"avg_over_time": sameLabels, "min_over_time": sameLabels, "max_over_time": sameLabels, "sum_over_time": sameLabels,
	"count_over_time": sameLabels, "last_over_time": sameLabels, "present_over_time": sameLabels,
	"quantile_over_time": sameLabels, "stddev_over_time": sameLabels, "stdvar_over_time": sameLabels,
	"timestamp": sameLabels, "sort": sameLabels, "sort_desc": sameLabels,
	"histogram_quantile": withoutLe,
	"time":               noLabels, "vector": noLabels, "scalar": noLabels, "absent": noLabels, "absent_over_time": noLabels,
}

type resultLabels int

const (
	sameLabels resultLabels = iota
	withoutLe
	noLabels
)

// parse reads expr, a PromQL expression in the subset above.
func parse(expr string) (node, error) {
	toks, err := lex(expr)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	n, err := p.expr(0)
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, fmt.Errorf("unexpected %q at offset %d", t.text, t.pos)
	}
	return n, nil
}

// Binary operators by precedence, lowest first, as PromQL orders them.
var precedence = map[string]int{
	"or": 1, "and": 2, "unless": 2,
	"==": 3, "!=": 3, "<=": 3, "<": 3, ">=": 3, ">": 3,
	"+": 4, "-": 4, "*": 5, "/": 5, "%": 5, "atan2": 5, "^": 6,
}

type parser struct {
	toks []token
	i    int
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) expect(text string) error {
	if t := p.next(); t.text != text || t.kind == tString {
		return fmt.Errorf("want %q at offset %d, got %q", text, t.pos, t.text)
	}
	return nil
}

// binaryOp returns the binary operator at the cursor, if any.
func (p *parser) binaryOp() (string, bool) {
	t := p.peek()
	if t.kind != tOp && t.kind != tIdent {
		return "", false
	}
	op := t.text
	if t.kind == tIdent {
		op = strings.ToLower(op)
	}
	_, ok := precedence[op]
	return op, ok
}

// expr reads a binary expression whose operators bind tighter than minPrec.
func (p *parser) expr(minPrec int) (node, error) {
	lhs, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		op, ok := p.binaryOp()
		if !ok || precedence[op] <= minPrec {
			return lhs, nil
		}
		p.next()
		b := binary{op: op, lhs: lhs}
		if err := p.matching(&b); err != nil {
			return nil, err
		}
		next := precedence[op]
		if op == "^" { // right-associative
			next--
		}
		if b.rhs, err = p.expr(next); err != nil {
			return nil, err
		}
		lhs = b
	}
}

// matching reads bool, on/ignoring and group_left/group_right after a binary operator.
func (p *parser) matching(b *binary) error {
	if p.keyword("bool") {
		p.next()
	}
	switch {
	case p.keyword("on"), p.keyword("ignoring"):
		b.on = p.keyword("on")
		b.hasMatchModifier = true
		p.next()
		var err error
		if b.matching, err = p.labelList(); err != nil {
			return err
		}
	}
	if p.keyword("group_left") || p.keyword("group_right") {
		b.groupLeft, b.groupRight = p.keyword("group_left"), p.keyword("group_right")
		p.next()
		if p.peek().text == "(" {
			var err error
			if b.include, err = p.labelList(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (p *parser) keyword(k string) bool {
	t := p.peek()
	return t.kind == tIdent && strings.EqualFold(t.text, k)
}

// unary reads a primary expression with its signs and modifiers.
func (p *parser) unary() (node, error) {
	if t := p.peek(); t.kind == tOp && (t.text == "-" || t.text == "+") {
		p.next()
		// A unary sign binds tighter than every binary operator but ^.
		return p.expr(precedence["*"])
	}
	n, err := p.primary()
	if err != nil {
		return nil, err
	}
	return p.postfix(n)
}

// postfix reads a range ([5m]), a subquery ([1h:5m]), offset and @ after an expression.
func (p *parser) postfix(n node) (node, error) {
	for {
		switch t := p.peek(); {
		case t.kind == tOp && t.text == "[":
			p.next()
			for t := p.next(); t.text != "]"; t = p.next() {
				if t.kind == tEOF || t.kind == tString || t.kind == tOp && t.text != ":" {
					return nil, fmt.Errorf("unexpected %q in a range at offset %d", t.text, t.pos)
				}
			}
		case p.keyword("offset"):
			p.next()
			if p.peek().text == "-" {
				p.next()
			}
			if t := p.next(); t.kind != tNumber {
				return nil, fmt.Errorf("want a duration after offset at offset %d, got %q", t.pos, t.text)
			}
		case t.kind == tOp && t.text == "@":
			p.next()
			if p.keyword("start") || p.keyword("end") {
				p.next()
				if err := p.expect("("); err != nil {
					return nil, err
				}
				if err := p.expect(")"); err != nil {
					return nil, err
				}
			} else if t := p.next(); t.kind != tNumber {
				return nil, fmt.Errorf("want a time after @ at offset %d, got %q", t.pos, t.text)
			}
		default:
			return n, nil
		}
	}
}

func (p *parser) primary() (node, error) {
	t := p.next()
	switch t.kind {
	case tNumber, tString:
		return literal{}, nil
	case tEOF:
		return nil, fmt.Errorf("unexpected end of the expression")
	case tOp:
		return p.bracketed(t)
	}
	lower := strings.ToLower(t.text)
	if lower == "inf" || lower == "nan" {
		return literal{}, nil
	}
	if _, ok := aggregations[lower]; ok && (p.peek().text == "(" || p.keyword("by") || p.keyword("without")) {
		return p.aggregation(lower)
	}
	if p.peek().text == "(" && p.peek().kind == tOp {
		if _, ok := functions[t.text]; !ok {
			return nil, fmt.Errorf("function %s at offset %d is not one this check reads", t.text, t.pos)
		}
		args, err := p.args()
		if err != nil {
			return nil, err
		}
		return call{fn: t.text, args: args}, nil
	}
	if _, ok := precedence[lower]; ok || slices.Contains([]string{"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset"}, lower) {
		return nil, fmt.Errorf("keyword %s where an expression belongs, at offset %d", t.text, t.pos)
	}
	return p.selector(t.text)
}

// selector reads the matchers of a vector selector whose metric name has been read.
func (p *parser) selector(metric string) (node, error) {
	s := selector{metric: metric}
	if p.peek().text != "{" || p.peek().kind != tOp {
		return s, nil
	}
	p.next()
	for p.peek().text != "}" {
		name := p.next()
		if name.kind != tIdent {
			return nil, fmt.Errorf("want a label name at offset %d, got %q", name.pos, name.text)
		}
		if name.text == "__name__" {
			return nil, fmt.Errorf("a matcher on __name__ at offset %d is not read (name the metric)", name.pos)
		}
		if op := p.next(); op.kind != tOp || !slices.Contains([]string{"=", "!=", "=~", "!~"}, op.text) {
			return nil, fmt.Errorf("want a matcher operator at offset %d, got %q", op.pos, op.text)
		}
		if v := p.next(); v.kind != tString {
			return nil, fmt.Errorf("want a string at offset %d, got %q", v.pos, v.text)
		}
		s.labels = append(s.labels, name.text)
		if p.peek().text == "," {
			p.next()
		} else if p.peek().text != "}" {
			return nil, fmt.Errorf("want , or } at offset %d, got %q", p.peek().pos, p.peek().text)
		}
	}
	p.next()
	return s, nil
}

// bracketed reads a parenthesized expression whose ( has been read.
func (p *parser) bracketed(t token) (node, error) {
	switch t.text {
	case "(":
		n, err := p.expr(0)
		if err != nil {
			return nil, err
		}
		return n, p.expect(")")
	case "{":
		return nil, fmt.Errorf("a selector without a metric name at offset %d is not read (name the metric)", t.pos)
	}
	return nil, fmt.Errorf("unexpected %q at offset %d", t.text, t.pos)
}

// aggregation reads an aggregation whose operator has been read: its clause before or after
// the arguments.
func (p *parser) aggregation(op string) (node, error) {
	a := aggregation{op: op}
	clause := func() error {
		if !p.keyword("by") && !p.keyword("without") {
			return nil
		}
		if a.grouping != nil {
			return fmt.Errorf("two grouping clauses in %s at offset %d", op, p.peek().pos)
		}
		a.without = p.keyword("without")
		p.next()
		l, err := p.labelList()
		if l == nil {
			l = []string{}
		}
		a.grouping = l
		return err
	}
	if err := clause(); err != nil {
		return nil, err
	}
	args, err := p.args()
	if err != nil {
		return nil, err
	}
	a.args = args
	return a, clause()
}

// args reads a parenthesized argument list.
func (p *parser) args() ([]node, error) {
	if err := p.expect("("); err != nil {
		return nil, err
	}
	var out []node
	for p.peek().text != ")" || p.peek().kind != tOp {
		n, err := p.expr(0)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
		if p.peek().text == "," && p.peek().kind == tOp {
			p.next()
		} else if p.peek().text != ")" {
			return nil, fmt.Errorf("want , or ) at offset %d, got %q", p.peek().pos, p.peek().text)
		}
	}
	p.next()
	return out, nil
}

// labelList reads (a, b, c).
func (p *parser) labelList() ([]string, error) {
	if err := p.expect("("); err != nil {
		return nil, err
	}
	var out []string
	for p.peek().text != ")" {
		t := p.next()
		if t.kind != tIdent {
			return nil, fmt.Errorf("want a label name at offset %d, got %q", t.pos, t.text)
		}
		out = append(out, t.text)
		if p.peek().text == "," {
			p.next()
		} else if p.peek().text != ")" {
			return nil, fmt.Errorf("want , or ) at offset %d, got %q", p.peek().pos, p.peek().text)
		}
	}
	p.next()
	return out, nil
}

type tokenKind int

const (
	tEOF tokenKind = iota
	tIdent
	tNumber
	tString
	tOp
)

type token struct {
	kind tokenKind
	text string
	pos  int
}

// lex splits expr into PromQL's tokens: identifiers, numbers and durations, strings,
// operators and brackets; # starts a comment to the end of the line.
func lex(expr string) ([]token, error) {
	var toks []token
	r := []rune(expr)
	for i := 0; i < len(r); {
		c := r[i]
		var t token
		var err error
		switch {
		case unicode.IsSpace(c):
			i++
			continue
		case c == '#':
			for i < len(r) && r[i] != '\n' {
				i++
			}
			continue
		case isIdentStart(c):
			t = lexWhile(r, i, tIdent, func(j int) bool { return isIdentStart(r[j]) || isDigit(r[j]) })
		case isDigit(c) || c == '.' && i+1 < len(r) && isDigit(r[i+1]):
			t = lexWhile(r, i, tNumber, func(j int) bool { return inNumber(r, i, j) })
		case c == '"' || c == '\'' || c == '`':
			t, err = lexString(r, i)
		default:
			t, err = lexOp(r, i)
		}
		if err != nil {
			return nil, err
		}
		toks = append(toks, t)
		i += len([]rune(t.text))
	}
	return append(toks, token{kind: tEOF, pos: len(r)}), nil
}

// lexWhile reads the token of kind at i that runs while in holds.
func lexWhile(r []rune, i int, kind tokenKind, in func(j int) bool) token {
	j := i
	for j < len(r) && in(j) {
		j++
	}
	return token{kind, string(r[i:j]), i}
}

// lexString reads the quoted string at i, its quotes included.
func lexString(r []rune, i int) (token, error) {
	q := r[i]
	j := i + 1
	for ; j < len(r) && r[j] != q; j++ {
		if r[j] == '\\' && q != '`' {
			j++
		}
	}
	if j >= len(r) {
		return token{}, fmt.Errorf("unterminated string at offset %d", i)
	}
	return token{tString, string(r[i : j+1]), i}, nil
}

// operators are PromQL's operators and brackets, the two-character ones first.
var operators = []string{"==", "!=", "<=", ">=", "=~", "!~", "+", "-", "*", "/", "%", "^", "<", ">", "=", ",", "(", ")", "{", "}", "[", "]", ":", "@"}

func lexOp(r []rune, i int) (token, error) {
	for _, o := range operators {
		if strings.HasPrefix(string(r[i:min(i+2, len(r))]), o) {
			return token{tOp, o, i}, nil
		}
	}
	return token{}, fmt.Errorf("unexpected %q at offset %d", r[i], i)
}

// inNumber reports whether r[j] continues the number or duration (5m, 1h30m, 1e-3) that
// starts at i: digits, letters and dots, and an exponent's sign.
func inNumber(r []rune, i, j int) bool {
	if r[j] == '.' || isLetter(r[j]) || isDigit(r[j]) {
		return true
	}
	hex := strings.HasPrefix(strings.ToLower(string(r[i:j])), "0x")
	return (r[j] == '-' || r[j] == '+') && (r[j-1] == 'e' || r[j-1] == 'E') && !hex
}

func isIdentStart(c rune) bool { return c == '_' || c == ':' || isLetter(c) }

// PromQL's names and numbers are ASCII.
func isLetter(c rune) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isDigit(c rune) bool  { return '0' <= c && c <= '9' }
