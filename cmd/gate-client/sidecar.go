package main

import (
	"syscall"
	"unsafe"
)

// readInput reads the hook input from stdin: at most one byte more than the sidecar may be
// sent, so a larger input is told apart (gate-hook then refuses it, reading the same bytes).
func readInput() ([]byte, bool) {
	buf := make([]byte, 0, 64<<10)
	for len(buf) <= maxInput {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := syscall.Read(0, buf[len(buf):min(cap(buf), maxInput+1)])
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return nil, false
		case n == 0:
			return buf, true
		}
		buf = buf[:len(buf)+n]
	}
	return buf, true
}

// volumeVersion is the version of the policy volume at dir, where its ..data points; not ok
// when it has none, so the bundle is not a kubelet volume and there is no version to ask about.
func volumeVersion(dir string) (string, bool) {
	// One byte more than a version may have tells a longer target apart.
	var buf [maxVersion + 1]byte
	link := dir + "/..data"
	n, err := syscall.Readlink(link, buf[:])
	for err == syscall.EINTR {
		n, err = syscall.Readlink(link, buf[:])
	}
	if err != nil || n > maxVersion {
		return "", false
	}
	target := string(buf[:n])
	if target == noVersion || !validVersion(target) {
		return "", false
	}
	return target, true
}

// newNonce is 16 bytes from the kernel's random source (getrandom(2), which blocks only until
// the pool is first initialized), in hex.
func newNonce() (string, bool) {
	var b [16]byte
	for n := 0; n < len(b); {
		m, _, errno := syscall.Syscall(sysGetrandom, uintptr(unsafe.Pointer(&b[n])), uintptr(len(b)-n), 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			return "", false
		}
		n += int(m)
	}
	return hexNonce(b), true
}

// monotonic is CLOCK_MONOTONIC in nanoseconds (package time's clock, which the client does not
// import).
func monotonic() int64 {
	var ts syscall.Timespec
	// clock_gettime cannot fail with a valid clock and address.
	_, _, _ = syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

const clockMonotonic = 1

// errDeadline is the overall deadline passing.
const errDeadline = protoError("the sidecar did not answer in time")

// ask sends the request msg to the socket and reads the response, all before deadline (on the
// monotonic clock). It returns the response, or the reason to fall back to gate-hook.
func ask(socket string, msg []byte, deadline int64) (response, string) {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return response{}, fallbackUnreachable
	}
	defer syscall.Close(fd)
	c := conn{fd: fd, deadline: deadline}
	if err := c.connect(socket); err != nil {
		return response{}, reasonOf(err, fallbackUnreachable)
	}
	if err := c.write(msg); err != nil {
		return response{}, reasonOf(err, fallbackUnreachable)
	}
	resp, err := readResponse(c.read)
	if err != nil {
		return response{}, reasonOf(err, fallbackGarbage)
	}
	return resp, ""
}

// reasonOf is the fall-back reason of an error: a timeout for the deadline, otherwise other.
func reasonOf(err error, other string) string {
	if err == errDeadline {
		return fallbackTimeout
	}
	return other
}

// conn is a blocking Unix socket whose every call is bounded by what is left of one deadline
// (SO_SNDTIMEO bounds connect and send, SO_RCVTIMEO recv). A signal interrupting a call under
// a timeout makes it fail with EINTR rather than restart (signal(7)), so it is retried.
type conn struct {
	fd       int
	deadline int64
}

// arm sets the socket's timeout for the next call to what is left of the deadline.
func (c *conn) arm(opt int) error {
	left := c.deadline - monotonic()
	if left <= 0 {
		return errDeadline
	}
	tv := syscall.NsecToTimeval(max(left, 1000))
	return syscall.SetsockoptTimeval(c.fd, syscall.SOL_SOCKET, opt, &tv)
}

// passed reports whether the deadline has passed.
func (c *conn) passed() bool { return monotonic() >= c.deadline }

func (c *conn) connect(path string) error {
	for {
		if err := c.arm(syscall.SO_SNDTIMEO); err != nil {
			return err
		}
		// A connect to a listener whose backlog is full waits up to the send timeout, then
		// fails with EAGAIN.
		switch err := syscall.Connect(c.fd, &syscall.SockaddrUnix{Name: path}); err {
		case nil:
			return nil
		case syscall.EINTR:
		case syscall.EAGAIN:
			if c.passed() {
				return errDeadline
			}
		default:
			return err
		}
	}
}

func (c *conn) write(p []byte) error {
	for len(p) > 0 {
		if err := c.arm(syscall.SO_SNDTIMEO); err != nil {
			return err
		}
		// MSG_NOSIGNAL: a sidecar that closed the connection is an error here, not SIGPIPE.
		n, err := syscall.SendmsgN(c.fd, p, nil, nil, syscall.MSG_NOSIGNAL)
		if n > 0 {
			p = p[n:]
		}
		switch err {
		case nil, syscall.EINTR:
		case syscall.EAGAIN:
			if c.passed() {
				return errDeadline
			}
		default:
			return err
		}
	}
	return nil
}

// read is the reader of readResponse: errEOF at the end of the stream.
func (c *conn) read(p []byte) (int, error) {
	for {
		if err := c.arm(syscall.SO_RCVTIMEO); err != nil {
			return 0, err
		}
		n, err := syscall.Read(c.fd, p)
		switch err {
		case nil:
			if n == 0 {
				return 0, errEOF
			}
			return n, nil
		case syscall.EINTR:
		case syscall.EAGAIN:
			if c.passed() {
				return 0, errDeadline
			}
		default:
			return 0, err
		}
	}
}

// writeAll writes p to fd, whole, and reports whether it could.
func writeAll(fd int, p []byte) bool {
	for len(p) > 0 {
		n, err := syscall.Write(fd, p)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return false
		}
		p = p[n:]
	}
	return true
}
