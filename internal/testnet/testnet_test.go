package testnet

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

func TestHostsTalkThroughTheTestNamespace(t *testing.T) {
	n := New(t)
	a := n.Host("a")
	b := n.Host("b")
	if a.Addr == b.Addr || a.Peer == b.Peer {
		t.Fatalf("hosts share addresses: %v %v", a, b)
	}
	ln := a.Listen(":7001")
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_, _ = io.WriteString(c, "hello from a\n")
		c.Close()
	}()
	// From the test's own namespace, a's address is reachable over the veth.
	c, err := net.DialTimeout("tcp", a.Addr.String()+":7001", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(c)
	c.Close()
	if string(got) != "hello from a\n" {
		t.Fatalf("got %q", got)
	}
	// A listener in the test namespace on b's peer address is reached from inside b.
	lnHost, err := net.Listen("tcp", b.Peer.String()+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer lnHost.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cb, err := b.Dial(ctx, "tcp", lnHost.Addr().String())
	if err != nil {
		t.Fatalf("dial from b: %v", err)
	}
	cb.Close()
	// Commands run inside the host see its address.
	out, err := b.Command(ctx, "ip", "-4", "addr").CombinedOutput()
	if err != nil || !strings.Contains(string(out), b.Addr.String()) {
		t.Fatalf("ip addr in b: %v %s", err, out)
	}
	// nftables inside a host: a drop rule makes the listener unreachable from there.
	a.Nft(`table inet t {
	chain in {
		type filter hook input priority 0; policy accept;
		tcp dport 7002 drop
	}
}`)
	ln2 := a.Listen(":7002")
	_ = ln2
	if c, err := net.DialTimeout("tcp", a.Addr.String()+":7002", 300*time.Millisecond); err == nil {
		c.Close()
		t.Fatal("nft drop rule not applied")
	}
}
