package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/antifailure/af/harden"
	"github.com/antifailure/af/testcluster/internal/layout"
)

// Observed is the cluster's containment state read off the machine as it is now, never from
// what was recorded when the cluster started: the negative controls check it before they
// claim anything.
type Observed struct {
	// KubeRouter: kube-router's process is alive and its policy chains are in iptables.
	KubeRouter bool
	// KubeRouterProcess and KubeRouterChains are its two parts.
	KubeRouterProcess, KubeRouterChains bool
	// KubeNetworkPolicies: kube-network-policies' process is alive, its table queues pods'
	// packets and something reads the queue.
	KubeNetworkPolicies bool
	// KubeNetworkPoliciesProcess and KubeNetworkPoliciesRules are its parts (the rules
	// with a reader on the queue).
	KubeNetworkPoliciesProcess, KubeNetworkPoliciesRules bool
	// KubeNetworkPoliciesTable: its nftables table is there (with or without the process).
	KubeNetworkPoliciesTable bool
	// KubeNetworkPoliciesNode: pods' new connections to the node go to kube-network-policies'
	// queue (hardening.go); without it every pod reaches the node.
	KubeNetworkPoliciesNode bool
	// NodePortExemption is the port range kube-router returns ahead of the pods' policies
	// ("30000:32767" open, "32766:32767" narrowed), "" when it has none.
	NodePortExemption string
	// PodIPv6Off: the CNI configuration new pods get turns IPv6 off in them.
	PodIPv6Off bool
	// DualStack: the CNI configuration new pods get gives them an IPv6 address beside the
	// IPv4 one (dualstack.go).
	DualStack bool
	// KubeRouterIPv6: kube-router's process runs with --enable-ipv6 and its chains are in
	// ip6tables.
	KubeRouterIPv6 bool
	// NodePortGuard: pods' connections to host listeners in kube-router's NodePort range are
	// refused ahead of its exemption (deploy/harden's AF-NODEPORT, jumped to from INPUT).
	NodePortGuard bool
	// LinkLocalRule: pods' link-local traffic beyond neighbour discovery is dropped, to the
	// node and between pods (dualstack.go's AF-LINK-LOCAL).
	LinkLocalRule bool
	// Cilium: cilium-agent's process is alive and its datapath is attached (its programs
	// pinned for cilium_host); CiliumProcess and CiliumDatapath are the two parts.
	Cilium, CiliumProcess, CiliumDatapath bool
	// CiliumIPv4Only: the agent runs with IPv6 off, so its datapath drops every IPv6 frame of
	// a pod (bpf_lxc: DROP_UNKNOWN_L3).
	CiliumIPv4Only bool
}

// IPv6Governed is true when pods' IPv6 is no way out: off in them; on an IPv4-only cluster,
// their link-local segment (all the IPv6 they have) closed by the link-local rule; on a
// dual-stack cluster, governed by kube-router with the link-local rule in place.
func (o Observed) IPv6Governed() bool {
	return o.PodIPv6Off || (o.DualStack && o.KubeRouter && o.KubeRouterIPv6 && o.LinkLocalRule) || (!o.DualStack && o.LinkLocalRule) ||
		(!o.DualStack && o.Cilium && o.CiliumIPv4Only)
}

var exemption = regexp.MustCompile(`KUBE-ROUTER-INPUT .*--dports? (\d+:\d+)`)

// Observe reads the enforcer's process, its iptables rules and the CNI configuration.
func (c *Cluster) Observe(ctx context.Context) (Observed, error) {
	var o Observed
	o.KubeRouterProcess = c.running("kube-router")
	rules, err := saveRules(ctx, "iptables-save", "filter")
	if err != nil {
		return o, fmt.Errorf("reading iptables: %w", err)
	}
	o.KubeRouterChains = strings.Contains(rules, ":KUBE-ROUTER-FORWARD")
	o.KubeRouter = o.KubeRouterProcess && o.KubeRouterChains
	o.KubeNetworkPoliciesProcess = c.running("kube-network-policies")
	o.KubeNetworkPoliciesRules, _ = knpEnforcing(ctx)
	_, o.KubeNetworkPoliciesTable = knpRules(ctx)
	o.KubeNetworkPolicies = o.KubeNetworkPoliciesProcess && o.KubeNetworkPoliciesRules
	o.KubeNetworkPoliciesNode = jumpsFromInput(rules, knpNodeChain) && strings.Contains(rules, "-A "+knpNodeChain+" ") && strings.Contains(rules, "NFQUEUE")
	o.NodePortGuard = jumpsFromInput(rules, harden.ChainNodePort) && strings.Contains(rules, "-A "+harden.ChainNodePort+" ")
	if m := exemption.FindStringSubmatch(rules); m != nil {
		o.NodePortExemption = m[1]
	}
	o.CiliumProcess = c.running("cilium-agent")
	o.CiliumDatapath = pathExists(filepath.Join(ciliumBPFRoot, "cilium", "devices", "cilium_host"))
	o.Cilium = o.CiliumProcess && o.CiliumDatapath
	o.CiliumIPv4Only = o.CiliumProcess && c.processHasArg("cilium-agent", "--enable-ipv6=false")
	conf, err := os.ReadFile(filepath.Join(c.configDir(), "cni", "10-af-bridge.conflist"))
	if err != nil && !(os.IsNotExist(err) && (o.CiliumProcess || o.CiliumDatapath)) { // Cilium's agent writes its own
		return o, fmt.Errorf("reading the CNI configuration: %w", err)
	}
	o.PodIPv6Off = strings.Contains(string(conf), `"net.ipv6.conf.all.disable_ipv6": "1"`)
	o.DualStack = strings.Contains(string(conf), `"::/0"`)
	if rules6, err := saveRules(ctx, "ip6tables-save", "filter"); err == nil {
		o.KubeRouterIPv6 = o.KubeRouterProcess && c.processHasArg("kube-router", "--enable-ipv6=true") && strings.Contains(rules6, ":KUBE-ROUTER-FORWARD")
		o.LinkLocalRule = strings.Contains(rules6, "-A INPUT -i "+layout.Bridge+" -j "+linkLocalChain) &&
			strings.Contains(rules6, "-A FORWARD -i "+layout.Bridge+" -j "+linkLocalChain) &&
			strings.Contains(rules6, "-A "+linkLocalChain+" -s fe80::/10")
	}
	return o, nil
}

// jumpsFromInput is true when iptables-save's rules jump to chain from INPUT.
func jumpsFromInput(rules, chain string) bool {
	for _, l := range strings.Split(rules, "\n") {
		if strings.HasPrefix(l, "-A INPUT ") && strings.HasSuffix(strings.TrimSpace(l), "-j "+chain) {
			return true
		}
	}
	return false
}

// Enforcer names the enforcer observed enforcing ("" for none).
func (o Observed) Enforcer() string {
	switch {
	case o.KubeRouter:
		return EnforcerKubeRouter
	case o.KubeNetworkPolicies:
		return EnforcerKubeNetworkPolicies
	case o.Cilium:
		return EnforcerCilium
	}
	return ""
}
