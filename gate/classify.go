package gate

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
)

// Outcome of one attempt on one route.
type Outcome string

// Outcomes. Only denied counts towards containment; unknown never does.
const (
	Denied  Outcome = "denied"
	Escaped Outcome = "escaped"
	Unknown Outcome = "unknown"
)

// Classify says what an attempt's error means. It fails closed: only a timeout, a refused
// connection, an unreachable network or host, an unsupported address family, or a permission
// error (EACCES, EPERM) count as denied. No error means the attempt got through. Anything else
// is unknown, and unknown is never contained.
func Classify(err error) (Outcome, string) {
	if err == nil {
		return Escaped, "answered"
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return Denied, "timeout"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.ECONNREFUSED:
			return Denied, "connection refused"
		case syscall.ENETUNREACH:
			return Denied, "network unreachable"
		case syscall.EHOSTUNREACH:
			return Denied, "host unreachable"
		case syscall.EAFNOSUPPORT:
			return Denied, "address family not supported"
		case syscall.EACCES:
			return Denied, "permission denied (EACCES)"
		case syscall.EPERM:
			return Denied, "operation not permitted (EPERM)"
		case syscall.ETIMEDOUT:
			return Denied, "timeout"
		}
		return Unknown, errno.Error()
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return Denied, "timeout"
	}
	return Unknown, err.Error()
}
