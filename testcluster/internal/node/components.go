package node

import (
	"fmt"
	"net"
	"path/filepath"

	"github.com/antifailure/af/testcluster/internal/layout"
)

// The processes of the cluster, in start order. Each is started by Up and
// stopped by Down; their names are their pid and log file names.

func (c *Cluster) fakeHosts() []process {
	ps := []process{
		{name: "fake-internet", path: c.bins.aftool, argv: []string{"aftool", "fake-internet"}, netns: layout.InetNetns},
		{name: "fake-metadata", path: c.bins.aftool, argv: []string{"aftool", "fake-metadata"}, netns: layout.MetaNetns},
		// A host-network listener on the node inside the NodePort range, as a host-network
		// ingress controller or agent would be: what the node route and no-node-access try.
		{name: "node-service", path: c.bins.aftool, argv: []string{"aftool", "serve",
			"-tcp", net.JoinHostPort(layout.NodeIP, layout.NodeServicePort), "-udp", net.JoinHostPort(layout.NodeIP, layout.NodeServicePort)}},
	}
	if c.opts.DualStack {
		// The same hosts over IPv6, and the node's listener on its IPv6 address.
		ps[0].argv = append(ps[0].argv, "-ipv6")
		ps[1].argv = append(ps[1].argv, "-ipv6")
		ps = append(ps, process{name: "node-service-v6", path: c.bins.aftool, argv: []string{"aftool", "serve",
			"-tcp", net.JoinHostPort(layout.NodeIP6, layout.NodeServicePort), "-udp", net.JoinHostPort(layout.NodeIP6, layout.NodeServicePort)}})
	}
	return ps
}

func (c *Cluster) etcd() process {
	return process{name: "etcd", path: "/usr/bin/etcd", argv: append([]string{"etcd"}, joinFlags(
		"name", "af",
		"data-dir", filepath.Join(c.dirs.State, "etcd"),
		"listen-client-urls", layout.EtcdClientURL,
		"advertise-client-urls", layout.EtcdClientURL,
		"listen-peer-urls", layout.EtcdPeerURL,
		"initial-advertise-peer-urls", layout.EtcdPeerURL,
		"initial-cluster", "af="+layout.EtcdPeerURL,
		"log-level", "warn",
	)...)}
}

func (c *Cluster) containerd() process {
	return process{name: "containerd", path: "/usr/bin/containerd", argv: []string{"containerd", "--config", filepath.Join(c.configDir(), "containerd.toml")}}
}

func (c *Cluster) registry() process {
	return process{name: "registry", path: "/usr/bin/docker-registry", argv: []string{"docker-registry", "serve", filepath.Join(c.configDir(), "registry.yaml")}}
}

func (c *Cluster) apiserver() process {
	pki := c.dirs.PKI()
	return process{name: "kube-apiserver", path: c.bin("kube-apiserver"), argv: append([]string{"kube-apiserver"}, joinFlags(
		"bind-address", layout.NodeIP,
		"advertise-address", layout.NodeIP,
		"secure-port", fmt.Sprint(layout.APIServerPort),
		"etcd-servers", layout.EtcdClientURL,
		"service-cluster-ip-range", c.serviceCIDRs(),
		"client-ca-file", filepath.Join(pki, "ca.crt"),
		"tls-cert-file", filepath.Join(pki, "apiserver.crt"),
		"tls-private-key-file", filepath.Join(pki, "apiserver.key"),
		"kubelet-client-certificate", filepath.Join(pki, "apiserver-kubelet-client.crt"),
		"kubelet-client-key", filepath.Join(pki, "apiserver-kubelet-client.key"),
		"kubelet-preferred-address-types", "InternalIP",
		"service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"service-account-key-file", filepath.Join(pki, "sa.pub"),
		"service-account-signing-key-file", filepath.Join(pki, "sa.key"),
		"authorization-mode", csv("Node", "RBAC"),
		"enable-admission-plugins", "NodeRestriction",
		"allow-privileged", "true",
		"profiling", "false",
		"endpoint-reconciler-type", "lease",
	)...)}
}

func (c *Cluster) controllerManager() process {
	pki := c.dirs.PKI()
	p := process{name: "kube-controller-manager", path: c.bin("kube-controller-manager"), argv: append([]string{"kube-controller-manager"}, joinFlags(
		"kubeconfig", c.kubeconfig("kube-controller-manager"),
		"authentication-kubeconfig", c.kubeconfig("kube-controller-manager"),
		"authorization-kubeconfig", c.kubeconfig("kube-controller-manager"),
		"bind-address", "127.0.0.1",
		"leader-elect", "false",
		"use-service-account-credentials", "true",
		"service-account-private-key-file", filepath.Join(pki, "sa.key"),
		"root-ca-file", filepath.Join(pki, "ca.crt"),
		"cluster-signing-cert-file", filepath.Join(pki, "ca.crt"),
		"cluster-signing-key-file", filepath.Join(pki, "ca.key"),
		"service-cluster-ip-range", c.serviceCIDRs(),
		"allocate-node-cidrs", "true",
		"cluster-cidr", c.podCIDRs(),
		"profiling", "false",
	)...)}
	// The node's pod ranges: a /24 of IPv4 (and a /64 of IPv6: the controller refuses the IPv6
	// size on an IPv4-only cluster).
	if c.opts.DualStack {
		p.argv = append(p.argv, joinFlags("node-cidr-mask-size-ipv4", "24", "node-cidr-mask-size-ipv6", "64")...)
	} else {
		p.argv = append(p.argv, joinFlags("node-cidr-mask-size", "24")...)
	}
	return p
}

func (c *Cluster) scheduler() process {
	return process{name: "kube-scheduler", path: c.bin("kube-scheduler"), argv: append([]string{"kube-scheduler"}, joinFlags(
		"kubeconfig", c.kubeconfig("kube-scheduler"),
		"authentication-kubeconfig", c.kubeconfig("kube-scheduler"),
		"authorization-kubeconfig", c.kubeconfig("kube-scheduler"),
		"bind-address", "127.0.0.1",
		"leader-elect", "false",
		"profiling", "false",
	)...)}
}

func (c *Cluster) kubelet() process {
	return process{name: "kubelet", path: c.bin("kubelet"), argv: append([]string{"kubelet"}, joinFlags(
		"config", filepath.Join(c.configDir(), "kubelet.yaml"),
		"kubeconfig", c.kubeconfig("kubelet"),
		"root-dir", filepath.Join(c.dirs.State, "kubelet"),
		"cert-dir", filepath.Join(c.dirs.State, "kubelet-pki"),
		"hostname-override", layout.NodeName,
		"node-ip", c.nodeIPs(),
	)...)}
}

func (c *Cluster) kubeProxy() process {
	return process{name: "kube-proxy", path: c.bin("kube-proxy"), argv: []string{"kube-proxy", "--config=" + filepath.Join(c.configDir(), "kube-proxy.yaml")}}
}

func (c *Cluster) kubeRouter() process {
	argv := append([]string{"kube-router"}, joinFlags(
		"kubeconfig", c.kubeconfig("kube-router"),
		"run-firewall", "true",
		"run-router", "false",
		"run-service-proxy", "false",
		"hostname-override", layout.NodeName,
		"health-port", "0",
		"metrics-port", "0",
		"iptables-sync-period", "1m",
		"service-node-port-range", c.nodePortRange(),
	)...)
	if c.governsIPv6() {
		argv = append(argv, joinFlags("enable-ipv6", "true", "service-cluster-ip-range", csv(layout.ServiceCIDR, layout.ServiceCIDR6))...)
	} else {
		argv = append(argv, joinFlags("service-cluster-ip-range", layout.ServiceCIDR)...)
	}
	return process{name: "kube-router", path: c.bins.kubeRouter, argv: argv, env: []string{"NODE_NAME=" + layout.NodeName}}
}

// kubeNetworkPolicies runs sigs.k8s.io/kube-network-policies (build.KubeNetworkPolicies) as a
// host process, as its DaemonSet would on the node: upstream's defaults (fail closed, queue
// 100, the DNS race fix), NRI off (Debian's containerd 1.6 has no NRI socket: it learns pod
// addresses from the API server, as kube-router does), metrics on loopback only.
func (c *Cluster) kubeNetworkPolicies() process {
	return process{name: "kube-network-policies", path: c.bins.kubeNetworkPolicies, argv: append([]string{"kube-network-policies"}, joinFlags(
		"hostname-override", layout.NodeName,
		"disable-nri", "true",
		"metrics-bind-address", layout.KubeNetworkPoliciesMetricsAddr,
		"nfqueue-id", KubeNetworkPoliciesQueue,
		"v", "2",
	)...), env: []string{"KUBECONFIG=" + c.kubeconfig("kube-network-policies")}}
}

func (c *Cluster) ingressForwards() []process {
	return []process{
		{name: "ingress-http", path: c.bins.aftool, argv: []string{"aftool", "forward", "-listen", layout.IngressHTTPAddr, "-to", IngressServiceIP + ":80"}},
		{name: "ingress-https", path: c.bins.aftool, argv: []string{"aftool", "forward", "-listen", layout.IngressHTTPSAddr, "-to", IngressServiceIP + ":443"}},
	}
}
