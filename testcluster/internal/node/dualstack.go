package node

import (
	"context"
	"fmt"

	"github.com/antifailure/af/harden"
	"github.com/antifailure/af/testcluster/internal/layout"
)

// A dual-stack cluster (Options.DualStack) gives pods and Services an IPv6 range beside the
// IPv4 one, the node an IPv6 address on the bridge, and the fake internet, its resolver and the
// fake metadata server IPv6 addresses of their own, each in the namespace that holds its IPv4
// twin. Pods keep IPv6 (the tuning plugin does not turn it off): it is theirs by design, so the
// enforcer must govern it.
//
// What an operator does to make such a cluster contain af's environments:
//
//   - kube-router with --enable-ipv6, so that pods' IPv6 addresses get the same chains and
//     ipsets as their IPv4 ones.
//   - The link-local rule. kube-router matches a pod's traffic by the pod's addresses (-s/-d
//     of its podIPs); a pod's fe80:: address is not among them, so its link-local traffic (an
//     echo or a DNS query to ff02::1, a connection to a neighbour's fe80:: address) passes
//     every chain, whatever the policies say. One ip6tables chain (linkLocalChain) on traffic
//     from the pods' bridge, to the node and between pods, lets neighbour discovery and
//     multicast listener reports through and drops every other packet from or to a link-local
//     address. Pods lose nothing NetworkPolicy could allow: their traffic uses their global
//     addresses.
//
// The IPv6 hole of a dual-stack cluster (Holes.IPv6) is the cluster as nobody hardened it for
// IPv6: kube-router IPv4-only, its IPv6 chains gone, and no link-local rule.

// linkLocalChain is the link-local rule's chain: the product's (package harden, which
// deploy/harden's agent keeps on a node), put here by the same code.
const linkLocalChain = harden.ChainLinkLocal

// setLinkLocalRule puts the link-local rule on the pods' bridge (open false) or removes it
// (open true).
func setLinkLocalRule(ctx context.Context, open bool) error {
	return setRule(ctx, harden.LinkLocal([]string{layout.Bridge}), open)
}

// SetLinkLocalRule puts the link-local rule in place (on) or removes it on the running cluster.
func SetLinkLocalRule(ctx context.Context, on bool) error { return setLinkLocalRule(ctx, !on) }

// setupNetwork6 adds the IPv6 half to what setupNetwork made: the node's address on the
// bridge, IPv6 transit links to the test namespaces, the fake internet's and the fake metadata
// server's IPv6 addresses, and the routes between them and the pods. Addresses skip duplicate
// address detection: nothing else is on these links, and a tentative address cannot be bound.
func (c *Cluster) setupNetwork6(ctx context.Context) error {
	steps := [][]string{
		{"-6", "addr", "add", layout.NodeIP6 + "/64", "dev", layout.Bridge, "nodad"},
	}
	pfx := fmt.Sprintf("/%d", layout.TransitLen6)
	for _, ns := range []struct{ name, veth, hostIP, nsIP string }{
		{layout.InetNetns, layout.InetVethHost, layout.InetHostIP6, layout.InetNsIP6},
		{layout.MetaNetns, layout.MetaVethHost, layout.MetaHostIP6, layout.MetaNsIP6},
	} {
		steps = append(steps,
			[]string{"-6", "addr", "add", ns.hostIP + pfx, "dev", ns.veth, "nodad"},
			[]string{"-n", ns.name, "-6", "addr", "add", ns.nsIP + pfx, "dev", "eth0", "nodad"},
			[]string{"-n", ns.name, "-6", "route", "add", layout.PodCIDR6, "via", ns.hostIP},
		)
	}
	for _, ip := range []string{layout.PublicIP6, layout.ResolverIP6} {
		steps = append(steps, []string{"-n", layout.InetNetns, "-6", "addr", "add", ip + "/128", "dev", "eth0", "nodad"})
	}
	steps = append(steps,
		[]string{"-n", layout.MetaNetns, "-6", "addr", "add", layout.MetadataIP6 + "/128", "dev", "eth0", "nodad"},
		[]string{"-6", "route", "add", layout.FakeInternetCIDR6, "via", layout.InetNsIP6},
		[]string{"-6", "route", "add", layout.MetadataIP6 + "/128", "via", layout.MetaNsIP6},
		[]string{"-6", "route", "add", layout.ServiceCIDR6, "dev", layout.Bridge},
	)
	for _, s := range steps {
		if _, err := run(ctx, "ip", s...); err != nil {
			return fmt.Errorf("network (IPv6): %w", err)
		}
	}
	if err := setSysctl("net.ipv6.conf.all.forwarding", "1"); err != nil {
		return fmt.Errorf("network (IPv6): %w", err)
	}
	return nil
}

// podCIDRs, serviceCIDRs and nodeIPs are the cluster's ranges and the node's addresses, IPv4
// first, with the IPv6 ones on a dual-stack cluster.
func (c *Cluster) podCIDRs() string {
	if c.opts.DualStack {
		return csv(layout.PodCIDR, layout.PodCIDR6)
	}
	return layout.PodCIDR
}

func (c *Cluster) serviceCIDRs() string {
	if c.opts.DualStack {
		return csv(layout.ServiceCIDR, layout.ServiceCIDR6)
	}
	return layout.ServiceCIDR
}

func (c *Cluster) nodeIPs() string {
	if c.opts.DualStack {
		return csv(layout.NodeIP, layout.NodeIP6)
	}
	return layout.NodeIP
}

// governsIPv6 is true when kube-router runs with IPv6: a dual-stack cluster without its IPv6
// hole.
func (c *Cluster) governsIPv6() bool { return c.opts.DualStack && !c.opts.Holes.IPv6 }
