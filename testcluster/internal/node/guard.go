package node

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/antifailure/af/testcluster/internal/layout"
)

// Guard counter names, as reported by status.
const (
	CounterForwardUplink = "forward_to_uplink"  // anything routed through the node out of the uplink
	CounterLocalUplink   = "test_source_uplink" // node-sent packets with a pod or test source, out of the uplink
	CounterRealMetadata  = "real_metadata"      // anything at all to 169.254.169.254 (or a cloud's IPv6 metadata address)
)

// installGuard loads the nftables table that keeps the cluster inside the
// machine. It is installed before anything else runs and removed last. Each
// drop is also logged to the kernel log (dmesg) with an "af_guard" prefix.
func installGuard(ctx context.Context, uplink string) error {
	sources := fmt.Sprintf("{ %s, %s, %s/29, %s }", layout.PodCIDR, layout.FakeInternetCIDR, layout.InetHostIP, layout.MetadataIP)
	// The IPv6 ranges a dual-stack cluster uses (dualstack.go), guarded whether or not it is one.
	sources6 := fmt.Sprintf("{ %s, %s, %s }", layout.ClusterRange6, layout.FakeInternetCIDR6, layout.MetadataIP6)
	rules := fmt.Sprintf(`table inet %[1]s {
	counter %[2]s { }
	counter %[3]s { }
	counter %[4]s { }
	chain forward {
		type filter hook forward priority -10; policy accept;
		ip daddr %[5]s counter name %[4]s log prefix "af_guard real_metadata: " drop
		ip6 daddr %[8]s counter name %[4]s log prefix "af_guard real_metadata: " drop
		oifname %[6]q counter name %[2]s log prefix "af_guard forward_to_uplink: " drop
	}
	chain output {
		type filter hook output priority -10; policy accept;
		ip daddr %[5]s counter name %[4]s log prefix "af_guard real_metadata: " drop
		oifname %[6]q ip saddr %[7]s counter name %[3]s log prefix "af_guard test_source_uplink: " drop
		oifname %[6]q ip6 saddr %[9]s counter name %[3]s log prefix "af_guard test_source_uplink: " drop
		ip6 daddr %[8]s counter name %[4]s log prefix "af_guard real_metadata: " drop
	}
}
`, layout.GuardTable, CounterForwardUplink, CounterLocalUplink, CounterRealMetadata,
		layout.RealMetadataIP, uplink, sources, layout.RealMetadataIP6, sources6)
	if _, err := runInput(ctx, rules, "nft", "-f", "-"); err != nil {
		return fmt.Errorf("guard: %w", err)
	}
	return nil
}

// GuardCounters reads the guard's counters (packets per counter). A missing
// table is an error: the guard must exist while the cluster runs.
func GuardCounters(ctx context.Context) (map[string]uint64, error) {
	out, err := run(ctx, "nft", "-j", "list", "counters", "table", "inet", layout.GuardTable)
	if err != nil {
		return nil, fmt.Errorf("guard: %w", err)
	}
	var doc struct {
		Nftables []struct {
			Counter *struct {
				Name    string `json:"name"`
				Packets uint64 `json:"packets"`
			} `json:"counter"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		return nil, fmt.Errorf("guard: parse nft output: %w", err)
	}
	counters := map[string]uint64{}
	for _, o := range doc.Nftables {
		if o.Counter != nil {
			counters[o.Counter.Name] = o.Counter.Packets
		}
	}
	if len(counters) == 0 {
		return nil, fmt.Errorf("guard: table inet %s has no counters", layout.GuardTable)
	}
	return counters, nil
}
