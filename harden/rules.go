package harden

import (
	"fmt"
	"net/netip"
	"strings"
)

// Chains af adds. Each is a chain of the filter table, jumped to first from built-in chains;
// Remove takes out exactly these.
const (
	// ChainLinkLocal drops pods' IPv6 link-local and multicast traffic on a bridge CNI's
	// segment, to the node and between pods, but neighbour discovery: no enforcer matches a
	// pod's fe80:: address, which is not among its pod IPs.
	ChainLinkLocal = "AF-LINK-LOCAL"
	// ChainKNPNode sends pods' new connections to the node's own addresses to
	// kube-network-policies' queue: its rules hook forwarded traffic only, so the node (the
	// kubelet, host listeners, the API server's Service when it lands on the node) is open to
	// every pod whatever its policies say.
	ChainKNPNode = "AF-KNP-NODE"
	// ChainNodePort refuses pods' new connections to the node's own addresses in
	// kube-router's NodePort range that no Service rewrote: kube-router returns that range to
	// the node ahead of the pods' own rules, which opens any host listener in it to every pod.
	ChainNodePort = "AF-NODEPORT"
)

// Chains are every chain af may add, in the order Remove takes them out.
var Chains = []string{ChainLinkLocal, ChainKNPNode, ChainNodePort}

// Rule is one chain af puts on a node and keeps there.
type Rule struct {
	// Chain is the chain's name; Tool the program that holds it (iptables or ip6tables).
	Chain, Tool string
	// Rules are the chain's rules, each after `-A Chain`.
	Rules [][]string
	// Jumps are the jumps to it, each a built-in chain and the match before `-j Chain`; each
	// is kept first in its chain.
	Jumps [][]string
	// Closes names the probe's routes it closes; Why says how, for the report and the docs.
	Closes []string
	Why    string
	// Sysctls are set to their values before the rule is put in place (path under
	// /proc/sys, value).
	Sysctls map[string]string
}

// comment is the comment every rule af adds carries.
func comment(what string) []string {
	return []string{"-m", "comment", "--comment", "af harden: " + what}
}

// LinkLocal is ChainLinkLocal for pods' traffic that comes in from each of bridges.
func LinkLocal(bridges []string) Rule {
	var rules [][]string
	// Neighbour discovery (router and neighbour solicitation and advertisement) and multicast
	// listener queries and reports: what a pod's IPv6 needs to reach its gateway.
	for _, typ := range []string{"133", "134", "135", "136", "130", "131", "132", "143"} {
		rules = append(rules, []string{"-p", "ipv6-icmp", "-m", "icmp6", "--icmpv6-type", typ, "-j", "RETURN"})
	}
	rules = append(rules,
		append(append([]string{"-s", "fe80::/10"}, comment("pods link-local traffic, which no enforcer matches by pod IP")...), "-j", "DROP"),
		append(append([]string{"-d", "fe80::/10"}, comment("pods link-local traffic, which no enforcer matches by pod IP")...), "-j", "DROP"),
		append(append([]string{"-d", "ff00::/8"}, comment("pods multicast beyond neighbour discovery")...), "-j", "DROP"),
	)
	var jumps [][]string
	for _, b := range bridges {
		jumps = append(jumps, []string{"INPUT", "-i", b}, []string{"FORWARD", "-i", b})
	}
	return Rule{
		Chain: ChainLinkLocal, Tool: "ip6tables", Rules: rules, Jumps: jumps,
		Closes:  []string{"ipv6-link-local"},
		Why:     "pods' IPv6 link-local and multicast traffic on the bridge (" + strings.Join(bridges, ", ") + ") dropped but neighbour discovery",
		Sysctls: map[string]string{"net/bridge/bridge-nf-call-ip6tables": "1"},
	}
}

// KNPNode is ChainKNPNode in tool (iptables for IPv4 pod ranges, ip6tables for IPv6 ones):
// new connections from podCIDRs to the node, not on loopback, to queue.
func KNPNode(tool string, podCIDRs []string, queue int) Rule {
	var rules [][]string
	for _, c := range podCIDRs {
		rules = append(rules, append(append([]string{"-s", c, "-m", "conntrack", "--ctstate", "NEW"},
			comment("pods new connections to the node, decided by kube-network-policies")...),
			"-j", "NFQUEUE", "--queue-num", fmt.Sprint(queue)))
	}
	return Rule{
		Chain: ChainKNPNode, Tool: tool, Rules: rules, Jumps: [][]string{{"INPUT", "!", "-i", "lo"}},
		Closes: []string{"node-local", "node-unannounced", "apiserver"},
		Why:    fmt.Sprintf("pods' (%s) new connections to the node sent to kube-network-policies' queue %d, which decides them by their policies", strings.Join(podCIDRs, ", "), queue),
	}
}

// NodePort is ChainNodePort in tool: new connections from podCIDRs to the node's own
// addresses on ports first-last that no Service rewrote (kube-proxy's NodePorts are rewritten
// before they get here), refused.
func NodePort(tool string, podCIDRs []string, first, last int) Rule {
	ports := fmt.Sprintf("%d:%d", first, last)
	// Refused with ICMP "administratively prohibited", never a TCP reset: a reset is what the
	// node's own stack answers on a closed port, and af's probe reads a reset in the range as
	// the range reaching the node (gate/unannounced.go).
	with := "icmp-admin-prohibited"
	if tool == "ip6tables" {
		with = "icmp6-adm-prohibited"
	}
	var rules [][]string
	for _, c := range podCIDRs {
		for _, proto := range []string{"tcp", "udp"} {
			rules = append(rules, append(append([]string{"-s", c, "-p", proto, "-m", "multiport", "--dports", ports,
				"-m", "conntrack", "--ctstate", "NEW", "-m", "conntrack", "!", "--ctstate", "DNAT"},
				comment("pods connections to a host listener in the NodePort range of kube-router")...),
				"-j", "REJECT", "--reject-with", with))
		}
	}
	return Rule{
		Chain: ChainNodePort, Tool: tool, Rules: rules, Jumps: [][]string{{"INPUT", "!", "-i", "lo"}},
		Closes: []string{"node-unannounced"},
		Why:    fmt.Sprintf("pods' (%s) connections to host listeners on the node's ports %d-%d refused, NodePort Services (rewritten by kube-proxy) untouched", strings.Join(podCIDRs, ", "), first, last),
	}
}

// Node is what Plan needs to know of a node.
type Node struct {
	// Found is what Detect read of its packet filter.
	Found Found
	// PodCIDRs are the node's pod ranges (Node.spec.podCIDRs).
	PodCIDRs []string
	// Bridges are the bridges that carry pods' traffic (a bridge CNI's, e.g. cni0); none on a
	// CNI that gives each pod its own link.
	Bridges []string
}

// Plan is the rules that close the holes af knows of n's enforcer, and notes on what it does
// not do and why.
func Plan(n Node) (rules []Rule, notes []string) {
	v4, v6 := splitFamilies(n.PodCIDRs)
	switch {
	case n.Found.Enforcer == Calico || n.Found.Enforcer == Cilium:
		// Each pod has its own link, routed by the enforcer's datapath: a bridge holding an
		// address in the pods' range (left by another CNI) carries none of their traffic.
		if len(n.Bridges) > 0 {
			notes = append(notes, fmt.Sprintf("%s routes each pod through its own link: no link-local rule on %s (af check tries the segment)", n.Found.Enforcer, strings.Join(n.Bridges, ", ")))
		}
	case len(n.Bridges) > 0:
		rules = append(rules, LinkLocal(n.Bridges))
	default:
		notes = append(notes, "no bridge carries the pods' range: no link-local rule (af check tries the segment)")
	}
	byFamily := func(make func(tool string, cidrs []string) Rule) {
		if len(v4) > 0 {
			rules = append(rules, make("iptables", v4))
		}
		if len(v6) > 0 {
			rules = append(rules, make("ip6tables", v6))
		}
	}
	switch n.Found.Enforcer {
	case KubeRouter:
		if n.Found.NodePortFirst == 0 {
			notes = append(notes, "kube-router returns no NodePort range to the node: no NodePort rule")
			break
		}
		if len(n.PodCIDRs) == 0 {
			notes = append(notes, "the node has no pod range (spec.podCIDRs): no NodePort rule")
			break
		}
		byFamily(func(tool string, cidrs []string) Rule {
			return NodePort(tool, cidrs, n.Found.NodePortFirst, n.Found.NodePortLast)
		})
	case KubeNetworkPolicies, Kindnet:
		if n.Found.Queue < 0 {
			notes = append(notes, "no process reads a netfilter queue: the node rule would drop every pod's connection to the node; none added until the enforcer runs")
			break
		}
		if len(n.PodCIDRs) == 0 {
			notes = append(notes, "the node has no pod range (spec.podCIDRs): no node rule")
			break
		}
		byFamily(func(tool string, cidrs []string) Rule { return KNPNode(tool, cidrs, n.Found.Queue) })
	case Calico, Cilium:
		notes = append(notes, string(n.Found.Enforcer)+": af knows no hole of it to close here; af check says what is open")
	default:
		return nil, []string{"no enforcer af knows runs on this node (no kube-router, kube-network-policies, kindnet, Calico or Cilium rules): nothing done; without an enforcer NetworkPolicies are not enforced at all"}
	}
	return rules, notes
}

// splitFamilies splits CIDRs into IPv4 and IPv6 ones, dropping what does not parse.
func splitFamilies(cidrs []string) (v4, v6 []string) {
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(strings.TrimSpace(c))
		if err != nil {
			continue
		}
		if p.Addr().Is4() {
			v4 = append(v4, p.Masked().String())
		} else {
			v6 = append(v6, p.Masked().String())
		}
	}
	return v4, v6
}
