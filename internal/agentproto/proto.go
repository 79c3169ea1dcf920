// Package agentproto is the contract between the hook side of a sandbox pod and the gate-agent
// sidecar that decides its tool calls: gate-client (which Claude Code's PreToolUse wrapper
// runs) sends one Request and reads one Response per connection on a Unix stream socket; when
// the sidecar cannot answer, gate-hook decides instead and appends a FallbackRecord to a spool
// the sidecar reports from.
//
// A message is text header lines, an empty line, then a body whose length the header gives.
// Every header line is present once, in a fixed order, and its value is checked against a
// closed set of characters and a length bound, so a decoder never guesses and anything it
// accepts encodes back to the same bytes.
//
// The package imports only small standard packages: gate-hook links it, whose start-up every
// fallback pays. gate-client does not link it (bytes alone costs its start-up about 5% of a
// no-op's): cmd/gate-client/proto.go spells the part it uses again, and tests and fuzzers there
// hold the two to each other.
package agentproto

import (
	"bytes"
	"io"
)

// Magic is the first line of every request and response: the protocol and its version.
const Magic = "gate-agent/1"

// Bounds of the fields. MaxInput is claudecode.MaxHookInput (a test holds them equal): the
// client sends whatever gate-hook would read, and no more.
const (
	MaxInput     = 4 << 20
	MaxAnswer    = 1 << 20 // each of a response's stdout and stderr
	MaxDigest    = 64 << 10
	MaxVersion   = 128
	MaxRuntime   = 32
	MaxToken     = 64 // claudecode.MaxAnswerToken
	MaxWorkspace = 128
	// NonceLen is the length of a nonce: 16 random bytes in lowercase hex.
	NonceLen = 32
)

// None is the value of an optional header field that is not set (no token, no workspace, no
// flags, no digest). Values that are "-" themselves cannot be sent.
const None = "-"

// RuntimeClaudeCode is Claude Code's name as a request's runtime (claudecode.Name; this package
// imports no runtime's contract, to stay small). internal/runtime/runtimes lists every
// runtime the sidecar knows.
const RuntimeClaudeCode = "claude-code"

// NoVersion is the version of a bundle directory that is not a kubelet volume (it has no
// ..data): the sidecar answers under it when it cannot tell which version it decided with, and
// a client never sends it, so it never uses such an answer.
const NoVersion = None

// SnapshotFileName is gate.SnapshotFileName (a test holds them equal): the sidecar decides with
// the bundle's snapshot of that name, so a client whose gate-hook is pointed at another file
// does not ask it.
const SnapshotFileName = "policy-snapshot.rules"

// AnswerPrefix is claudecode.AnswerPrefix (a test holds them equal): the answer line's start.
const AnswerPrefix = "gate-answer "

// RefusalPrefix is gate.RefusalPrefix (a test holds them equal), for the refusals gate-client
// prints itself.
const RefusalPrefix = "[Intutic Governance] BLOCKED: "

// Header bounds. A request's header is at most a few hundred bytes; a response's is dominated
// by its digest, a layered bundle's fingerprint.
const (
	maxRequestHeader  = 1024
	maxResponseHeader = MaxDigest + 512
)

// Error is a malformed or unencodable message. Its text names what is wrong, never a value.
type Error string

func (e Error) Error() string { return "agentproto: " + string(e) }

var (
	errHeaderTooLong = Error("the header is longer than its bound")
	errShort         = Error("the message ends before its header or body does")
	errTrailing      = Error("bytes follow the message's body")
	errMagic         = Error("the first line is not " + Magic)
)

// Flags are the gate-hook flags a request carries, in their one encoding order.
type Flags struct {
	// Layers is gate-hook's --layers: decide with the bundle's layers, whose index must be there.
	Layers bool
	// ExplicitAllow is gate-hook's --explicit-allow: answer Allow with permissionDecision "allow".
	ExplicitAllow bool
}

// flagLayers and flagExplicitAllow are the flags' names, which appear in this order.
const (
	flagLayers        = "layers"
	flagExplicitAllow = "explicit-allow"
)

func (f Flags) encode() string {
	switch {
	case f.Layers && f.ExplicitAllow:
		return flagLayers + "," + flagExplicitAllow
	case f.Layers:
		return flagLayers
	case f.ExplicitAllow:
		return flagExplicitAllow
	}
	return None
}

func parseFlags(v []byte) (Flags, bool) {
	switch string(v) {
	case None:
		return Flags{}, true
	case flagLayers:
		return Flags{Layers: true}, true
	case flagExplicitAllow:
		return Flags{ExplicitAllow: true}, true
	case flagLayers + "," + flagExplicitAllow:
		return Flags{Layers: true, ExplicitAllow: true}, true
	}
	return Flags{}, false
}

// Request is one hook call put to the sidecar.
type Request struct {
	// Nonce is NonceLen lowercase hex digits, fresh per request; the response echoes it.
	Nonce string
	// Runtime names the hook contract of Input and of the answer ([a-z0-9-], at most MaxRuntime).
	Runtime string
	// Version is the policy volume's version the client saw: where <bundle dir>/..data points
	// ([A-Za-z0-9._-], at most MaxVersion).
	Version string
	// Token is gate-hook's --answer-token, "" for none ([A-Za-z0-9-], at most MaxToken).
	Token string
	Flags Flags
	// Workspace is gate-hook's --workspace, "" for none (printable ASCII without space, at
	// most MaxWorkspace).
	Workspace string
	// Input is the hook input as the runtime wrote it on stdin, at most MaxInput bytes. A
	// decoded request's Input shares the decoded message's memory.
	Input []byte
}

// Response is the sidecar's answer to a Request: what the hook prints and its exit status.
type Response struct {
	// Nonce is the request's.
	Nonce string
	// Version is the policy volume's version the decision was made with. A client that sent
	// another must not use the answer.
	Version string
	// Digest is the snapshot digest, or a layered bundle's fingerprint, the decision was made
	// with; "" when none was loaded ([a-z0-9:,], at most MaxDigest).
	Digest string
	// Exit is the hook's exit status: 0 or 2.
	Exit   int
	Stdout []byte
	Stderr []byte
}

// EncodeRequest encodes r, or says which field cannot be encoded.
func EncodeRequest(r *Request) ([]byte, error) {
	switch {
	case !validNonce([]byte(r.Nonce)):
		return nil, errField("nonce")
	case !validRuntime([]byte(r.Runtime)):
		return nil, errField("runtime")
	case !validVersion([]byte(r.Version)):
		return nil, errField("version")
	case r.Token == None || r.Token != "" && !ValidToken(r.Token):
		return nil, errField("token")
	case r.Workspace == None || r.Workspace != "" && !validWorkspace([]byte(r.Workspace)):
		return nil, errField("workspace")
	case len(r.Input) > MaxInput:
		return nil, errField("length")
	}
	b := make([]byte, 0, 256+len(r.Input))
	b = append(b, Magic+"\n"...)
	b = appendLine(b, "nonce", r.Nonce)
	b = appendLine(b, "runtime", r.Runtime)
	b = appendLine(b, "version", r.Version)
	b = appendLine(b, "token", orNone(r.Token))
	b = appendLine(b, "flags", r.Flags.encode())
	b = appendLine(b, "workspace", orNone(r.Workspace))
	b = appendLine(b, "length", itoa(len(r.Input)))
	b = append(b, '\n')
	return append(b, r.Input...), nil
}

// EncodeResponse encodes r, or says which field cannot be encoded.
func EncodeResponse(r *Response) ([]byte, error) {
	switch {
	case !validNonce([]byte(r.Nonce)):
		return nil, errField("nonce")
	case !validVersion([]byte(r.Version)):
		return nil, errField("version")
	case r.Digest != "" && !validDigest([]byte(r.Digest)):
		return nil, errField("digest")
	case r.Exit != 0 && r.Exit != 2:
		return nil, errField("exit")
	case len(r.Stdout) > MaxAnswer:
		return nil, errField("stdout")
	case len(r.Stderr) > MaxAnswer:
		return nil, errField("stderr")
	}
	b := make([]byte, 0, 192+len(r.Digest)+len(r.Stdout)+len(r.Stderr))
	b = append(b, Magic+"\n"...)
	b = appendLine(b, "nonce", r.Nonce)
	b = appendLine(b, "version", r.Version)
	b = appendLine(b, "digest", orNone(r.Digest))
	b = appendLine(b, "exit", itoa(r.Exit))
	b = appendLine(b, "stdout", itoa(len(r.Stdout)))
	b = appendLine(b, "stderr", itoa(len(r.Stderr)))
	b = append(b, '\n')
	b = append(b, r.Stdout...)
	return append(b, r.Stderr...), nil
}

// DecodeRequest decodes one whole request: msg must be exactly one message.
func DecodeRequest(msg []byte) (Request, error) {
	header, body, err := splitMessage(msg)
	if err != nil {
		return Request{}, err
	}
	r, n, err := parseRequestHeader(header)
	if err != nil {
		return Request{}, err
	}
	if len(body) < n {
		return Request{}, errShort
	}
	if len(body) > n {
		return Request{}, errTrailing
	}
	r.Input = body
	return r, nil
}

// DecodeResponse decodes one whole response: msg must be exactly one message.
func DecodeResponse(msg []byte) (Response, error) {
	header, body, err := splitMessage(msg)
	if err != nil {
		return Response{}, err
	}
	r, nout, nerr, err := parseResponseHeader(header)
	if err != nil {
		return Response{}, err
	}
	if len(body) < nout+nerr {
		return Response{}, errShort
	}
	if len(body) > nout+nerr {
		return Response{}, errTrailing
	}
	r.Stdout, r.Stderr = body[:nout:nout], body[nout:]
	return r, nil
}

// ReadRequest reads one request from r and decodes it. Once the header says how long the body
// is, and before memory for the body is taken, reserve (when not nil) is called with that
// length: a server bounds the memory of the requests it holds there, and an error it returns
// ends the read. Errors from r are returned as they are (a deadline, say).
func ReadRequest(r io.Reader, reserve func(n int) error) (Request, error) {
	msg, err := readMessage(r, maxRequestHeader, func(header []byte) (int, error) {
		_, n, err := parseRequestHeader(header)
		return n, err
	}, reserve)
	if err != nil {
		return Request{}, err
	}
	return DecodeRequest(msg)
}

// ReadResponse reads one response from r and decodes it.
func ReadResponse(r io.Reader) (Response, error) {
	msg, err := readMessage(r, maxResponseHeader, func(header []byte) (int, error) {
		_, nout, nerr, err := parseResponseHeader(header)
		return nout + nerr, err
	}, nil)
	if err != nil {
		return Response{}, err
	}
	return DecodeResponse(msg)
}

// readMessage reads a header of at most maxHeader bytes and then the body its length says,
// exactly: bytes past the body that arrived with the header are an error.
func readMessage(r io.Reader, maxHeader int, bodyLen func(header []byte) (int, error), reserve func(int) error) ([]byte, error) {
	// Headers are short but for a large digest: start small, grow up to the bound.
	buf := make([]byte, min(maxHeader, 2048))
	n, scanned, end := 0, 0, -1
	for end < 0 {
		if n == len(buf) {
			if n == maxHeader {
				return nil, errHeaderTooLong
			}
			buf = append(buf, make([]byte, min(maxHeader, 2*n)-n)...)
		}
		m, err := r.Read(buf[n:])
		n += m
		// Anything but this protocol is told at its first bytes, not at the deadline.
		if !bytes.HasPrefix([]byte(Magic+"\n"), buf[:min(n, len(Magic)+1)]) {
			return nil, errMagic
		}
		if i := bytes.Index(buf[scanned:n], []byte("\n\n")); i >= 0 {
			end = scanned + i + 2
			break
		}
		scanned = max(0, n-1)
		if err == io.EOF {
			return nil, errShort
		}
		if err != nil {
			return nil, err
		}
	}
	size, err := bodyLen(buf[:end-1]) // the header ends with its last line's newline
	if err != nil {
		return nil, err
	}
	if reserve != nil {
		if err := reserve(size); err != nil {
			return nil, err
		}
	}
	total := end + size
	if n > total {
		return nil, errTrailing
	}
	msg := make([]byte, total)
	copy(msg, buf[:n])
	if _, err := io.ReadFull(r, msg[n:]); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, errShort
		}
		return nil, err
	}
	return msg, nil
}

// splitMessage splits a message at the empty line that ends its header: the header keeps the
// newline of its last line. No header value is empty, so the first empty line is that one.
func splitMessage(msg []byte) (header, body []byte, err error) {
	i := bytes.Index(msg, []byte("\n\n"))
	if i < 0 {
		return nil, nil, errShort
	}
	return msg[:i+1], msg[i+2:], nil
}

func parseRequestHeader(header []byte) (r Request, length int, err error) {
	if len(header) > maxRequestHeader {
		return Request{}, 0, errHeaderTooLong
	}
	p := headerParser{rest: header}
	p.magic()
	nonce := p.field("nonce", validNonce)
	runtime := p.field("runtime", validRuntime)
	version := p.field("version", validVersion)
	token := p.field("token", func(v []byte) bool { return string(v) == None || ValidToken(string(v)) })
	flags := p.field("flags", func(v []byte) bool { _, ok := parseFlags(v); return ok })
	workspace := p.field("workspace", func(v []byte) bool { return string(v) == None || validWorkspace(v) })
	length = p.number("length", MaxInput)
	if err := p.end(); err != nil {
		return Request{}, 0, err
	}
	f, _ := parseFlags(flags)
	return Request{Nonce: string(nonce), Runtime: string(runtime), Version: string(version),
		Token: noneToEmpty(token), Flags: f, Workspace: noneToEmpty(workspace)}, length, nil
}

func parseResponseHeader(header []byte) (r Response, nout, nerr int, err error) {
	if len(header) > maxResponseHeader {
		return Response{}, 0, 0, errHeaderTooLong
	}
	p := headerParser{rest: header}
	p.magic()
	nonce := p.field("nonce", validNonce)
	version := p.field("version", validVersion)
	digest := p.field("digest", func(v []byte) bool { return string(v) == None || validDigest(v) })
	exit := p.field("exit", func(v []byte) bool { return string(v) == "0" || string(v) == "2" })
	nout = p.number("stdout", MaxAnswer)
	nerr = p.number("stderr", MaxAnswer)
	if err := p.end(); err != nil {
		return Response{}, 0, 0, err
	}
	return Response{Nonce: string(nonce), Version: string(version), Digest: noneToEmpty(digest), Exit: int(exit[0] - '0')}, nout, nerr, nil
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
	i := bytes.IndexByte(p.rest, '\n')
	if i < 0 {
		p.err = errShort
		return nil
	}
	l := p.rest[:i]
	p.rest = p.rest[i+1:]
	return l
}

func (p *headerParser) magic() {
	if l := p.line(); p.err == nil && string(l) != Magic {
		p.err = errMagic
	}
}

// field reads the line "<key> <value>" and returns the value, which valid must accept.
func (p *headerParser) field(key string, valid func([]byte) bool) []byte {
	l := p.line()
	if p.err != nil {
		return nil
	}
	v, ok := bytes.CutPrefix(l, []byte(key+" "))
	if !ok || !valid(v) {
		p.err = errField(key)
		return nil
	}
	return v
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

// end checks that every line was read and none is left.
func (p *headerParser) end() error {
	if p.err == nil && len(p.rest) != 0 {
		p.err = Error("the header has lines after its last field")
	}
	return p.err
}

func errField(key string) error {
	return Error("the " + key + " line is missing, out of order or malformed")
}

func appendLine(b []byte, key, value string) []byte {
	b = append(b, key...)
	b = append(b, ' ')
	b = append(b, value...)
	return append(b, '\n')
}

func orNone(s string) string {
	if s == "" {
		return None
	}
	return s
}

func noneToEmpty(v []byte) string {
	if string(v) == None {
		return ""
	}
	return string(v)
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
	if len(v) != NonceLen {
		return false
	}
	for _, c := range v {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ValidRuntime reports whether name can be sent as a request's runtime.
func ValidRuntime(name string) bool { return validRuntime([]byte(name)) }

func validRuntime(v []byte) bool {
	return bounded(v, MaxRuntime, func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' })
}

// ValidVersion reports whether v can be sent as a policy volume's version.
func ValidVersion(v string) bool { return validVersion([]byte(v)) }

func validVersion(v []byte) bool {
	return bounded(v, MaxVersion, func(c byte) bool { return isAlnum(c) || c == '.' || c == '_' || c == '-' })
}

// ValidToken reports whether token is an answer token as claudecode.CheckAnswerToken accepts
// it: 1 to MaxToken ASCII letters, digits and dashes.
func ValidToken(token string) bool {
	return bounded([]byte(token), MaxToken, func(c byte) bool { return isAlnum(c) || c == '-' })
}

// ValidWorkspace reports whether a workspace id can be sent as it is.
func ValidWorkspace(w string) bool { return w != None && validWorkspace([]byte(w)) }

func validWorkspace(v []byte) bool {
	return bounded(v, MaxWorkspace, func(c byte) bool { return c > ' ' && c < 0x7f })
}

func validDigest(v []byte) bool {
	return bounded(v, MaxDigest, func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == ':' || c == ',' })
}

func bounded(v []byte, limit int, ok func(byte) bool) bool {
	if len(v) == 0 || len(v) > limit {
		return false
	}
	for _, c := range v {
		if !ok(c) {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// HexNonce is the nonce of 16 random bytes.
func HexNonce(b [16]byte) string {
	const digits = "0123456789abcdef"
	var out [NonceLen]byte
	for i, c := range b {
		out[2*i], out[2*i+1] = digits[c>>4], digits[c&0xf]
	}
	return string(out[:])
}
