package kubernetes

// The environment's NetworkPolicies: deny all, then exactly the routes its pods may take.

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/antifailure/af/manifest"
)

// privateV4 are the ranges the sidecar's egress policy excludes besides link-local.
var privateV4 = []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"}

// privateV6: unique local, link-local, and the IPv4-mapped range.
var privateV6 = []string{"fc00::/7", "fe80::/10", "::ffff:0:0/96"}

// policies returns the environment's NetworkPolicies, deny-all first.
func (e *env) policies() []*networkingv1.NetworkPolicy {
	both := []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
	var sidecarPorts []networkingv1.NetworkPolicyPort
	for _, p := range SidecarPorts {
		sidecarPorts = append(sidecarPorts, npPort(p.Protocol, p.Port))
	}
	services := metav1.LabelSelector{MatchLabels: map[string]string{LabelRole: RoleService}}
	sidecar := metav1.LabelSelector{MatchLabels: map[string]string{LabelRole: RoleSidecar}}

	out := []*networkingv1.NetworkPolicy{
		{
			ObjectMeta: meta(PolicyDenyAll, e.Namespace, e.labels("policy", "")),
			Spec:       networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{}, PolicyTypes: both},
		},
		{
			// Services reach the sidecar on its ports, and each other; they accept only from
			// each other. Pod selectors only: a namespace selector would open the environment
			// to other namespaces.
			ObjectMeta: meta(PolicyServices, e.Namespace, e.labels("policy", "")),
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: services,
				PolicyTypes: both,
				Egress: []networkingv1.NetworkPolicyEgressRule{
					{To: []networkingv1.NetworkPolicyPeer{{PodSelector: &sidecar}}, Ports: sidecarPorts},
					{To: []networkingv1.NetworkPolicyPeer{{PodSelector: &services}}},
				},
				Ingress: []networkingv1.NetworkPolicyIngressRule{
					{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &services}}},
				},
			},
		},
		{
			ObjectMeta: meta(PolicySidecarIn, e.Namespace, e.labels("policy", "")),
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: sidecar,
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress: []networkingv1.NetworkPolicyIngressRule{
					{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &services}}, Ports: sidecarPorts},
				},
			},
		},
		e.sidecarEgress(),
	}
	if e.IngressFrom != nil {
		var ports []networkingv1.NetworkPolicyPort
		for _, name := range slices.Sorted(maps.Keys(e.Manifest.Services)) {
			s := e.Manifest.Services[name]
			if manifest.KindOf(s) == "web" && s.Port > 0 {
				ports = append(ports, npPort(corev1.ProtocolTCP, int32(s.Port)))
			}
		}
		out = append(out, &networkingv1.NetworkPolicy{
			ObjectMeta: meta(PolicyIngressCtl, e.Namespace, e.labels("policy", "")),
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelRole: RoleService, "dev.antifailure.kind": "web"}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From: []networkingv1.NetworkPolicyPeer{{
						NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": e.IngressFrom.Namespace}},
						PodSelector:       &metav1.LabelSelector{MatchLabels: e.IngressFrom.Labels},
					}},
					Ports: ports,
				}},
			},
		})
	}
	return out
}

// sidecarEgress lets the sidecar out to public addresses, to the cluster resolver on 53, and
// to the private ranges the manifest's cidr allow rules name (a database the environment must
// reach), and nowhere else: never link-local (metadata), never the other private ranges.
func (e *env) sidecarEgress() *networkingv1.NetworkPolicy {
	rules := []networkingv1.NetworkPolicyEgressRule{
		{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: append(append([]string(nil), privateV4...), outsidePrivate(e.Cluster, privateV4, true)...)}}}},
	}
	if e.IPv6 {
		rules = append(rules, networkingv1.NetworkPolicyEgressRule{
			To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "::/0", Except: append(append([]string(nil), privateV6...), outsidePrivate(e.Cluster, privateV6, false)...)}}},
		})
	}
	rules = append(rules, networkingv1.NetworkPolicyEgressRule{
		To: []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": e.Resolver.Namespace}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: e.Resolver.Selector},
		}},
		Ports: []networkingv1.NetworkPolicyPort{npPort(corev1.ProtocolUDP, 53), npPort(corev1.ProtocolTCP, 53)},
	})
	for _, r := range e.Manifest.Egress.Rules {
		if r.CIDR == "" || r.Mode != "allow" {
			continue
		}
		// The rule's range less the cluster's own: a cidr rule never opens the cluster.
		cidr, except, ok := ruleBlock(r.CIDR, e.Cluster)
		if !ok {
			continue
		}
		rule := networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: cidr, Except: except}}}}
		for _, p := range r.Ports {
			rule.Ports = append(rule.Ports, npPort(corev1.ProtocolTCP, int32(p)))
		}
		rules = append(rules, rule)
	}
	types := []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	return &networkingv1.NetworkPolicy{
		ObjectMeta: meta(PolicySidecarOut, e.Namespace, e.labels("policy", "")),
		Spec:       networkingv1.NetworkPolicySpec{PodSelector: *roleSelector(RoleSidecar), PolicyTypes: types, Egress: rules},
	}
}

func npPort(proto corev1.Protocol, port int32) networkingv1.NetworkPolicyPort {
	p := intstr.FromInt32(port)
	return networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &p}
}
