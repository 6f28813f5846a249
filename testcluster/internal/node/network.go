package node

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/antifailure/af/testcluster/internal/layout"
)

// Uplink returns the name of the interface the default route leaves by: the
// machine's real way out, which the guard closes to the cluster.
func Uplink(ctx context.Context) (string, error) {
	out, err := run(ctx, "ip", "-4", "route", "show", "default")
	if err != nil {
		return "", err
	}
	f := strings.Fields(out)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "dev" {
			return f[i+1], nil
		}
	}
	return "", fmt.Errorf("no default route: cannot tell the uplink interface")
}

func setSysctl(key, value string) error {
	path := "/proc/sys/" + strings.ReplaceAll(key, ".", "/")
	if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", key, value, err)
	}
	return nil
}

func getSysctl(key string) string {
	b, _ := os.ReadFile("/proc/sys/" + strings.ReplaceAll(key, ".", "/"))
	return strings.TrimSpace(string(b))
}

// setupNetwork creates the bridge and the fake internet's namespaces and wires
// them to the node. Pods reach the test hosts through the node's routes; the
// namespaces know routes back to the pods and nothing else.
func (c *Cluster) setupNetwork(ctx context.Context) error {
	steps := [][]string{
		{"link", "add", layout.Bridge, "address", layout.BridgeMAC, "type", "bridge"},
		{"addr", "add", layout.NodeIP + c.nodePrefix(), "dev", layout.Bridge},
		{"link", "set", layout.Bridge, "up"},
	}
	for _, ns := range []struct{ name, veth, hostIP, nsIP string }{
		{layout.InetNetns, layout.InetVethHost, layout.InetHostIP, layout.InetNsIP},
		{layout.MetaNetns, layout.MetaVethHost, layout.MetaHostIP, layout.MetaNsIP},
	} {
		pfx := fmt.Sprintf("/%d", layout.TransitLen)
		steps = append(steps,
			[]string{"netns", "add", ns.name},
			[]string{"link", "add", ns.veth, "type", "veth", "peer", "name", "eth0", "netns", ns.name},
			[]string{"addr", "add", ns.hostIP + pfx, "dev", ns.veth},
			[]string{"link", "set", ns.veth, "up"},
			[]string{"-n", ns.name, "link", "set", "lo", "up"},
			[]string{"-n", ns.name, "addr", "add", ns.nsIP + pfx, "dev", "eth0"},
			[]string{"-n", ns.name, "link", "set", "eth0", "up"},
			[]string{"-n", ns.name, "route", "add", layout.PodCIDR, "via", ns.hostIP},
		)
	}
	for _, ip := range []string{layout.PublicIP, layout.ResolverIP, layout.AllowedAPIIP, layout.BlockedAPIIP} {
		steps = append(steps, []string{"-n", layout.InetNetns, "addr", "add", ip + "/32", "dev", "eth0"})
	}
	steps = append(steps,
		[]string{"-n", layout.MetaNetns, "addr", "add", layout.MetadataIP + "/32", "dev", "eth0"},
		[]string{"route", "add", layout.FakeInternetCIDR, "via", layout.InetNsIP},
		[]string{"route", "add", layout.MetadataIP + "/32", "via", layout.MetaNsIP},
		// Service addresses not (yet) translated by kube-proxy stay on the
		// bridge instead of following the default route out of the machine.
		// (Seen: CoreDNS's first SYN to the API service before kube-proxy ran.)
		[]string{"route", "add", layout.ServiceCIDR, "dev", layout.Bridge},
	)
	for _, s := range steps {
		if _, err := run(ctx, "ip", s...); err != nil {
			return fmt.Errorf("network: %w", err)
		}
	}
	for _, kv := range [][2]string{
		{"net.ipv4.ip_forward", "1"},
		{"net.bridge.bridge-nf-call-iptables", "1"},
		{"net.bridge.bridge-nf-call-ip6tables", "1"},
	} {
		if err := setSysctl(kv[0], kv[1]); err != nil {
			return fmt.Errorf("network: %w", err)
		}
	}
	if c.opts.DualStack {
		return c.setupNetwork6(ctx)
	}
	return nil
}
