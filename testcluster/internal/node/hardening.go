package node

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/antifailure/af/harden"
	"github.com/antifailure/af/testcluster/internal/layout"
)

// What an operator does to make this cluster contain af's environments, beyond running an
// enforcer (docs/runtime.md, "What af requires of a cluster"):
//
//   - IPv6 off inside pods. kube-router runs IPv4-only here, and the bridge CNI gives every pod
//     an fe80:: address on its segment that no policy governs. The CNI tuning plugin sets the
//     pod's disable_ipv6 sysctls as the sandbox is made, before any container starts.
//   - The NodePort exemption narrowed. kube-router returns traffic to the node's own
//     addresses on its --service-node-port-range ahead of the pods' own rules, so that
//     NodePorts served on the node work; a host-network listener in that range is then open to
//     every pod, whatever its policies say. With kube-proxy in iptables mode a NodePort is
//     rewritten to its pod before that rule is reached, so the exemption is not needed: it is
//     narrowed to two ports nothing on the node listens on, and the rest of the range falls
//     under the pods' policies (a pod of a namespace without policies still reaches it).
//
// Holes leaves both as kube-router leaves them: the variant the new routes must fail on.
//
// Under kube-network-policies the second hole is wider: its rules hook forwarded traffic only
// (prerouting and postrouting), so a pod's packets to the node's own addresses (the kubelet,
// any host-network listener, and the API server, whose Service lands on the node) never reach
// its queue, whatever the pod's policies say. NetworkPolicy leaves traffic between a pod and
// its own node to the implementation, and this one lets it all through. The operator's fix is
// one rule: pods' new connections to the node's own addresses go to the same queue
// (AF-KNP-NODE in the input hook, as deploy/harden's agent puts it), where kube-network-policies decides them by the pods'
// policies like any other; a pod of a namespace without policies still reaches the node.
// Holes leaves that rule out.
//
// knpNodeChain is that rule's chain: the product's (package harden, which deploy/harden's
// agent keeps on a node), put here by the same code.
const knpNodeChain = harden.ChainKNPNode

// knpNodeRule is the rule: the pods' new connections to the node (not on loopback) to the queue
// kube-network-policies reads.
func knpNodeRule() harden.Rule {
	q, _ := strconv.Atoi(KubeNetworkPoliciesQueue)
	return harden.KNPNode("iptables", []string{layout.PodCIDR}, q)
}

// setKNPNodeRule puts the rule in place (open false) or removes it (open true).
func setKNPNodeRule(ctx context.Context, open bool) error {
	return setRule(ctx, knpNodeRule(), open)
}

// nodeRunner runs the node's programs for package harden: this machine is the node.
type nodeRunner struct{}

func (nodeRunner) Run(ctx context.Context, name string, args ...string) (string, error) {
	return run(ctx, name, args...)
}

// setRule puts one of the product's rules in place (open false) or removes it (open true).
func setRule(ctx context.Context, r harden.Rule, open bool) error {
	if open {
		return harden.Remove(ctx, nodeRunner{}, r.Tool, r.Chain)
	}
	return harden.Apply(ctx, nodeRunner{}, r)
}

// Node port ranges kube-router exempts: its default, and the narrowed one.
const (
	NodePortRange       = "30000-32767"
	NarrowNodePortRange = "32766-32767"
)

func (c *Cluster) nodePortRange() string {
	if c.opts.Holes.Node {
		return NodePortRange
	}
	return NarrowNodePortRange
}

// cniTuning is the tuning plugin's entry that turns IPv6 off in every pod, or "" with Holes.
//
// A dual-stack cluster's pods keep IPv6: it is theirs by design (dualstack.go).
func (c *Cluster) cniTuning() string {
	if c.opts.Holes.IPv6 || c.opts.DualStack {
		return ""
	}
	return `    {
      "type": "tuning",
      "sysctl": {"net.ipv6.conf.all.disable_ipv6": "1", "net.ipv6.conf.default.disable_ipv6": "1"}
    },
`
}

// SetHoles opens (true) or closes (false) the holes named on the running cluster, leaving the
// other as it is: the CNI configuration new pods get, the node's (kube-router's NodePort
// exemption, kube-router restarted on clean chains; or the rule that queues pods' connections
// to the node to kube-network-policies), and the cluster's own pods (CoreDNS, Traefik), which
// are made anew under the new configuration.
func (c *Cluster) SetHoles(ctx context.Context, which Holes, open bool) error {
	st, err := ReadState(c.dirs)
	if err != nil {
		return err
	}
	if st.Enforcer == EnforcerNone {
		return fmt.Errorf("the holes are an enforcer's; this cluster runs none")
	}
	holes := st.OpenHoles()
	// On a dual-stack cluster the IPv6 hole is kube-router's: IPv4-only, no link-local rule.
	ipv6Changed := which.IPv6 && holes.IPv6 != open && st.DualStack
	if which.IPv6 {
		holes.IPv6 = open
	}
	nodeChanged := which.Node && holes.Node != open
	if which.Node {
		holes.Node = open
	}
	if ipv6Changed && st.Enforcer != EnforcerKubeRouter {
		return fmt.Errorf("a dual-stack cluster's IPv6 hole is kube-router's; this one runs %s", st.Enforcer)
	}
	c.opts.Holes, c.opts.Ingress, c.opts.Enforcer, c.opts.DualStack = holes, st.Ingress, st.Enforcer, st.DualStack
	if err := c.writeCNIConfig(); err != nil {
		return err
	}
	if ipv6Changed {
		if err := setLinkLocalRule(ctx, holes.IPv6); err != nil {
			return err
		}
	}
	switch {
	case !nodeChanged && !ipv6Changed:
	case st.Enforcer == EnforcerKubeRouter:
		c.bins.kubeRouter = filepath.Join(c.dirs.Bin(), "kube-router") // linked there at up
		if err := c.restartKubeRouter(ctx); err != nil {
			return err
		}
	case st.Enforcer == EnforcerKubeNetworkPolicies:
		if err := setKNPNodeRule(ctx, holes.Node); err != nil {
			return err
		}
	}
	// containerd reads the CNI directory again when it changes; give it a moment, then make
	// the cluster's pods anew.
	time.Sleep(2 * time.Second)
	if _, err := c.Kubectl(ctx, "", "-n", "kube-system", "delete", "pods", "-l", "k8s-app=kube-dns", "--wait=true"); err != nil {
		return fmt.Errorf("recreate CoreDNS: %w", err)
	}
	if st.Ingress {
		if _, err := c.Kubectl(ctx, "", "-n", IngressNamespace, "delete", "pods", "--all", "--wait=true"); err != nil {
			return fmt.Errorf("recreate Traefik: %w", err)
		}
	}
	if err := c.waitAddons(ctx); err != nil {
		return err
	}
	st.setHoles(holes)
	return writeState(c.dirs, st)
}

// removeKubeRouterIPv6 removes kube-router's ip6tables chains (and the jumps to them) and its
// IPv6 ipsets, leaving kube-proxy's and everything else alone.
func removeKubeRouterIPv6(ctx context.Context) error {
	isKubeRouters := func(chain string) bool {
		return strings.HasPrefix(chain, "KUBE-ROUTER-") || strings.HasPrefix(chain, "KUBE-POD-FW-") || strings.HasPrefix(chain, "KUBE-NWPLCY-")
	}
	if err := removeTableChainsOf(ctx, "ip6tables", "filter", isKubeRouters); err != nil {
		return err
	}
	out, err := run(ctx, "ipset", "list", "-n")
	if err != nil {
		return nil
	}
	for _, n := range strings.Fields(out) {
		if strings.HasPrefix(n, "inet6:KUBE-") {
			if _, err := run(ctx, "ipset", "destroy", n); err != nil {
				return fmt.Errorf("remove kube-router's IPv6 ipset %s: %w", n, err)
			}
		}
	}
	return nil
}

// restartKubeRouter stops kube-router, empties its input chain (it keeps a rule for each range
// it was ever given), and starts it with this cluster's options.
func (c *Cluster) restartKubeRouter(ctx context.Context) error {
	c.stop("kube-router", 10*time.Second)
	if _, err := run(ctx, "iptables", "-F", "KUBE-ROUTER-INPUT"); err != nil && !strings.Contains(err.Error(), "No chain") {
		return fmt.Errorf("flush KUBE-ROUTER-INPUT: %w", err)
	}
	// kube-router keeps its IPv6 chains and ipsets when it is started again without IPv6:
	// they would go on enforcing. Remove them, as a cluster that never ran it with IPv6 has none.
	if err := removeKubeRouterIPv6(ctx); err != nil {
		return err
	}
	if err := c.start(c.kubeRouter()); err != nil {
		return err
	}
	if err := c.waitKubeRouterChains(ctx); err != nil {
		return err
	}
	return c.waitFor(ctx, "kube-router's NodePort exemption for "+c.nodePortRange(), "kube-router", 2*time.Minute, func(ctx context.Context) error {
		out, err := saveRules(ctx, "iptables-save", "filter")
		if err != nil {
			return err
		}
		if !strings.Contains(out, strings.Replace(c.nodePortRange(), "-", ":", 1)) {
			return fmt.Errorf("no exemption rule for %s yet", c.nodePortRange())
		}
		return nil
	})
}

// StopKubeRouter sends the running kube-router sig and returns when the process is gone,
// its rules left as its shutdown leaves them (nothing is flushed here).
func (c *Cluster) StopKubeRouter(ctx context.Context, sig syscall.Signal) error {
	return c.signalEnforcer(ctx, EnforcerKubeRouter, sig)
}

// StartKubeRouter starts kube-router again on the running cluster, with the options it was
// brought up with (its NodePort range as the holes now stand), and waits for its chains.
func (c *Cluster) StartKubeRouter(ctx context.Context) error {
	st, err := c.stateOf(EnforcerKubeRouter)
	if err != nil {
		return err
	}
	c.opts.Holes, c.opts.DualStack = st.OpenHoles(), st.DualStack
	c.bins.kubeRouter = filepath.Join(c.dirs.Bin(), "kube-router")
	if err := c.start(c.kubeRouter()); err != nil {
		return err
	}
	return c.waitKubeRouterChains(ctx)
}

// waitKubeRouterChains waits until kube-router's firewall chains are in iptables.
func (c *Cluster) waitKubeRouterChains(ctx context.Context) error {
	return c.waitFor(ctx, "kube-router's firewall chains", "kube-router", 2*time.Minute, func(ctx context.Context) error {
		out, err := saveRules(ctx, "iptables-save", "filter")
		if err != nil {
			return err
		}
		if !strings.Contains(out, ":KUBE-ROUTER-FORWARD") {
			return fmt.Errorf("no KUBE-ROUTER-FORWARD chain yet")
		}
		if c.governsIPv6() {
			out, err := saveRules(ctx, "ip6tables-save", "filter")
			if err != nil {
				return err
			}
			if !strings.Contains(out, ":KUBE-ROUTER-FORWARD") {
				return fmt.Errorf("no KUBE-ROUTER-FORWARD chain in ip6tables yet")
			}
		}
		return nil
	})
}

// Enforcer is the enforcer this cluster was brought up with.
func (c *Cluster) Enforcer() (string, error) {
	st, err := ReadState(c.dirs)
	if err != nil {
		return "", err
	}
	return st.Enforcer, nil
}
