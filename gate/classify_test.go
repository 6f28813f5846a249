package gate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"
)

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: err}}
}

func TestClassify(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want Outcome
	}{
		{"no error: the route answered", nil, Escaped},
		{"context deadline", context.DeadlineExceeded, Denied},
		{"read deadline", fmt.Errorf("read: %w", os.ErrDeadlineExceeded), Denied},
		{"net timeout", &net.OpError{Op: "dial", Err: timeoutErr{}}, Denied},
		{"url error wrapping a timeout", &url.Error{Op: "Get", URL: "http://x", Err: context.DeadlineExceeded}, Denied},
		{"ECONNREFUSED", opErr("dial", syscall.ECONNREFUSED), Denied},
		{"ENETUNREACH", opErr("dial", syscall.ENETUNREACH), Denied},
		{"EHOSTUNREACH", opErr("dial", syscall.EHOSTUNREACH), Denied},
		{"EAFNOSUPPORT", opErr("socket", syscall.EAFNOSUPPORT), Denied},
		{"EACCES", opErr("dial", syscall.EACCES), Denied},
		{"EPERM", opErr("dial", syscall.EPERM), Denied},
		{"ETIMEDOUT", opErr("dial", syscall.ETIMEDOUT), Denied},
		{"ECONNRESET: something answered", opErr("read", syscall.ECONNRESET), Unknown},
		{"EADDRNOTAVAIL", opErr("dial", syscall.EADDRNOTAVAIL), Unknown},
		{"EMFILE", opErr("socket", syscall.EMFILE), Unknown},
		{"ENOBUFS", opErr("write", syscall.ENOBUFS), Unknown},
		{"EOF", io.EOF, Unknown},
		{"DNS failure", &net.DNSError{Err: "no such host", Name: "x"}, Unknown},
		{"plain error", errors.New("something odd"), Unknown},
		{"URL error wrapping refusal", &url.Error{Op: "Get", URL: "http://x", Err: opErr("dial", syscall.ECONNREFUSED)}, Denied},
	}
	for _, c := range cases {
		got, detail := Classify(c.err)
		if got != c.want {
			t.Errorf("%s: %s (%s), want %s", c.name, got, detail, c.want)
		}
		if detail == "" {
			t.Errorf("%s: no detail", c.name)
		}
	}
	// Every errno the kernel defines: only the listed ones may ever be denied, none contained
	// by accident.
	allowed := map[syscall.Errno]bool{syscall.ECONNREFUSED: true, syscall.ENETUNREACH: true, syscall.EHOSTUNREACH: true, syscall.EAFNOSUPPORT: true, syscall.EACCES: true, syscall.EPERM: true, syscall.ETIMEDOUT: true}
	for e := syscall.Errno(1); e < 134; e++ {
		got, _ := Classify(opErr("dial", e))
		if got == Escaped {
			t.Errorf("errno %d (%v) classified as escaped", int(e), e)
		}
		if got == Denied && !allowed[e] {
			t.Errorf("errno %d (%v) classified as denied", int(e), e)
		}
	}
}
