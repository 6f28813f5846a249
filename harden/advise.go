package harden

import (
	"net"
	"slices"
	"strconv"
	"strings"
)

// The probe's routes, as package gate names them (harden_test.go holds the two together: this
// package cannot import gate, whose cluster tests import the test cluster, which uses this).
const (
	routeTCP             = "tcp-public"
	routeDNS             = "udp-dns"
	routeMetadata        = "metadata"
	routeAPIServer       = "apiserver"
	routeLinkLocal       = "ipv6-link-local"
	routeNode            = "node-local"
	routeNodeUnannounced = "node-unannounced"
)

// Advice is one hole af check found open and the fix that fits what it read of the cluster.
type Advice struct {
	// Routes are the probe's routes the hole opens (without their -v6 suffix), and Targets
	// the targets of theirs that got out.
	Routes  []string `json:"routes"`
	Targets []string `json:"targets"`
	Hole    string   `json:"hole"`
	Fix     string   `json:"fix"`
}

// Open is one route that got out, at one target.
type Open struct {
	Route, Target string
}

// What af check knows of the cluster when it advises.
type Seen struct {
	// Enforcer is the enforcer af read (from deploy/harden's reports, else the cluster's
	// pods), Unknown when it could read none.
	Enforcer Enforcer
	// Hardened is true when deploy/harden reports on every node; Bridges the pods' bridges
	// its reports name.
	Hardened bool
	Bridges  []string
	// NodePortFirst and NodePortLast are kube-router's NodePort range as deploy/harden read it
	// (0: unknown; its default, 30000-32767, is assumed).
	NodePortFirst, NodePortLast int
}

// applyHarden is the command that installs deploy/harden.
const applyHarden = "kubectl apply -f deploy/harden/harden.yaml (af's node agent: docs/runtime.md, \"af harden\")"

// Advise returns the holes the open routes show and how to close each, given what was seen.
// A route's -v6 suffix is ignored.
func Advise(open []Open, seen Seen) []Advice {
	type target struct{ route, addr string }
	var left []target
	for _, o := range open {
		left = append(left, target{strings.TrimSuffix(o.Route, "-v6"), o.Target})
	}
	is := func(route string) bool {
		return slices.ContainsFunc(left, func(t target) bool { return t.route == route })
	}
	if len(left) == 0 {
		return nil
	}
	var out []Advice
	// take moves the open targets that match into one advice.
	take := func(match func(route, addr string) bool, hole, fix string) {
		a := Advice{Hole: hole, Fix: fix}
		var kept []target
		for _, t := range left {
			if !match(t.route, t.addr) {
				kept = append(kept, t)
				continue
			}
			if !slices.Contains(a.Routes, t.route) {
				a.Routes = append(a.Routes, t.route)
			}
			a.Targets = append(a.Targets, t.addr)
		}
		left = kept
		if len(a.Routes) > 0 {
			out = append(out, a)
		}
	}
	add := func(routes []string, hole, fix string) {
		take(func(route, _ string) bool { return slices.Contains(routes, route) }, hole, fix)
	}
	already := func(what string) string {
		if seen.Hardened {
			return " deploy/harden reports on every node yet this is open: " + what
		}
		return ""
	}
	// Everything off the cluster open: no enforcer governs these pods.
	if is(routeTCP) && is(routeDNS) {
		add([]string{routeTCP, routeDNS, routeMetadata, routeAPIServer, routeLinkLocal, routeNode, routeNodeUnannounced},
			"no NetworkPolicy enforcer governs the namespace's pods: default-deny is written but nothing enforces it",
			"Run an enforcer: kube-router (--run-firewall), Calico, Cilium, or kube-network-policies; on k3s leave its embedded one on (no --disable-network-policy); on kind, kindnet enforces NetworkPolicy in its recent releases. Then run af check again.")
	}
	switch seen.Enforcer {
	case KubeRouter:
		first, last := seen.NodePortFirst, seen.NodePortLast
		if first == 0 {
			first, last = 30000, 32767
		}
		take(func(route, addr string) bool {
			return route == routeNodeUnannounced || (route == routeNode && portIn(addr, first, last))
		},
			"kube-router returns its NodePort range (--service-node-port-range, 30000-32767 unless set) to the node's own addresses ahead of the pods' rules, so any host listener in that range is open to every pod",
			applyHarden+": AF-NODEPORT refuses pods' connections to the node in that range that no Service rewrote (NodePort Services keep working). Or give kube-router a range nothing on the node listens on."+already("af knows no other rule for it; tell us"))
	case KubeNetworkPolicies, Kindnet:
		add([]string{routeNode, routeNodeUnannounced, routeAPIServer},
			string(seen.Enforcer)+" hooks forwarded traffic only: pods' connections to the node's own addresses (the kubelet, host listeners, the API server when its Service lands on the node) never reach its queue, whatever their policies say",
			applyHarden+": AF-KNP-NODE sends pods' new connections to the node to the same queue, decided by their policies (a pod of a namespace without policies still reaches the node)."+already("is the enforcer reading its queue?"))
	}
	bridges := "the pods' bridge"
	if len(seen.Bridges) > 0 {
		bridges = strings.Join(seen.Bridges, ", ")
	}
	add([]string{routeLinkLocal},
		"pods have IPv6 on a shared segment ("+bridges+") and their fe80:: addresses are not among their pod IPs, so no enforcer's pod rules match their link-local traffic",
		applyHarden+": AF-LINK-LOCAL drops pods' link-local and multicast traffic on the bridge but neighbour discovery. Or turn IPv6 off in pods (the CNI tuning plugin: net.ipv6.conf.all.disable_ipv6=1)."+
			already("its reports name no bridge for these pods (a CNI without one): turn IPv6 off in pods"))
	add([]string{routeNode, routeNodeUnannounced},
		"pods reach the node's own addresses past their policies",
		"The enforcer leaves pods' traffic to their own node to itself. Calico: a HostEndpoint for each node with a policy for pods' traffic to the host (mind its failsafe ports); Cilium: its host firewall. kube-router and kube-network-policies: "+applyHarden+".")
	add([]string{routeAPIServer},
		"pods reach the API server past their policies",
		"The API server's Service lands on an address the enforcer does not govern for pods (often the node's own). Find which: af check -o json names the target; then a host rule as deploy/harden puts for kube-network-policies.")
	add([]string{routeMetadata},
		"pods reach the metadata address past their policies",
		"A node-local metadata proxy or a route the enforcer does not see answers it; block 169.254.169.254 for pods at the node or the cloud's network (IMDSv2 hop limit 1 on AWS).")
	// What is left: routes af has no advice for.
	take(func(string, string) bool { return true },
		"open routes af knows no cause for on this enforcer",
		"Read each route's target and detail (af check -o json) and the enforcer's documentation on traffic it exempts.")
	return out
}

// portIn is true when addr ("host:port", "host:port/udp") has a port in first-last.
func portIn(addr string, first, last int) bool {
	addr, _, _ = strings.Cut(addr, "/")
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	n, err := strconv.Atoi(p)
	return err == nil && n >= first && n <= last
}
