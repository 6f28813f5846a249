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

	"golang.org/x/sys/unix"
)

// Net allocates hosts for one test.
type Net struct {
	t      testing.TB
	prefix string
}

var counter atomic.Int32

// New returns a Net for t, or skips t when not root or when ip is missing.
func New(t testing.TB) *Net {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: needs root to create network namespaces (make test runs as root)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("SKIPPED: needs the ip command (iproute2)")
	}
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

// Listen opens a TCP listener inside the host at addr (e.g. ":80" or ":0").
func (h *Host) Listen(addr string) net.Listener {
	h.t.Helper()
	var ln net.Listener
	if err := h.in(func() (err error) { ln, err = net.Listen("tcp4", addr); return err }); err != nil {
		h.t.Fatalf("listen in %s: %v", h.Name, err)
	}
	h.t.Cleanup(func() { ln.Close() })
	return ln
}

// ListenPacket opens a UDP socket inside the host.
func (h *Host) ListenPacket(addr string) net.PacketConn {
	h.t.Helper()
	var pc net.PacketConn
	if err := h.in(func() (err error) { pc, err = net.ListenPacket("udp4", addr); return err }); err != nil {
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
