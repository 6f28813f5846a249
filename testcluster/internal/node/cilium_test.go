package node

import (
	"strings"
	"testing"

	"github.com/antifailure/af/testcluster/internal/layout"
)

func TestCiliumOptions(t *testing.T) {
	for _, o := range []Options{
		{Enforcer: EnforcerCilium, DualStack: true},
		{Enforcer: EnforcerCilium, Holes: Holes{IPv6: true}},
		{Enforcer: EnforcerCilium, Holes: Holes{Node: true}},
	} {
		if _, err := New(o); err == nil || !strings.Contains(err.Error(), "IPv4-only and without holes") {
			t.Errorf("New(%+v) = %v, want a refusal (Cilium runs IPv4-only, without holes)", o, err)
		}
	}
	c, err := New(Options{Enforcer: EnforcerCilium})
	if err != nil {
		t.Fatal(err)
	}
	if c.nodePrefix() != "/32" || c.cniBinDir() == "/usr/lib/cni" {
		t.Errorf("node prefix %s, CNI plugins from %s: want the node's address alone and a directory with cilium-cni", c.nodePrefix(), c.cniBinDir())
	}
	argv := strings.Join(c.ciliumAgent().argv, " ")
	for _, want := range []string{"--enable-ipv6=false", "--enable-ipv4-masquerade=false", "--kube-proxy-replacement=false",
		"--ipam=kubernetes", "--enable-policy=default", "--devices=" + layout.InetVethHost + "," + layout.MetaVethHost} {
		if !strings.Contains(argv, want) {
			t.Errorf("cilium-agent %s: missing %s", argv, want)
		}
	}
	kr, _ := New(Options{Enforcer: EnforcerKubeRouter})
	if kr.nodePrefix() != "/24" || kr.cniBinDir() != "/usr/lib/cni" {
		t.Errorf("kube-router: node prefix %s, CNI plugins from %s: want the bridge's /24 and Debian's plugins", kr.nodePrefix(), kr.cniBinDir())
	}
}
