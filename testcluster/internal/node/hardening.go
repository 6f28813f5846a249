package node

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/antifailure/af/testcluster/internal/layout"
)

// What an operator does to make this cluster contain af's environments, beyond running an
// enforcer (docs/runtime.md, "What af requires of a cluster"):
//
//   - IPv6 off inside pods. kube-router runs IPv4-only here, and the bridge CNI gives every pod
//     an fe80:: address on its segment that no policy governs. The CNI tuning plugin sets the
//     pod's disable_ipv6 sysctls as the sandbox is made, before any container starts.
//   - The NodePort exemption closed. kube-router lets pods reach local addresses on the
//     NodePort range (30000-32767) ahead of the pods' own rules, so that NodePorts work; a
//     host-network listener in that range is then open to every pod. A table of our own, at a
//     priority before the iptables filter table, drops new connections from pods to the node's
//     own addresses in that range. (Traffic to a NodePort Service is rewritten to its pod by
//     kube-proxy before the input hook, so NodePort Services still work.)
//
// Holes leaves both as kube-router leaves them: the variant the new routes must fail on.

// NodePortRange is the range kube-router and the API server use for NodePorts.
const NodePortRange = "30000-32767"

// CounterNodePort counts the connections the NodePort guard dropped.
const CounterNodePort = "nodeport_from_pods"

// SetHoles opens (true) or closes (false) both holes on the running cluster: the CNI
// configuration new pods get, the NodePort table, and the cluster's own pods (CoreDNS,
// Traefik), which are recreated so they are made under the new configuration.
func (c *Cluster) SetHoles(ctx context.Context, open bool) error {
	st, err := ReadState(c.dirs)
	if err != nil {
		return err
	}
	c.opts.Holes = open
	c.opts.Ingress = st.Ingress
	if err := c.writeCNIConfig(); err != nil {
		return err
	}
	if err := c.applyNodePortGuard(ctx); err != nil {
		return err
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
	st.Holes = open
	return writeState(c.dirs, st)
}

// cniTuning is the tuning plugin's entry that turns IPv6 off in every pod, or "" with Holes.
func (c *Cluster) cniTuning() string {
	if c.opts.Holes {
		return ""
	}
	return `    {
      "type": "tuning",
      "sysctl": {"net.ipv6.conf.all.disable_ipv6": "1", "net.ipv6.conf.default.disable_ipv6": "1"}
    },
`
}

// applyNodePortGuard loads (or, with Holes, removes) the NodePort table.
func (c *Cluster) applyNodePortGuard(ctx context.Context) error {
	exists := false
	if out, err := run(ctx, "nft", "list", "tables"); err == nil {
		exists = strings.Contains(out, "table inet "+layout.NodePortTable+"\n") || strings.HasSuffix(strings.TrimSpace(out), "table inet "+layout.NodePortTable)
	}
	if exists {
		if _, err := run(ctx, "nft", "delete", "table", "inet", layout.NodePortTable); err != nil {
			return fmt.Errorf("NodePort guard: %w", err)
		}
	}
	if c.opts.Holes {
		return nil
	}
	rules := fmt.Sprintf(`table inet %[1]s {
	counter %[2]s { }
	chain input {
		type filter hook input priority -10; policy accept;
		iifname %[3]q ip saddr %[4]s fib daddr type local meta l4proto { tcp, udp } th dport %[5]s ct state new counter name %[2]s drop
	}
}
`, layout.NodePortTable, CounterNodePort, layout.Bridge, layout.PodCIDR, NodePortRange)
	if _, err := runInput(ctx, rules, "nft", "-f", "-"); err != nil {
		return fmt.Errorf("NodePort guard: %w", err)
	}
	return nil
}
