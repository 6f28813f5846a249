package kubernetes

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/manifest"
)

// clusterRanges are the cluster's own address ranges, which the sidecar must never reach
// whatever the manifest says: every node's pod ranges and addresses, and the Service ranges.
type clusterRanges struct {
	Prefixes []netip.Prefix
	// Complete is false when a part could not be read (the reasons are in Gaps).
	Complete bool
	Gaps     []string
}

// Strings returns the ranges as the sidecar's configuration writes them.
func (c clusterRanges) Strings() []string {
	out := make([]string, 0, len(c.Prefixes))
	for _, p := range c.Prefixes {
		out = append(out, p.String())
	}
	return out
}

// discoverRanges reads the cluster's ranges:
//   - pods: each node's spec.podCIDRs (spec.podCIDR on old clusters);
//   - nodes: each node's InternalIP and ExternalIP, as single addresses;
//   - Services: the ServiceCIDR objects (networking.k8s.io/v1, Kubernetes 1.33 and later); where
//     they cannot be listed, the /12 (IPv6: /108) around the API server's Service address. That
//     is exact, not a guess: kube-apiserver refuses a Service range wider than /12 (IPv6 /108),
//     and a range holds its first address, which the kubernetes Service takes, so any allowed
//     range lies inside the /12 around that address;
//   - extra: what the operator names in AF_CLUSTER_CIDRS (CNIs with their own IPAM, such as
//     Calico's IP pools, leave spec.podCIDRs empty).
func (r *Runtime) discoverRanges(ctx context.Context, t *target) clusterRanges {
	out := clusterRanges{Complete: true}
	seen := map[netip.Prefix]bool{}
	add := func(p netip.Prefix) {
		p = p.Masked()
		if p.IsValid() && !seen[p] {
			seen[p] = true
			out.Prefixes = append(out.Prefixes, p)
		}
	}
	gap := func(format string, args ...any) {
		out.Complete = false
		out.Gaps = append(out.Gaps, fmt.Sprintf(format, args...))
	}
	for _, s := range r.opts.ClusterCIDRs {
		add(s)
	}

	podRanges := 0
	var cont string
	for {
		nodes, err := t.c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 500, Continue: cont})
		if err != nil {
			gap("the nodes could not be listed (%v), so their pod ranges and addresses are unknown", shortAPIError(err))
			break
		}
		for _, n := range nodes.Items {
			cidrs := n.Spec.PodCIDRs
			if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
				cidrs = []string{n.Spec.PodCIDR}
			}
			for _, c := range cidrs {
				if p, err := netip.ParsePrefix(c); err == nil {
					add(p)
					podRanges++
				}
			}
			for _, a := range n.Status.Addresses {
				if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
					continue
				}
				if ip, err := netip.ParseAddr(a.Address); err == nil {
					add(netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
				}
			}
		}
		if cont = nodes.Continue; cont == "" {
			if podRanges == 0 && len(r.opts.ClusterCIDRs) == 0 {
				gap("no node has spec.podCIDRs (the CNI allocates pod addresses itself), so the pod ranges are unknown: name them in AF_CLUSTER_CIDRS")
			}
			break
		}
	}

	services := 0
	if list, err := t.c.cs.NetworkingV1().ServiceCIDRs().List(ctx, metav1.ListOptions{}); err == nil {
		for _, sc := range list.Items {
			for _, c := range sc.Spec.CIDRs {
				if p, err := netip.ParsePrefix(c); err == nil {
					add(p)
					services++
				}
			}
		}
	}
	if services == 0 {
		svc, err := t.c.cs.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		switch {
		case err != nil:
			gap("neither the ServiceCIDRs nor the kubernetes Service could be read (%v), so the Service range is unknown", shortAPIError(err))
		default:
			for _, ip := range append([]string{svc.Spec.ClusterIP}, svc.Spec.ClusterIPs...) {
				a, err := netip.ParseAddr(ip)
				if err != nil {
					continue
				}
				bits := 12
				if a.Is6() {
					bits = 108
				}
				add(netip.PrefixFrom(a, bits))
				services++
			}
			if services == 0 {
				gap("the kubernetes Service has no cluster address, so the Service range is unknown")
			}
		}
	}
	sort.Slice(out.Prefixes, func(i, j int) bool {
		a, b := out.Prefixes[i], out.Prefixes[j]
		if a.Addr() != b.Addr() {
			return a.Addr().Less(b.Addr())
		}
		return a.Bits() < b.Bits()
	})
	return out
}

func shortAPIError(err error) string {
	if apierrors.IsForbidden(err) {
		return "forbidden"
	}
	return err.Error()
}

// refuseUnknownRanges refuses a manifest with a cidr allow rule when the cluster's ranges are
// not all known: without them af cannot keep that rule from opening the cluster's inside.
func refuseUnknownRanges(m *manifest.Manifest, ranges clusterRanges) error {
	if ranges.Complete {
		return nil
	}
	var rules []string
	for i, r := range m.Egress.Rules {
		if r.CIDR != "" && r.Mode == "allow" {
			rules = append(rules, fmt.Sprintf("egress.rules[%d] (%s)", i, r.CIDR))
		}
	}
	if len(rules) == 0 {
		return nil
	}
	return failure.Newf(failure.ClusterRangesUnknown, "%s would open addresses to the sidecar, and the cluster's own ranges are not all known: %s", strings.Join(rules, ", "), strings.Join(ranges.Gaps, "; ")).
		WithHint("Let af's identity list nodes and servicecidrs (networking.k8s.io), or name the pod, Service and node ranges in AF_CLUSTER_CIDRS, or remove the cidr rule.")
}

// ruleBlock is the ipBlock of one cidr allow rule: the rule's range less every cluster range
// inside it. ok is false when a cluster range holds the whole rule: it opens nothing.
func ruleBlock(cidr string, cluster []netip.Prefix) (cidrOut string, except []string, ok bool) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return "", nil, false
	}
	p = p.Masked()
	for _, c := range cluster {
		if c.Addr().Is4() != p.Addr().Is4() || !c.Overlaps(p) {
			continue
		}
		if c.Bits() <= p.Bits() {
			return "", nil, false // the cluster range holds the whole rule
		}
		if !heldByAnother(c, cluster) {
			except = append(except, c.String())
		}
	}
	return p.String(), except, true
}

// heldByAnother reports whether a wider range of cluster holds c.
func heldByAnother(c netip.Prefix, cluster []netip.Prefix) bool {
	for _, o := range cluster {
		if o.Bits() < c.Bits() && o.Contains(c.Addr()) {
			return true
		}
	}
	return false
}

// outsidePrivate returns the ranges of family v4 (or v6) that the private ranges do not already
// hold: they join the except list of the sidecar's public egress rule (a node's public
// address, a public pod range).
func outsidePrivate(cluster []netip.Prefix, private []string, v4 bool) []string {
	var out []string
	for _, c := range cluster {
		if c.Addr().Is4() != v4 {
			continue
		}
		inside := false
		for _, s := range private {
			if p := netip.MustParsePrefix(s); p.Bits() <= c.Bits() && p.Contains(c.Addr()) {
				inside = true
				break
			}
		}
		if !inside {
			out = append(out, c.String())
		}
	}
	return out
}

func clusterStrings(ps []netip.Prefix) []string { return clusterRanges{Prefixes: ps}.Strings() }
