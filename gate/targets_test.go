package gate

import (
	"errors"
	"net"
	"strings"
	"testing"
)

func TestTargets(t *testing.T) {
	noV6 := func() ([]net.Addr, error) { return nil, nil }
	base := Addresses{APIServer: "10.96.0.1:443", InterfaceAddrs: noV6}
	names := func(ts []Target) string {
		var out []string
		for _, x := range ts {
			s := x.Route + "=" + x.Addr
			if x.Network != "" {
				s += "/" + x.Network
			}
			out = append(out, s)
		}
		return strings.Join(out, " ")
	}
	// The defaults (never dialled here: Targets only lists them).
	four := "tcp-public=" + DefaultPublicTCP + " udp-dns=" + DefaultPublicDNS + " metadata=" + DefaultMetadata + " apiserver=10.96.0.1:443 "
	for _, c := range []struct {
		name string
		a    func(Addresses) Addresses
		want string
		err  string
	}{
		{"the link-local route is always there, even with --ipv6 off",
			func(a Addresses) Addresses { a.IPv6 = "off"; return a },
			four + "ipv6-link-local=ff02::1+neighbours", ""},
		{"the node route on each port, UDP marked",
			func(a Addresses) Addresses {
				a.Node, a.NodePorts = "10.244.0.1", "10250, 30999/tcp,30999/udp"
				return a
			},
			four + "ipv6-link-local=ff02::1+neighbours node-local=10.244.0.1:10250 node-local=10.244.0.1:30999 node-local=10.244.0.1:30999/udp node-unannounced=10.244.0.1:30000,32765 vs 29999", ""},
		{"the node's default port is the kubelet's",
			func(a Addresses) Addresses { a.Node = "10.244.0.1"; return a },
			four + "ipv6-link-local=ff02::1+neighbours node-local=10.244.0.1:10250 node-unannounced=10.244.0.1:30000,32765 vs 29999", ""},
		{"an IPv6 node address: its routes named -v6",
			func(a Addresses) Addresses { a.Node, a.NodePorts = "fd00::1", "10250"; return a },
			four + "ipv6-link-local=ff02::1+neighbours node-local-v6=[fd00::1]:10250 node-unannounced-v6=[fd00::1]:30000,32765 vs 29999", ""},
		{"a dual-stack node (status.hostIPs): each address every way",
			func(a Addresses) Addresses {
				a.Node, a.NodePorts = "10.244.0.1,fd61:af:244::1", "10250,30999/udp"
				return a
			},
			four + "ipv6-link-local=ff02::1+neighbours node-local=10.244.0.1:10250 node-local=10.244.0.1:30999/udp node-unannounced=10.244.0.1:30000,32765 vs 29999" +
				" node-local-v6=[fd61:af:244::1]:10250 node-local-v6=[fd61:af:244::1]:30999/udp node-unannounced-v6=[fd61:af:244::1]:30000,32765 vs 29999", ""},
		{"a node address that is not one", func(a Addresses) Addresses { a.Node = "10.244.0.1,node-1"; return a }, "", `node "node-1" is not an IP address`},
		{"the node's unannounced ports named",
			func(a Addresses) Addresses {
				a.Node, a.NodeSamplePorts, a.NodeControlPort = "10.244.0.1", "31000", "8"
				return a
			},
			four + "ipv6-link-local=ff02::1+neighbours node-local=10.244.0.1:10250 node-unannounced=10.244.0.1:31000 vs 8", ""},
		{"a UDP sample port", func(a Addresses) Addresses { a.Node, a.NodeSamplePorts = "10.244.0.1", "30000/udp"; return a }, "", "only TCP"},
		{"a bad node port", func(a Addresses) Addresses { a.Node, a.NodePorts = "10.244.0.1", "30999/sctp"; return a }, "", `node ports: "30999/sctp" is not PORT`},
		{"no node port at all", func(a Addresses) Addresses { a.Node, a.NodePorts = "10.244.0.1", " , "; return a }, "", "node ports: none named"},
		{"a bad link-local port", func(a Addresses) Addresses { a.LinkLocalPorts = "53,70000"; return a }, "", `link-local ports: "70000" is not PORT`},
	} {
		ts, err := c.a(base).Targets()
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || names(ts) != c.want {
			t.Errorf("%s:\n got %s (%v)\nwant %s", c.name, names(ts), err, c.want)
		}
	}
}

// TestIPv6Segments: what the link-local route reads of the pod decides whether it looks, and
// it fails closed where the pod's state cannot be told.
func TestIPv6Segments(t *testing.T) {
	lo := net.Interface{Index: 1, Name: "lo", Flags: net.FlagUp | net.FlagLoopback}
	eth := net.Interface{Index: 2, Name: "eth0", Flags: net.FlagUp}
	addr := func(s string) net.Addr {
		ip, n, _ := net.ParseCIDR(s)
		n.IP = ip
		return n
	}
	type state struct {
		off, exists bool
		err         error
	}
	env := func(addrs map[string][]net.Addr, st state) linkLocalEnv {
		return linkLocalEnv{
			interfaces: func() ([]net.Interface, error) { return []net.Interface{lo, eth}, nil },
			addrs:      func(i net.Interface) ([]net.Addr, error) { return addrs[i.Name], nil },
			sysctl:     func(string) (bool, bool, error) { return st.off, st.exists, st.err },
		}
	}
	v4only := map[string][]net.Addr{"lo": {addr("127.0.0.1/8"), addr("::1/128")}, "eth0": {addr("10.244.0.9/24")}}
	withLL := map[string][]net.Addr{"lo": {addr("127.0.0.1/8")}, "eth0": {addr("10.244.0.9/24"), addr("fe80::1/64")}}
	for _, c := range []struct {
		name    string
		le      linkLocalEnv
		segs    int
		outcome Outcome
		detail  string
	}{
		{"a link-local address: the segment is looked at", env(withLL, state{exists: true}), 1, "", ""},
		{"IPv6 disabled on eth0 (::1 on loopback does not count)", env(v4only, state{off: true, exists: true}), 0, Denied, "IPv6 disabled on eth0"},
		{"a kernel without IPv6", env(v4only, state{exists: false}), 0, Denied, "the kernel has no IPv6"},
		{"IPv6 enabled but no address yet: look again", env(v4only, state{exists: true}), 0, Unknown, "no address yet"},
		{"the sysctl cannot be read: not a denial", env(v4only, state{exists: true, err: errors.New("permission denied")}), 0, Unknown, "cannot be read"},
		{"interfaces cannot be listed", linkLocalEnv{interfaces: func() ([]net.Interface, error) { return nil, errors.New("boom") }}, 0, Unknown, "listing interfaces"},
	} {
		segs, _, o, d := ipv6Segments(c.le)
		if len(segs) != c.segs || o != c.outcome || !strings.Contains(d, c.detail) {
			t.Errorf("%s: %d segments, %q %q", c.name, len(segs), o, d)
		}
	}
}
