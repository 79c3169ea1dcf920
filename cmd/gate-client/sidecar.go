package main

import (
	"errors"
	"io"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/intutic/gate-operator/internal/agentproto"
)

// readInput reads the hook input from stdin: at most one byte more than the sidecar may be
// sent, so a larger input is told apart (gate-hook then refuses it, reading the same bytes).
func readInput() ([]byte, bool) {
	buf := make([]byte, 0, 64<<10)
	for len(buf) <= agentproto.MaxInput {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := syscall.Read(0, buf[len(buf):min(cap(buf), agentproto.MaxInput+1)])
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
	target, err := os.Readlink(dir + "/..data")
	if err != nil || target == agentproto.NoVersion || !agentproto.ValidVersion(target) {
		return "", false
	}
	return target, true
}

// newNonce is 16 bytes from the kernel's random source, in hex.
func newNonce() (string, bool) {
	var b [16]byte
	for n := 0; n < len(b); {
		m, err := unix.Getrandom(b[n:], 0)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return "", false
		}
		n += m
	}
	return agentproto.HexNonce(b), true
}

// errDeadline is the overall deadline passing.
var errDeadline = errors.New("the sidecar did not answer in time")

// ask sends the request msg to the socket and reads the response, all before deadline. It
// returns the response, or the reason to fall back to gate-hook.
func ask(socket string, msg []byte, deadline time.Time) (agentproto.Response, string) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return agentproto.Response{}, agentproto.FallbackUnreachable
	}
	defer unix.Close(fd)
	c := conn{fd: fd, deadline: deadline}
	if err := c.connect(socket); err != nil {
		return agentproto.Response{}, reasonOf(err, agentproto.FallbackUnreachable)
	}
	if err := c.write(msg); err != nil {
		return agentproto.Response{}, reasonOf(err, agentproto.FallbackUnreachable)
	}
	resp, err := agentproto.ReadResponse(&c)
	if err != nil {
		return agentproto.Response{}, reasonOf(err, agentproto.FallbackGarbage)
	}
	return resp, ""
}

// reasonOf is the fall-back reason of an error: a timeout for the deadline, otherwise other.
func reasonOf(err error, other string) string {
	if err == errDeadline {
		return agentproto.FallbackTimeout
	}
	return other
}

// conn is a blocking Unix socket whose every call is bounded by what is left of one deadline
// (SO_SNDTIMEO bounds connect and send, SO_RCVTIMEO recv). A signal interrupting a call under
// a timeout makes it fail with EINTR rather than restart (signal(7)), so it is retried.
type conn struct {
	fd       int
	deadline time.Time
}

// arm sets the socket's timeout for the next call to what is left of the deadline.
func (c *conn) arm(opt int) error {
	left := time.Until(c.deadline)
	if left <= 0 {
		return errDeadline
	}
	tv := unix.NsecToTimeval(max(left.Nanoseconds(), int64(time.Microsecond)))
	return unix.SetsockoptTimeval(c.fd, unix.SOL_SOCKET, opt, &tv)
}

func (c *conn) connect(path string) error {
	for {
		if err := c.arm(unix.SO_SNDTIMEO); err != nil {
			return err
		}
		// A connect to a listener whose backlog is full waits up to the send timeout, then
		// fails with EAGAIN.
		switch err := unix.Connect(c.fd, &unix.SockaddrUnix{Name: path}); err {
		case nil:
			return nil
		case syscall.EINTR:
		case syscall.EAGAIN:
			if time.Until(c.deadline) <= 0 {
				return errDeadline
			}
		default:
			return err
		}
	}
}

func (c *conn) write(p []byte) error {
	for len(p) > 0 {
		if err := c.arm(unix.SO_SNDTIMEO); err != nil {
			return err
		}
		// MSG_NOSIGNAL: a sidecar that closed the connection is an error here, not SIGPIPE.
		n, err := unix.SendmsgN(c.fd, p, nil, nil, unix.MSG_NOSIGNAL)
		if n > 0 {
			p = p[n:]
		}
		switch err {
		case nil, syscall.EINTR:
		case syscall.EAGAIN:
			if time.Until(c.deadline) <= 0 {
				return errDeadline
			}
		default:
			return err
		}
	}
	return nil
}

// Read is io.Reader's, for agentproto.ReadResponse.
func (c *conn) Read(p []byte) (int, error) {
	for {
		if err := c.arm(unix.SO_RCVTIMEO); err != nil {
			return 0, err
		}
		n, err := unix.Read(c.fd, p)
		switch err {
		case nil:
			if n == 0 {
				return 0, io.EOF
			}
			return n, nil
		case syscall.EINTR:
		case syscall.EAGAIN:
			if time.Until(c.deadline) <= 0 {
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
