package main

// The part of internal/agentproto the client uses, spelled again here: agentproto imports bytes,
// whose unicode tables are initialized and paged in at every start (measured about 5% of a no-op
// binary's wall time), and the client must start about as fast as a no-op. proto_test.go holds
// every constant to agentproto's and fuzzes the encoder, the reader and the checks against it.

// Constants of the protocol and of its contract with gate-hook; see agentproto.
const (
	magic             = "gate-agent/1"
	maxInput          = 4 << 20
	maxAnswer         = 1 << 20
	maxDigest         = 64 << 10
	maxVersion        = 128
	maxRuntime        = 32
	maxToken          = 64
	maxWorkspace      = 128
	nonceLen          = 32
	none              = "-"
	noVersion         = none
	runtimeClaudeCode = "claude-code"
	snapshotFileName  = "policy-snapshot.rules"
	answerPrefix      = "gate-answer "
	refusalPrefix     = "[Intutic Governance] BLOCKED: "

	maxRequestHeader  = 1024
	maxResponseHeader = maxDigest + 512
)

// Why the client hands a call to gate-hook: agentproto's Fallback* codes.
const (
	fallbackUnreachable   = "sidecar-unreachable"
	fallbackTimeout       = "sidecar-timeout"
	fallbackGarbage       = "sidecar-garbage"
	fallbackVersion       = "sidecar-version"
	fallbackNoVolume      = "no-volume"
	fallbackArgs          = "client-args"
	fallbackInputTooLarge = "input-too-large"
)

// protoError is a malformed or unencodable message, as agentproto.Error.
type protoError string

func (e protoError) Error() string { return "agentproto: " + string(e) }

// errEOF is the end of the sidecar's stream, as io.EOF is for agentproto.ReadResponse.
const errEOF = protoError("EOF")

const (
	errHeaderTooLong = protoError("the header is longer than its bound")
	errShort         = protoError("the message ends before its header or body does")
	errTrailing      = protoError("bytes follow the message's body")
	errMagic         = protoError("the first line is not " + magic)
	errBadField      = protoError("a line is missing, out of order or malformed")
)

// request is agentproto.Request.
type request struct {
	nonce, runtime, version, token, workspace string
	layers, explicitAllow                     bool
	input                                     []byte
}

// response is what the client uses of agentproto.Response.
type response struct {
	nonce, version string
	exit           int
	stdout, stderr []byte
}

// encodeRequest is agentproto.EncodeRequest: not ok when a field cannot be encoded.
func encodeRequest(r *request) ([]byte, bool) {
	switch {
	case !validNonce([]byte(r.nonce)), !validRuntime(r.runtime), !validVersion(r.version),
		r.token == none || r.token != "" && !validToken(r.token),
		r.workspace == none || r.workspace != "" && !validWorkspace(r.workspace),
		len(r.input) > maxInput:
		return nil, false
	}
	b := make([]byte, 0, 256+len(r.input))
	b = append(b, magic+"\n"...)
	b = appendLine(b, "nonce", r.nonce)
	b = appendLine(b, "runtime", r.runtime)
	b = appendLine(b, "version", r.version)
	b = appendLine(b, "token", orNone(r.token))
	b = appendLine(b, "flags", encodeFlags(r.layers, r.explicitAllow))
	b = appendLine(b, "workspace", orNone(r.workspace))
	b = appendLine(b, "length", itoa(len(r.input)))
	b = append(b, '\n')
	return append(b, r.input...), true
}

func encodeFlags(layers, explicitAllow bool) string {
	switch {
	case layers && explicitAllow:
		return "layers,explicit-allow"
	case layers:
		return "layers"
	case explicitAllow:
		return "explicit-allow"
	}
	return none
}

// readResponse is agentproto.ReadResponse: it reads one response with read, which returns
// errEOF at the stream's end, and decodes it. Errors from read are returned as they are.
func readResponse(read func([]byte) (int, error)) (response, error) {
	// Headers are short but for a large digest: start small, grow up to the bound.
	buf := make([]byte, 2048)
	n, scanned, end := 0, 0, -1
	for end < 0 {
		if n == len(buf) {
			if n == maxResponseHeader {
				return response{}, errHeaderTooLong
			}
			buf = append(buf, make([]byte, min(maxResponseHeader, 2*n)-n)...)
		}
		m, err := read(buf[n:])
		n += m
		// Anything but this protocol is told at its first bytes, not at the deadline.
		if string(buf[:min(n, len(magic)+1)]) != (magic + "\n")[:min(n, len(magic)+1)] {
			return response{}, errMagic
		}
		if i := index(buf[scanned:n], "\n\n"); i >= 0 {
			end = scanned + i + 2
			break
		}
		scanned = max(0, n-1)
		if err == errEOF {
			return response{}, errShort
		}
		if err != nil {
			return response{}, err
		}
	}
	r, nout, nerr, err := parseResponseHeader(buf[:end-1]) // the header ends with its last line's newline
	if err != nil {
		return response{}, err
	}
	total := end + nout + nerr
	if n > total {
		return response{}, errTrailing
	}
	msg := make([]byte, total)
	copy(msg, buf[:n])
	for n < total {
		m, err := read(msg[n:])
		if n += m; n >= total {
			break
		}
		if err == errEOF {
			return response{}, errShort
		}
		if err != nil {
			return response{}, err
		}
	}
	body := msg[end:]
	r.stdout, r.stderr = body[:nout:nout], body[nout:]
	return r, nil
}

func parseResponseHeader(header []byte) (r response, nout, nerr int, err error) {
	if len(header) > maxResponseHeader {
		return response{}, 0, 0, errHeaderTooLong
	}
	p := headerParser{rest: header}
	p.magic()
	nonce := p.field("nonce", validNonce)
	version := p.field("version", func(v []byte) bool { return validVersion(string(v)) })
	p.field("digest", func(v []byte) bool { return string(v) == none || validDigest(v) })
	exit := p.field("exit", func(v []byte) bool { return string(v) == "0" || string(v) == "2" })
	nout = p.number("stdout", maxAnswer)
	nerr = p.number("stderr", maxAnswer)
	if p.err == nil && len(p.rest) != 0 {
		p.err = protoError("the header has lines after its last field")
	}
	if p.err != nil {
		return response{}, 0, 0, p.err
	}
	return response{nonce: string(nonce), version: string(version), exit: int(exit[0] - '0')}, nout, nerr, nil
}

// headerParser reads a header's lines in order; the first problem sticks, and later reads
// return nothing.
type headerParser struct {
	rest []byte
	err  error
}

func (p *headerParser) line() []byte {
	if p.err != nil {
		return nil
	}
	i := index(p.rest, "\n")
	if i < 0 {
		p.err = errShort
		return nil
	}
	l := p.rest[:i]
	p.rest = p.rest[i+1:]
	return l
}

func (p *headerParser) magic() {
	if l := p.line(); p.err == nil && string(l) != magic {
		p.err = errMagic
	}
}

// field reads the line "<key> <value>" and returns the value, which valid must accept.
func (p *headerParser) field(key string, valid func([]byte) bool) []byte {
	l := p.line()
	if p.err != nil {
		return nil
	}
	prefix := key + " "
	if len(l) < len(prefix) || string(l[:len(prefix)]) != prefix || !valid(l[len(prefix):]) {
		p.err = errBadField
		return nil
	}
	return l[len(prefix):]
}

// number reads the line "<key> <n>", n a decimal of at most limit written without leading zeros.
func (p *headerParser) number(key string, limit int) int {
	v := p.field(key, func(v []byte) bool {
		n, ok := atoi(v)
		return ok && n <= limit
	})
	n, _ := atoi(v)
	return n
}

// index is the index of the first sep in b, -1 when there is none.
func index(b []byte, sep string) int {
	for i := 0; i+len(sep) <= len(b); i++ {
		if string(b[i:i+len(sep)]) == sep {
			return i
		}
	}
	return -1
}

func appendLine(b []byte, key, value string) []byte {
	b = append(b, key...)
	b = append(b, ' ')
	b = append(b, value...)
	return append(b, '\n')
}

func orNone(s string) string {
	if s == "" {
		return none
	}
	return s
}

// atoi parses a canonical decimal: digits only, no sign, no leading zero but in "0", at most 9
// digits (so it cannot overflow).
func atoi(v []byte) (int, bool) {
	if len(v) == 0 || len(v) > 9 || len(v) > 1 && v[0] == '0' {
		return 0, false
	}
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for ; n > 0; n /= 10 {
		i--
		b[i] = byte('0' + n%10)
	}
	return string(b[i:])
}

func validNonce(v []byte) bool {
	if len(v) != nonceLen {
		return false
	}
	for _, c := range v {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// validRuntime is agentproto.ValidRuntime.
func validRuntime(v string) bool {
	return bounded(v, maxRuntime, func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' })
}

// validVersion is agentproto.ValidVersion.
func validVersion(v string) bool {
	return bounded(v, maxVersion, func(c byte) bool { return isAlnum(c) || c == '.' || c == '_' || c == '-' })
}

// validToken is agentproto.ValidToken.
func validToken(v string) bool {
	return bounded(v, maxToken, func(c byte) bool { return isAlnum(c) || c == '-' })
}

// validWorkspace is agentproto.ValidWorkspace but for "-", which a request cannot carry.
func validWorkspace(v string) bool {
	return bounded(v, maxWorkspace, func(c byte) bool { return c > ' ' && c < 0x7f })
}

func validDigest(v []byte) bool {
	return bounded(string(v), maxDigest, func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == ':' || c == ',' })
}

func bounded(v string, limit int, ok func(byte) bool) bool {
	if len(v) == 0 || len(v) > limit {
		return false
	}
	for i := range len(v) {
		if !ok(v[i]) {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// hexNonce is agentproto.HexNonce: the nonce of 16 random bytes.
func hexNonce(b [16]byte) string {
	const digits = "0123456789abcdef"
	var out [nonceLen]byte
	for i, c := range b {
		out[2*i], out[2*i+1] = digits[c>>4], digits[c&0xf]
	}
	return string(out[:])
}
