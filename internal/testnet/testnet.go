// Package testnet makes test hosts for tests that need real network paths: each host is a
// network namespace on this machine joined to the test's own namespace by a veth pair, with
// addresses from 198.18.0.0/15 (the benchmarking range, never routed off this machine). A test
// can listen inside a host, run a command inside it, give it its own resolv.conf, and install
// nftables rules in it. Everything is removed when the test ends.
//
// Packets only ever travel between the test process and namespaces the test created. Tests
// that use this package need root; they skip, saying so, without it.
package testnet

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/antifailure/af/internal/testreq"
	"golang.org/x/sys/unix"
)

// Net allocates hosts for one test.
type Net struct {
	t      testing.TB
	prefix string
}

var counter atomic.Int32

// New returns a Net for t. Without root or the ip command the test is skipped, or fails
// under make test (package testreq).
func New(t testing.TB) *Net {
	t.Helper()
	if os.Geteuid() != 0 {
		testreq.Missing(t, "needs root to create network namespaces (make test runs as root)")
	}
	testreq.Tools(t, "ip")
	n := counter.Add(1)
	return &Net{t: t, prefix: fmt.Sprintf("aft%d-%d", os.Getpid()%100000, n)}
}

// Host is a network namespace joined to the test's namespace.
type Host struct {
	Name string
	// Addr is the host's address inside its namespace.
	Addr netip.Addr
	// Peer is the address of the test's side of the link: how the host reaches the test.
	Peer netip.Addr
	nsFD int
	t    testing.TB
}

// Host creates a host. Subnets are 198.18.<k>.0/24 with the test's side at .1 and the host at .2,
// k unique per process.
func (n *Net) Host(name string) *Host {
	n.t.Helper()
	k := n.subnet()
	ns := fmt.Sprintf("%s-%s", n.prefix, name)
	if len(ns) > 30 {
		ns = ns[:30]
	}
	vethHost := fmt.Sprintf("afv%dh%d", os.Getpid()%10000, k)
	vethNS := fmt.Sprintf("afv%dn%d", os.Getpid()%10000, k)
	peer := netip.AddrFrom4([4]byte{198, 18 + byte(k/256), byte(k % 256), 1})
	addr := netip.AddrFrom4([4]byte{198, 18 + byte(k/256), byte(k % 256), 2})
	h := &Host{Name: ns, Addr: addr, Peer: peer, t: n.t}
	run := func(args ...string) {
		n.t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			n.t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	_ = exec.Command("ip", "netns", "del", ns).Run()
	_ = exec.Command("ip", "link", "del", vethHost).Run()
	run("netns", "add", ns)
	n.t.Cleanup(func() {
		_ = exec.Command("ip", "link", "del", vethHost).Run()
		_ = exec.Command("ip", "netns", "del", ns).Run()
		_ = os.RemoveAll(filepath.Join("/etc/netns", ns))
	})
	run("link", "add", vethHost, "type", "veth", "peer", "name", vethNS)
	run("link", "set", vethNS, "netns", ns)
	run("addr", "add", peer.String()+"/24", "dev", vethHost)
	run("link", "set", vethHost, "up")
	run("-n", ns, "addr", "add", addr.String()+"/24", "dev", vethNS)
	run("-n", ns, "link", "set", vethNS, "up")
	run("-n", ns, "link", "set", "lo", "up")
	fd, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		n.t.Fatalf("open netns %s: %v", ns, err)
	}
	h.nsFD = fd
	n.t.Cleanup(func() { unix.Close(fd) })
	return h
}

// subnet reserves a /24 of 198.18.0.0/15 for the rest of the test, across every process on
// the machine (test packages run in parallel), by holding a lock file.
func (n *Net) subnet() int {
	n.t.Helper()
	dir := "/run/af-testnet"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		n.t.Fatal(err)
	}
	for k := 1; k < 510; k++ {
		fd, err := unix.Open(filepath.Join(dir, fmt.Sprintf("%d.lock", k)), unix.O_CREAT|unix.O_RDWR|unix.O_CLOEXEC, 0o644)
		if err != nil {
			n.t.Fatal(err)
		}
		if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			unix.Close(fd)
			continue
		}
		n.t.Cleanup(func() { unix.Close(fd) })
		return k
	}
	n.t.Fatal("no free test subnet in 198.18.0.0/15")
	return 0
}

// in runs fn with the calling goroutine's thread inside the host's namespace. Sockets fn
// creates stay in that namespace.
func (h *Host) in(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// The thread is not unlocked: if switching back fails it must die with the goroutine.
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		defer unix.Close(orig)
		if err := unix.Setns(h.nsFD, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns: %w", err)
			return
		}
		ferr := fn()
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns back: %w", err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Do runs fn inside the host's namespace, on one thread: sockets fn opens with raw system
// calls (not Go's net package, whose I/O may move to other threads) stay there.
func (h *Host) Do(fn func() error) error { return h.in(fn) }

// Listen opens a TCP listener inside the host at addr (e.g. ":80" or ":0").
func (h *Host) Listen(addr string) net.Listener { return h.ListenNetwork("tcp4", addr) }

// ListenNetwork opens a listener of the given network ("tcp", "tcp6", ...) inside the host:
// "tcp" at ":53" listens on every address of both families, link-local ones included.
func (h *Host) ListenNetwork(network, addr string) net.Listener {
	h.t.Helper()
	var ln net.Listener
	if err := h.in(func() (err error) { ln, err = net.Listen(network, addr); return err }); err != nil {
		h.t.Fatalf("listen in %s: %v", h.Name, err)
	}
	h.t.Cleanup(func() { ln.Close() })
	return ln
}

// ListenPacket opens a UDP socket inside the host.
func (h *Host) ListenPacket(addr string) net.PacketConn { return h.ListenPacketNetwork("udp4", addr) }

// ListenPacketNetwork opens a packet socket of the given network ("udp", "udp6") inside the host.
func (h *Host) ListenPacketNetwork(network, addr string) net.PacketConn {
	h.t.Helper()
	var pc net.PacketConn
	if err := h.in(func() (err error) { pc, err = net.ListenPacket(network, addr); return err }); err != nil {
		h.t.Fatalf("listen udp in %s: %v", h.Name, err)
	}
	h.t.Cleanup(func() { pc.Close() })
	return pc
}

// Dial connects from inside the host.
func (h *Host) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := h.in(func() (err error) {
		var d net.Dialer
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// SetResolver makes processes run with Command resolve names through nameserver.
func (h *Host) SetResolver(nameserver netip.Addr) {
	h.t.Helper()
	dir := filepath.Join("/etc/netns", h.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		h.t.Fatal(err)
	}
	conf := fmt.Sprintf("nameserver %s\noptions ndots:1 timeout:2 attempts:1\n", nameserver)
	if err := os.WriteFile(filepath.Join(dir, "resolv.conf"), []byte(conf), 0o644); err != nil {
		h.t.Fatal(err)
	}
	// An empty hosts file, so names resolve through the nameserver only.
	if err := os.WriteFile(filepath.Join(dir, "hosts"), []byte("127.0.0.1 localhost\n"), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// Command returns a command that runs inside the host (ip netns exec), with the host's
// resolv.conf when SetResolver was called.
func (h *Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.Name, name}, args...)...)
}

// Nft applies an nftables ruleset inside the host.
func (h *Host) Nft(ruleset string) {
	h.t.Helper()
	cmd := exec.Command("ip", "netns", "exec", h.Name, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(ruleset)
	if out, err := cmd.CombinedOutput(); err != nil {
		h.t.Fatalf("nft in %s: %v: %s", h.Name, err, out)
	}
}

// Router is a network namespace with a bridge that hosts attach to, forwarding between them:
// a small network of its own, joined to nothing else. Hosts on it get addresses in the
// router's 198.18.x.0/24 and a default route through the router, so the router can carry extra
// addresses (Host.AddAddr) such as a documentation-range "public" address.
type Router struct {
	*Host
	n      *Net
	subnet [3]byte
	next   int
}

// Router creates a router.
func (n *Net) Router(name string) *Router {
	n.t.Helper()
	k := n.subnet()
	ns := fmt.Sprintf("%s-%s", n.prefix, name)
	if len(ns) > 30 {
		ns = ns[:30]
	}
	_ = exec.Command("ip", "netns", "del", ns).Run()
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		n.t.Fatalf("ip netns add %s: %v: %s", ns, err, out)
	}
	n.t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	sub := [3]byte{198, 18 + byte(k/256), byte(k % 256)}
	gw := netip.AddrFrom4([4]byte{sub[0], sub[1], sub[2], 1})
	for _, args := range [][]string{
		{"-n", ns, "link", "set", "lo", "up"},
		{"-n", ns, "link", "add", "br0", "type", "bridge"},
		{"-n", ns, "addr", "add", gw.String() + "/24", "dev", "br0"},
		{"-n", ns, "link", "set", "br0", "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			n.t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	if out, err := exec.Command("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.ip_forward=1").CombinedOutput(); err != nil {
		n.t.Fatalf("sysctl in %s: %v: %s", ns, err, out)
	}
	fd, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { unix.Close(fd) })
	return &Router{Host: &Host{Name: ns, Addr: gw, nsFD: fd, t: n.t}, n: n, subnet: sub, next: 10}
}

// Attach creates a host on the router. Its Peer is the router's address.
func (r *Router) Attach(name string) *Host {
	t := r.n.t
	t.Helper()
	r.next++
	idx := r.next
	ns := fmt.Sprintf("%s-%s", r.Name, name)
	if len(ns) > 30 {
		ns = ns[:30]
	}
	vr := fmt.Sprintf("r%d.%d", r.subnet[2], idx)
	vh := fmt.Sprintf("h%d.%d", r.subnet[2], idx)
	addr := netip.AddrFrom4([4]byte{r.subnet[0], r.subnet[1], r.subnet[2], byte(idx)})
	_ = exec.Command("ip", "netns", "del", ns).Run()
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	run("netns", "add", ns)
	t.Cleanup(func() {
		_ = exec.Command("ip", "netns", "del", ns).Run()
		_ = os.RemoveAll(filepath.Join("/etc/netns", ns))
	})
	run("-n", r.Name, "link", "add", vr, "type", "veth", "peer", "name", vh)
	run("-n", r.Name, "link", "set", vh, "netns", ns)
	run("-n", r.Name, "link", "set", vr, "master", "br0")
	run("-n", r.Name, "link", "set", vr, "up")
	run("-n", ns, "link", "set", "lo", "up")
	run("-n", ns, "addr", "add", addr.String()+"/24", "dev", vh)
	run("-n", ns, "link", "set", vh, "up")
	run("-n", ns, "route", "add", "default", "via", r.Addr.String())
	fd, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return &Host{Name: ns, Addr: addr, Peer: r.Addr, nsFD: fd, t: t}
}

// Route makes the router send traffic for prefix to host (which should carry an address in
// it, see AddAddr).
func (r *Router) Route(prefix string, via *Host) {
	r.n.t.Helper()
	if out, err := exec.Command("ip", "-n", r.Name, "route", "replace", prefix, "via", via.Addr.String()).CombinedOutput(); err != nil {
		r.n.t.Fatalf("route %s: %v: %s", prefix, err, out)
	}
}

// AddAddr gives the host one more address (on its loopback), such as 203.0.113.10/32.
func (h *Host) AddAddr(cidr string) {
	h.t.Helper()
	if out, err := exec.Command("ip", "-n", h.Name, "addr", "add", cidr, "dev", "lo").CombinedOutput(); err != nil {
		h.t.Fatalf("addr add %s in %s: %v: %s", cidr, h.Name, err, out)
	}
}
