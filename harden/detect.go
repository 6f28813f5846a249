package harden

import (
	"regexp"
	"strconv"
	"strings"
)

// Enforcer names a NetworkPolicy enforcer af knows by its rules.
type Enforcer string

// The enforcers Detect tells apart.
const (
	Unknown             Enforcer = ""
	KubeRouter          Enforcer = "kube-router"
	KubeNetworkPolicies Enforcer = "kube-network-policies"
	Kindnet             Enforcer = "kindnet"
	Calico              Enforcer = "calico"
	Cilium              Enforcer = "cilium"
)

// Tables is what a node's packet filter shows: iptables-save of the filter table for each
// family, `nft list tables`, and /proc/net/netfilter/nfnetlink_queue (the queues a process
// reads). Any may be empty when it could not be read.
type Tables struct {
	IPv4, IPv6, NFT, Queues string
}

// Found is what Detect read.
type Found struct {
	Enforcer Enforcer `json:"enforcer"`
	// Evidence says what it was told by.
	Evidence string `json:"evidence"`
	// NodePortFirst and NodePortLast are the range kube-router returns to the node ahead of
	// the pods' rules (0 when none).
	NodePortFirst int `json:"node_port_first,omitempty"`
	NodePortLast  int `json:"node_port_last,omitempty"`
	// Queue is the netfilter queue a process reads (kube-network-policies'), -1 for none.
	Queue int `json:"queue"`
	// IPv6 is true when the enforcer's rules are in ip6tables too.
	IPv6 bool `json:"ipv6"`
}

// kubeRouterNodePorts is kube-router's rule returning the NodePort range to the node.
var kubeRouterNodePorts = regexp.MustCompile(`^-A KUBE-ROUTER-INPUT .*--dst-type LOCAL .*--dports (\d+):(\d+) -j RETURN`)

// Detect reads which enforcer's rules t holds. An enforcer's own rules tell it, never a
// process name: a node may run a binary that enforces nothing.
func Detect(t Tables) Found {
	f := Found{Queue: firstQueue(t.Queues)}
	hasChain := func(rules, prefix string) bool {
		for _, l := range strings.Split(rules, "\n") {
			if strings.HasPrefix(l, ":"+prefix) {
				return true
			}
		}
		return false
	}
	// tableLike is the first nftables table whose name holds part ("" when none).
	tableLike := func(part string) string {
		for _, l := range strings.Split(t.NFT, "\n") {
			if fs := strings.Fields(l); len(fs) == 3 && fs[0] == "table" && strings.Contains(fs[2], part) {
				return fs[2]
			}
		}
		return ""
	}
	hasTable := func(name string) bool { return tableLike(name) != "" }
	switch {
	case hasChain(t.IPv4, "KUBE-ROUTER-INPUT") || hasChain(t.IPv6, "KUBE-ROUTER-INPUT"):
		f.Enforcer, f.Evidence = KubeRouter, "kube-router's chains (KUBE-ROUTER-INPUT, KUBE-ROUTER-FORWARD)"
		f.IPv6 = hasChain(t.IPv6, "KUBE-ROUTER-FORWARD")
		for _, l := range strings.Split(t.IPv4, "\n") {
			if m := kubeRouterNodePorts.FindStringSubmatch(l); m != nil {
				f.NodePortFirst, _ = strconv.Atoi(m[1])
				f.NodePortLast, _ = strconv.Atoi(m[2])
				break
			}
		}
	// kube-network-policies' library keeps one inet table, named by whoever embeds it
	// (kube-network-policies itself; kindnet).
	case hasTable("network-policies"):
		name := tableLike("network-policies")
		f.Enforcer, f.Evidence, f.IPv6 = KubeNetworkPolicies, "nftables table "+name+" (kube-network-policies' library)", true
		if strings.Contains(name, "kindnet") {
			f.Enforcer = Kindnet
		}
	case hasChain(t.IPv4, "cali-") || hasTable("calico"):
		f.Enforcer, f.Evidence = Calico, "Calico's chains (cali-*)"
		f.IPv6 = hasChain(t.IPv6, "cali-")
	case hasChain(t.IPv4, "CILIUM_") || hasTable("cilium"):
		f.Enforcer, f.Evidence = Cilium, "Cilium's chains (CILIUM_*)"
	default:
		f.Evidence = "no chain or table of an enforcer af knows"
	}
	return f
}

// firstQueue is the lowest queue number a process reads in /proc/net/netfilter/nfnetlink_queue
// (its first column), or -1.
func firstQueue(s string) int {
	q := -1
	for _, l := range strings.Split(s, "\n") {
		fs := strings.Fields(l)
		if len(fs) == 0 {
			continue
		}
		if n, err := strconv.Atoi(fs[0]); err == nil && (q < 0 || n < q) {
			q = n
		}
	}
	return q
}
