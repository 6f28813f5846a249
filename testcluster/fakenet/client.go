package fakenet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"time"
)

// TCPEcho connects to addr, sends a token and waits for it to come back.
func TCPEcho(ctx context.Context, addr string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("tcp %s: %w", addr, err)
	}
	defer c.Close()
	deadline, _ := ctx.Deadline()
	_ = c.SetDeadline(deadline)
	return echoOnce(c, "tcp", addr)
}

// UDPEcho sends a token to addr over UDP and waits for it to come back.
func UDPEcho(ctx context.Context, addr string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "udp", addr)
	if err != nil {
		return fmt.Errorf("udp %s: %w", addr, err)
	}
	defer c.Close()
	deadline, _ := ctx.Deadline()
	_ = c.SetDeadline(deadline)
	return echoOnce(c, "udp", addr)
}

func echoOnce(c net.Conn, proto, addr string) error {
	token := fmt.Appendf(nil, "af-%d\n", rand.Uint64())
	if _, err := c.Write(token); err != nil {
		return fmt.Errorf("%s %s: %w", proto, addr, err)
	}
	got := make([]byte, 0, len(token))
	buf := make([]byte, 512)
	for len(got) < len(token) {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			return fmt.Errorf("%s %s: %w", proto, addr, err)
		}
	}
	if !bytes.Equal(got[:len(token)], token) {
		return fmt.Errorf("%s %s: echoed %q, sent %q", proto, addr, got, token)
	}
	return nil
}

// Resolve asks the DNS server at server (host:port) over UDP for name's A records.
func Resolve(ctx context.Context, server, name string, timeout time.Duration) ([]netip.Addr, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "udp", server)
	if err != nil {
		return nil, fmt.Errorf("dns %s: %w", server, err)
	}
	defer c.Close()
	deadline, _ := ctx.Deadline()
	_ = c.SetDeadline(deadline)
	id := uint16(rand.UintN(65536))
	if _, err := c.Write(Query(id, name)); err != nil {
		return nil, fmt.Errorf("dns %s: %w", server, err)
	}
	buf := make([]byte, 1500)
	n, err := c.Read(buf)
	if err != nil {
		return nil, fmt.Errorf("dns %s: %w", server, err)
	}
	addrs, err := ParseAnswer(id, buf[:n])
	if err != nil {
		return nil, fmt.Errorf("dns %s: %s: %w", server, name, err)
	}
	if len(addrs) == 0 {
		return nil, errors.New("dns " + server + ": no address for " + name)
	}
	return addrs, nil
}
