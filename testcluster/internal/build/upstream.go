package build

import "fmt"

// Pinned versions of the upstream programs built from the module proxy.
const (
	KubeRouterVersion = "v2.1.0"
	CoreDNSVersion    = "v1.15.0"
	TraefikVersion    = "v3.6.12"
)

// toolsFile makes `go mod tidy` keep the upstream module: it imports the
// program's main package in a file that is never built (the tools.go pattern).
func toolsFile(pkg string) map[string]string {
	return map[string]string{"tools.go": fmt.Sprintf("//go:build tools\n\npackage tools\n\nimport _ %q\n", pkg)}
}

// KubeRouter is kube-router; the cluster runs only its NetworkPolicy controller
// (--run-firewall). One change is made to the release, the fix of its IPv6 bug
// (cloudnativelabs/kube-router#1653, fixed upstream after v2.1.0, the last release the module
// proxy serves here; k3s carries the same fix in its fork): a policy rule's ip6tables match
// named the pods' ipset without the "inet6:" prefix ipset gives IPv6 sets, so
// ip6tables-restore failed ("Set KUBE-SRC-… doesn't exist") and every IPv6 sync was aborted:
// new pods got no IPv6 chains, and their IPv6 went out past their policies. The rule now names
// the set as the family's ipset handler does. IPv4 is untouched (its names have no prefix).
// Its second half: each family's ipset handler read every set of `ipset save` and wrote them
// all back at its restore, so the IPv6 handler put IPv4 sets back as they were at its last save
// (seen here: the set of an environment's sidecar pod, empty again, and its services cut off
// from it). Each handler now keeps only its own family's sets (af_family.go).
func KubeRouter() Program {
	const mod = "github.com/cloudnativelabs/kube-router/v2"
	const pkg = mod + "/cmd/kube-router"
	return Program{
		Name:    "kube-router",
		Version: KubeRouterVersion,
		GoMod: fmt.Sprintf("module afbuild/kube-router\n\ngo 1.22\n\nrequire %s %s\n\nreplace %s => ./%s\n",
			mod, KubeRouterVersion, mod, PatchDir),
		Files:   toolsFile(pkg),
		Package: pkg,
		LDFlags: "-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=" + KubeRouterVersion,
		Patch: &Patch{
			Module:  mod,
			Version: KubeRouterVersion,
			Edits: []Edit{
				{File: "pkg/controllers/netpol/policy.go",
					Old: `args = append(args, "-m", "set", "--match-set", srcIPSetName, "src")`,
					New: `args = append(args, "-m", "set", "--match-set", npc.ipSetHandlers[ipFamily].Name(srcIPSetName), "src")`},
				{File: "pkg/controllers/netpol/policy.go",
					Old: `args = append(args, "-m", "set", "--match-set", dstIPSetName, "dst")`,
					New: `args = append(args, "-m", "set", "--match-set", npc.ipSetHandlers[ipFamily].Name(dstIPSetName), "dst")`},
				{File: "pkg/utils/ipset.go",
					Old: "\t\tcontent := strings.Split(line, \" \")\n\t\tif content[0] == \"create\" {\n",
					New: "\t\tcontent := strings.Split(line, \" \")\n\t\tif afOtherFamily(ipset, content, sets) {\n\t\t\tcontinue\n\t\t}\n\t\tif content[0] == \"create\" {\n"},
			},
			Files: map[string]string{
				"pkg/utils/af_family.go": `package utils

// afOtherFamily reports whether a line of ipset save belongs to a set of the other address
// family than handler's: a create line whose options say (or do not say) "family inet6", or an
// add line to a set not kept. The af test cluster's fix of kube-router#1653's second half: each
// family's handler kept every set of ipset save, and its restore wrote the other family's sets
// back with what they held at its save, undoing that family's refresh (an IPv4 set of a
// policy's pods was emptied again by the IPv6 handler's restore).
func afOtherFamily(handler *IPSet, content []string, kept map[string]*Set) bool {
	if len(content) < 2 {
		return false
	}
	switch content[0] {
	case "create":
		inet6 := false
		for i := 2; i+1 < len(content); i++ {
			if content[i] == "family" {
				inet6 = content[i+1] == "inet6"
			}
		}
		return inet6 != handler.isIpv6
	case "add":
		_, ok := kept[content[1]]
		return !ok
	}
	return false
}
`,
			},
		},
	}
}

// CoreDNS is the cluster resolver, built unmodified.
func CoreDNS() Program {
	const pkg = "github.com/coredns/coredns"
	return Program{
		Name:    "coredns",
		Version: CoreDNSVersion,
		GoMod:   fmt.Sprintf("module afbuild/coredns\n\ngo 1.26.0\n\nrequire github.com/coredns/coredns %s\n", CoreDNSVersion),
		Files:   toolsFile(pkg),
		Package: pkg,
		LDFlags: "-s -w",
	}
}

// Traefik is the ingress controller, built unmodified. Its own go.mod's
// replace and exclude directives are repeated here, since a dependent module
// does not inherit them.
func Traefik() Program {
	const pkg = "github.com/traefik/traefik/v3/cmd/traefik"
	gomod := fmt.Sprintf(`module afbuild/traefik

go 1.25.0

require github.com/traefik/traefik/v3 %s

replace (
	github.com/abbot/go-http-auth => github.com/containous/go-http-auth v0.4.1-0.20200324110947-a37a7636d23e
	github.com/gorilla/mux => github.com/containous/mux v0.0.0-20250523120546-41b6ec3aed59
	github.com/mailgun/minheap => github.com/containous/minheap v0.0.0-20190809180810-6e71eb837595
)

exclude github.com/tencentcloud/tencentcloud-sdk-go v3.0.83+incompatible
`, TraefikVersion)
	return Program{
		Name:    "traefik",
		Version: TraefikVersion,
		GoMod:   gomod,
		Files:   toolsFile(pkg),
		Package: pkg,
		LDFlags: "-s -w -X github.com/traefik/traefik/v3/pkg/version.Version=" + TraefikVersion,
	}
}

// KubeNetworkPoliciesVersion is the release of sigs.k8s.io/kube-network-policies built.
const KubeNetworkPoliciesVersion = "v0.8.0"

// KubeNetworkPolicies is sigs.k8s.io/kube-network-policies, the enforcer kind uses: nftables
// rules send a pod's first packet of each connection to an NFQUEUE, where the program
// decides in userspace. Two changes, and only these, are made to the release:
//   - This kernel has no nft_queue (CONFIG_NFT_QUEUE), so the nftables `queue` statement
//     cannot be loaded. It has nft_compat and xt_NFQUEUE, so the same verdict is asked
//     through the iptables NFQUEUE target (revision 3: queue number, one queue, the bypass
//     flag exactly when upstream sets it). The packets, the queue and the decisions are
//     upstream's.
//   - It reads $KUBECONFIG when set, so it can run as a host process rather than a pod
//     (the test cluster runs every component that way); otherwise the in-cluster config,
//     as upstream.
func KubeNetworkPolicies() Program {
	const mod = "sigs.k8s.io/kube-network-policies"
	queueOld := `	queue := &expr.Queue{Num: uint16(c.config.QueueID)}
	if c.config.FailOpen {
		queue.Flag = expr.QueueFlagBypass
	}
`
	return Program{
		Name:    "kube-network-policies",
		Version: KubeNetworkPoliciesVersion,
		GoMod: fmt.Sprintf("module afbuild/kube-network-policies\n\ngo 1.23.0\n\nrequire %s %s\n\nreplace %s => ./%s\n",
			mod, KubeNetworkPoliciesVersion, mod, PatchDir),
		Files:   toolsFile(mod + "/cmd"),
		Package: mod + "/cmd",
		LDFlags: "-s -w",
		Patch: &Patch{
			Module:  mod,
			Version: KubeNetworkPoliciesVersion,
			Edits: []Edit{
				{File: "pkg/networkpolicy/controller.go", Old: queueOld, New: "\tqueue := xtQueue(uint16(c.config.QueueID), c.config.FailOpen)\n", Count: 2},
				{File: "pkg/networkpolicy/dnsagent.go", Old: "&expr.Queue{Num: uint16(n.nfQueueID), Flag: expr.QueueFlagBypass}", New: "xtQueue(uint16(n.nfQueueID), true)"},
				{File: "cmd/main.go", Old: "config, err := rest.InClusterConfig()", New: "config, err := afHostConfig(rest.InClusterConfig)"},
			},
			Files: map[string]string{
				"pkg/networkpolicy/af_xtqueue.go": `package networkpolicy

import (
	"encoding/binary"

	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
)

// xtQueue is the NFQUEUE verdict through nft_compat's iptables target (struct
// xt_NFQ_info_v3: queuenum, queues_total, flags; NFQ_FLAG_BYPASS = 1), for kernels
// without nft_queue. Added by af's test cluster build.
func xtQueue(num uint16, bypass bool) expr.Any {
	info := make(xt.Unknown, 8)
	binary.NativeEndian.PutUint16(info[0:], num)
	binary.NativeEndian.PutUint16(info[2:], 1)
	if bypass {
		binary.NativeEndian.PutUint16(info[4:], 1)
	}
	return &expr.Target{Name: "NFQUEUE", Rev: 3, Info: &info}
}
`,
				"cmd/af_hostconfig.go": `package main

import (
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// afHostConfig reads $KUBECONFIG when set (a host process), else the in-cluster config.
// Added by af's test cluster build.
func afHostConfig(inCluster func() (*rest.Config, error)) (*rest.Config, error) {
	if path := os.Getenv("KUBECONFIG"); path != "" {
		return clientcmd.BuildConfigFromFlags("", path)
	}
	return inCluster()
}
`,
			},
		},
	}
}
