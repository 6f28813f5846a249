package guard

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
)

// mapResolver answers from a table; rebind answers differently on each call.
type mapResolver struct {
	table  map[string][]string
	calls  atomic.Int32
	rebind []string
}

func (m *mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	n := m.calls.Add(1)
	if host == "rebind.test" {
		return []netip.Addr{netip.MustParseAddr(m.rebind[min(int(n)-1, len(m.rebind)-1)])}, nil
	}
	ss, ok := m.table[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out, nil
}

func TestCheck(t *testing.T) {
	g := New(Options{
		ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("198.18.100.0/24")},
		Allowed:      []netip.Prefix{netip.MustParsePrefix("192.168.7.0/24"), netip.MustParsePrefix("127.0.0.0/8")},
	})
	for addr, refused := range map[string]bool{
		"203.0.113.10":     false,
		"198.18.0.1":       false,
		"127.0.0.1":        true, // never, even though a range names it
		"169.254.10.254":   true,
		"169.254.1.1":      true,
		"10.1.2.3":         true,
		"172.20.0.1":       true,
		"192.168.1.1":      true,
		"192.168.7.9":      false, // named by a rule
		"100.64.0.1":       true,
		"0.0.0.0":          true,
		"224.0.0.1":        true,
		"255.255.255.255":  true,
		"198.18.100.7":     true, // cluster range
		"::ffff:10.0.0.1":  true,
		"::ffff:127.0.0.1": true,
		"::1":              true,
		"fe80::1":          true,
		"fd00::1":          true,
		"2001:db8::1":      true, // IPv6 not allowed
	} {
		why := g.Check(netip.MustParseAddr(addr))
		if (why != "") != refused {
			t.Errorf("Check(%s) = %q, refused want %t", addr, why, refused)
		}
	}
	// A rule naming the cluster's ranges opens none of them: the pod range, the Service range
	// and the node's address stay refused inside an allowed 10/8.
	wide := New(Options{
		ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("192.168.5.4/32")},
		Allowed:      []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("192.168.5.0/24")},
	})
	for addr, refused := range map[string]bool{
		"10.244.0.1":  true, // the node on the bridge (kubelet)
		"10.244.0.17": true, // another namespace's pod
		"10.96.0.1":   true, // the API server's Service
		"192.168.5.4": true, // a node address
		"192.168.5.9": false,
		"10.20.0.5":   false, // the database the rule is for
	} {
		why := wide.Check(netip.MustParseAddr(addr))
		if (why != "") != refused {
			t.Errorf("with cidr rules over the cluster: Check(%s) = %q, refused want %t", addr, why, refused)
		}
		if refused && !strings.Contains(why, "no rule opens") {
			t.Errorf("Check(%s) = %q: want it to say the cluster's range wins", addr, why)
		}
	}
	g6 := New(Options{IPv6: true})
	if why := g6.Check(netip.MustParseAddr("2001:db8::1")); why != "" {
		t.Errorf("IPv6 allowed: %q", why)
	}
}

func TestResolveRefusesAnyForbiddenAddress(t *testing.T) {
	r := &mapResolver{table: map[string][]string{
		"public.test":    {"203.0.113.5"},
		"mixed.test":     {"203.0.113.5", "10.0.0.5"},
		"loopback.test":  {"127.0.0.1"},
		"metadata.test":  {"169.254.77.1"},
		"nothing.test":   {},
		"linklocal.test": {"169.254.10.1"},
	}}
	g := New(Options{Resolver: r})
	ctx := context.Background()
	if addrs, err := g.Resolve(ctx, "public.test"); err != nil || len(addrs) != 1 {
		t.Errorf("public: %v %v", addrs, err)
	}
	for _, h := range []string{"mixed.test", "loopback.test", "metadata.test", "nothing.test", "linklocal.test", "unknown.test", "127.0.0.1", "[::1]"} {
		_, err := g.Resolve(ctx, h)
		var ref *Refused
		if !errors.As(err, &ref) {
			t.Errorf("Resolve(%s) = %v, want refused", h, err)
		}
	}
}

// TestDialConnectsToTheCheckedAddress: a name whose second answer would point at loopback is
// resolved once; the connection goes to the address that was checked.
func TestDialConnectsToTheCheckedAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	// The first answer is a documentation address (checked and allowed, unreachable here, so
	// the dial fails); if the guard resolved again it would get loopback and connect.
	r := &mapResolver{rebind: []string{"192.0.2.1", "127.0.0.1"}}
	g := New(Options{Resolver: r, DialTimeout: 200e6})
	c, err := g.Dial(context.Background(), "rebind.test", port)
	if err == nil {
		c.Close()
		t.Fatal("connected: the guard resolved again and followed the rebinding")
	}
	if r.calls.Load() != 1 {
		t.Fatalf("resolved %d times, want 1", r.calls.Load())
	}
	// A rule-named range is reachable.
	g2 := New(Options{Resolver: &mapResolver{table: map[string][]string{"db.test": {"127.0.0.1"}}}, Allowed: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	if _, err := g2.Dial(context.Background(), "db.test", port); err == nil {
		t.Fatal("loopback reached through an allowed range")
	}
}
