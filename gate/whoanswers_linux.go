package gate

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
)

// Who answered a TCP connection attempt, told apart the way the plain connect(2) cannot: a
// refused connect is ECONNREFUSED whether the host's own stack sent a reset (nothing listens
// on the port: the packet reached the host) or a firewall on the way sent ICMP port
// unreachable (the packet was stopped). With IP_RECVERR (IPV6_RECVERR) the kernel also queues
// every ICMP error the socket gets on its error queue, with the message's origin, type and
// code; a reset queues nothing. So: connected, reset (ECONNREFUSED, the queue empty), ICMP
// (the queue holds it, whatever the connect said), or silence (the time ran out, the queue
// empty).

// WhoAnswers opens one TCP connection to addr and says who answered within timeout (and ctx).
func WhoAnswers(ctx context.Context, addr netip.AddrPort, timeout time.Duration) (Reply, error) {
	ip := addr.Addr().Unmap()
	if ip.Zone() != "" {
		return Reply{}, fmt.Errorf("%s: a zoned address is not supported here", addr)
	}
	family, level, opt := unix.AF_INET, unix.SOL_IP, unix.IP_RECVERR
	var sa unix.Sockaddr
	if ip.Is4() {
		sa = &unix.SockaddrInet4{Port: int(addr.Port()), Addr: ip.As4()}
	} else {
		family, level, opt = unix.AF_INET6, unix.SOL_IPV6, unix.IPV6_RECVERR
		sa = &unix.SockaddrInet6{Port: int(addr.Port()), Addr: ip.As16()}
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return Reply{}, fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, level, opt, 1); err != nil {
		return Reply{}, fmt.Errorf("set RECVERR: %w", err)
	}
	switch err := unix.Connect(fd, sa); {
	case err == nil:
		return Reply{Kind: AnswerAccepted, Detail: "connected"}, nil
	case errors.Is(err, unix.EINPROGRESS):
	default:
		return localOrQueued(fd, err), nil
	}
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	for {
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			break
		}
		// Short polls, so a cancelled ctx is noticed soon.
		wait := min(left, 50*time.Millisecond)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		n, err := unix.Poll(fds, int(wait.Milliseconds())+1)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return Reply{}, fmt.Errorf("poll: %w", err)
		}
		if n == 0 {
			continue
		}
		soErr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err != nil {
			return Reply{}, fmt.Errorf("SO_ERROR: %w", err)
		}
		if r, ok := queued(fd); ok {
			return r, nil
		}
		if soErr == 0 {
			if fds[0].Revents&unix.POLLOUT != 0 {
				return Reply{Kind: AnswerAccepted, Detail: "connected"}, nil
			}
			continue // POLLERR for an error queue entry already read: keep waiting
		}
		e := unix.Errno(soErr)
		if e == unix.ECONNREFUSED || e == unix.ECONNRESET {
			return Reply{Kind: AnswerReset, Detail: "reset"}, nil
		}
		return localOrQueued(fd, e), nil
	}
	// Silence, unless an ICMP error was queued without ending the connect (the IPv6 stack
	// keeps trying after a soft error).
	if r, ok := queued(fd); ok {
		return r, nil
	}
	return Reply{Kind: AnswerSilence, Detail: "no answer"}, nil
}

// localOrQueued is an error of the connect: an ICMP message when one was queued, else a local
// one (EHOSTUNREACH from the pod's own routing, EPERM from its own firewall, ...).
func localOrQueued(fd int, err error) Reply {
	if r, ok := queued(fd); ok {
		return r
	}
	return Reply{Kind: AnswerLocal, Detail: err.Error()}
}

// queued reads one ICMP error from the socket's error queue.
func queued(fd int) (Reply, bool) {
	buf := make([]byte, 64)
	oob := make([]byte, 512)
	for range 8 {
		_, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_ERRQUEUE|unix.MSG_DONTWAIT)
		if err != nil {
			return Reply{}, false
		}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			continue
		}
		for _, m := range msgs {
			if !(m.Header.Level == unix.SOL_IP && m.Header.Type == unix.IP_RECVERR) &&
				!(m.Header.Level == unix.SOL_IPV6 && m.Header.Type == unix.IPV6_RECVERR) {
				continue
			}
			if len(m.Data) < 16 {
				continue
			}
			// struct sock_extended_err: errno u32, origin u8, type u8, code u8, pad u8, info u32, data u32.
			origin, typ, code := m.Data[4], m.Data[5], m.Data[6]
			errno := unix.Errno(binary.NativeEndian.Uint32(m.Data[0:4]))
			switch origin {
			case unix.SO_EE_ORIGIN_ICMP:
				return Reply{Kind: AnswerICMP, Detail: fmt.Sprintf("ICMP type %d code %d (%s)", typ, code, errno)}, true
			case unix.SO_EE_ORIGIN_ICMP6:
				return Reply{Kind: AnswerICMP, Detail: fmt.Sprintf("ICMPv6 type %d code %d (%s)", typ, code, errno)}, true
			}
		}
	}
	return Reply{}, false
}
