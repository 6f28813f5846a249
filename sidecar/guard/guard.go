// Package guard is the sidecar's defence against server-side request forgery: after the policy
// allows a host, the guard resolves it, refuses when any of its addresses is loopback,
// link-local, private (unless a rule names that range) or inside the cluster (whatever the rules
// say), and connects to
// exactly the address it checked, so a DNS answer that changes between the check and the
// connection cannot open a hole.
package guard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Forbidden are the ranges no connection may reach unless a rule names them: loopback,
// link-local (the metadata endpoint), private, shared, unspecified, multicast and broadcast.
var forbidden = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("::/128"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("fc00::/7"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("ff00::/8"),
}

// neverAllowed cannot be opened even by a rule.
var neverAllowed = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("fe80::/10"),
}

// Resolver looks up a host's addresses.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Guard checks and dials.
type Guard struct {
	resolver Resolver
	// cluster are the cluster's pod and service ranges, forbidden like the private ranges.
	cluster []netip.Prefix
	// allowed are ranges rules name explicitly.
	allowed []netip.Prefix
	// self are the sidecar's own addresses: connecting to them would loop.
	self   []netip.Addr
	ipv6   bool
	dialer net.Dialer
}

// Options configure a Guard.
type Options struct {
	Resolver     Resolver
	ClusterCIDRs []netip.Prefix
	Allowed      []netip.Prefix
	Self         []netip.Addr
	IPv6         bool
	DialTimeout  time.Duration
}

// New returns a Guard.
func New(o Options) *Guard {
	timeout := o.DialTimeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	r := o.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	return &Guard{resolver: r, cluster: o.ClusterCIDRs, allowed: o.Allowed, self: o.Self, ipv6: o.IPv6, dialer: net.Dialer{Timeout: timeout}}
}

// Refused says why the guard would not connect.
type Refused struct {
	Host   string
	Addr   netip.Addr
	Reason string
}

func (r *Refused) Error() string {
	if r.Addr.IsValid() {
		return fmt.Sprintf("refused %s (%s): %s", r.Host, r.Addr, r.Reason)
	}
	return fmt.Sprintf("refused %s: %s", r.Host, r.Reason)
}

// Check returns why addr may not be reached, or "" when it may.
func (g *Guard) Check(addr netip.Addr) string {
	addr = addr.Unmap()
	for _, s := range g.self {
		if s.Unmap() == addr {
			return fmt.Sprintf("%s is the sidecar itself", addr)
		}
	}
	for _, p := range neverAllowed {
		if p.Contains(addr) {
			return fmt.Sprintf("%s is in %s, which is never reachable", addr, p)
		}
	}
	// The cluster's own ranges (pods, Services, nodes) win over every rule: a pull request's
	// af.yaml must not be able to open the cluster's inside with a cidr rule.
	for _, p := range g.cluster {
		if p.Contains(addr) {
			return fmt.Sprintf("%s is in the cluster's range %s, which no rule opens", addr, p)
		}
	}
	for _, p := range g.allowed {
		if p.Contains(addr) {
			return ""
		}
	}
	if addr.Is6() && !g.ipv6 {
		return fmt.Sprintf("%s is IPv6, which this environment does not allow", addr)
	}
	for _, p := range forbidden {
		if p.Contains(addr) {
			return fmt.Sprintf("%s is in %s (loopback, link-local or private)", addr, p)
		}
	}
	return ""
}

// Resolve returns host's addresses, all checked. Any forbidden address refuses the whole host:
// a name that resolves to a public and a private address is a rebinding attempt.
func (g *Guard) Resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	h := strings.Trim(host, "[]")
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(h); err == nil {
		addrs = []netip.Addr{a}
	} else {
		network := "ip4"
		if g.ipv6 {
			network = "ip"
		}
		found, err := g.resolver.LookupNetIP(ctx, network, h)
		if err != nil {
			return nil, &Refused{Host: host, Reason: "cannot resolve: " + err.Error()}
		}
		addrs = found
	}
	if len(addrs) == 0 {
		return nil, &Refused{Host: host, Reason: "resolves to no address"}
	}
	for _, a := range addrs {
		if why := g.Check(a); why != "" {
			return nil, &Refused{Host: host, Addr: a.Unmap(), Reason: why}
		}
	}
	return addrs, nil
}

// Dial resolves host, checks every address, and connects to the first checked address that
// answers. It never resolves again between the check and the connection.
func (g *Guard) Dial(ctx context.Context, host string, port int) (net.Conn, error) {
	addrs, err := g.Resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, a := range addrs {
		c, err := g.dialer.DialContext(ctx, "tcp", net.JoinHostPort(a.Unmap().String(), strconv.Itoa(port)))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("connecting to %s:%d: %w", host, port, errors.Join(errs...))
}
