package dnsserver

import (
	"context"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// udpPool keeps connected UDP sockets to the cluster resolver, so forwarding a query costs a
// write and a read instead of a new socket. A socket carries one query at a time; one that
// failed or timed out is closed, never reused, so a late answer cannot be taken for another's.
type udpPool struct {
	addr    string
	timeout time.Duration

	mu   sync.Mutex
	free []*dns.Conn
}

const maxIdleSockets = 64

func (p *udpPool) get(ctx context.Context) (*dns.Conn, error) {
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		c := p.free[n-1]
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return c, nil
	}
	p.mu.Unlock()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "udp", p.addr)
	if err != nil {
		return nil, err
	}
	return &dns.Conn{Conn: nc, UDPSize: 4096}, nil
}

func (p *udpPool) put(c *dns.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.free) >= maxIdleSockets {
		c.Close()
		return
	}
	p.free = append(p.free, c)
}

// exchange sends m and returns the answer with the same id and question.
func (p *udpPool) exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
	c, err := p.get(ctx)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(p.timeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = c.SetDeadline(deadline)
	if err := c.WriteMsg(m); err != nil {
		c.Close()
		return nil, err
	}
	for {
		r, err := c.ReadMsg()
		if err != nil {
			c.Close()
			return nil, err
		}
		if r.Id != m.Id || len(r.Question) != 1 || !strings.EqualFold(r.Question[0].Name, m.Question[0].Name) {
			continue // not ours: ignore it and keep waiting
		}
		p.put(c)
		return r, nil
	}
}
