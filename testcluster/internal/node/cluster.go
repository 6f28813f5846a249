package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/antifailure/af/testcluster/internal/layout"
)

// Enforcers the cluster can run.
const (
	EnforcerKubeRouter          = "kube-router"
	EnforcerKubeNetworkPolicies = "kube-network-policies"
	EnforcerNone                = "none"
	// EnforcerCilium is cilium-agent (eBPF, as a host process, without its operator): the
	// third kind (cilium.go).
	EnforcerCilium = "cilium"
)

// Options say how to bring the cluster up.
type Options struct {
	Dirs layout.Dirs
	// Enforcer is EnforcerKubeRouter (default), EnforcerKubeNetworkPolicies, or EnforcerNone
	// (the negative control).
	Enforcer string
	// Ingress builds and runs Traefik (the slowest build; default on).
	Ingress bool
	// Holes leaves IPv6 on in pods and the node open (kube-router's NodePort exemption, or
	// kube-network-policies' unqueued input), as they are on a cluster nobody hardened
	// (hardening.go): the variant af must refuse. Each can be left open alone.
	Holes Holes
	// DualStack gives pods and Services an IPv6 range beside the IPv4 one, the node and the
	// fake internet, resolver and metadata server IPv6 addresses, and runs kube-router with
	// IPv6 (dualstack.go). Its IPv6 hole is an enforcer that governs IPv4 only.
	DualStack bool
	// ModuleDir is a directory inside af's Go module, to build af's own test binaries from.
	ModuleDir string
	// Log receives progress lines.
	Log func(format string, args ...any)
}

// State records how the running cluster was started.
type State struct {
	Enforcer string `json:"enforcer"`
	Ingress  bool   `json:"ingress"`
	// Holes is true when either hole is open; HoleIPv6 and HoleNode say which (a state
	// written before they existed, with Holes alone, had both open).
	Holes     bool   `json:"holes,omitempty"`
	HoleIPv6  bool   `json:"hole_ipv6,omitempty"`
	HoleNode  bool   `json:"hole_node,omitempty"`
	DualStack bool   `json:"dual_stack,omitempty"`
	Uplink    string `json:"uplink"`
	IPForward string `json:"ip_forward_before"`
	// IPv6Forward is net.ipv6.conf.all.forwarding before a dual-stack cluster set it.
	IPv6Forward string `json:"ipv6_forwarding_before,omitempty"`
	Started     string `json:"started"`
	UpSeconds   int    `json:"up_seconds"`
}

// Holes are the two containment holes an unhardened cluster has.
type Holes struct {
	// IPv6 is IPv6 left on in pods: their fe80:: segment, which no policy governs here. On a
	// dual-stack cluster, where pods have IPv6 by design, it is an enforcer that governs IPv4
	// only (kube-router without --enable-ipv6) and no rule on the pods' link-local segment.
	IPv6 bool
	// Node is the node open to pods past their policies: kube-router's whole NodePort
	// exemption, or pods' connections to the node not queued to kube-network-policies.
	Node bool
}

// Any is true when either hole is open.
func (h Holes) Any() bool { return h.IPv6 || h.Node }

// String names the open holes.
func (h Holes) String() string {
	switch {
	case h.IPv6 && h.Node:
		return "ipv6,node"
	case h.IPv6:
		return "ipv6"
	case h.Node:
		return "node"
	}
	return "none"
}

// ParseHoles reads "ipv6", "nodeport" (or "node"), "all" as the holes it names.
func ParseHoles(s string) (Holes, error) {
	switch s {
	case "ipv6":
		return Holes{IPv6: true}, nil
	case "nodeport", "node":
		return Holes{Node: true}, nil
	case "all", "":
		return Holes{IPv6: true, Node: true}, nil
	}
	return Holes{}, fmt.Errorf("hole %q: ipv6, nodeport or all", s)
}

// OpenHoles returns which holes the state records open.
func (st State) OpenHoles() Holes {
	if st.Holes && !st.HoleIPv6 && !st.HoleNode {
		return Holes{IPv6: true, Node: true}
	}
	return Holes{IPv6: st.HoleIPv6, Node: st.HoleNode}
}

func (st *State) setHoles(h Holes) { st.Holes, st.HoleIPv6, st.HoleNode = h.Any(), h.IPv6, h.Node }

// Cluster is one machine's test cluster.
type Cluster struct {
	dirs layout.Dirs
	opts Options
	bins binaries
}

// binaries are the executables the cluster runs.
type binaries struct {
	kube, kubeRouter, kubeNetworkPolicies, ciliumAgent, ciliumCNI, coreDNS, traefik, aftool, afpause string
}

// New returns the cluster described by opts.
func New(opts Options) (*Cluster, error) {
	switch opts.Enforcer {
	case "":
		opts.Enforcer = EnforcerKubeRouter
	case EnforcerKubeRouter, EnforcerKubeNetworkPolicies, EnforcerNone:
	case EnforcerCilium:
		if opts.DualStack || opts.Holes.Any() {
			return nil, fmt.Errorf("enforcer %q runs IPv4-only and without holes for now", opts.Enforcer)
		}
	default:
		return nil, fmt.Errorf("unknown enforcer %q (want %q, %q, %q or %q)", opts.Enforcer, EnforcerKubeRouter, EnforcerKubeNetworkPolicies, EnforcerCilium, EnforcerNone)
	}
	if opts.Log == nil {
		opts.Log = func(string, ...any) {}
	}
	return &Cluster{dirs: opts.Dirs, opts: opts}, nil
}

func (c *Cluster) logf(format string, args ...any) { c.opts.Log(format, args...) }

// CheckRoot fails with a clear message when not run as root.
func CheckRoot() error {
	if os.Geteuid() != 0 {
		return errors.New("the af test cluster must run as root: it creates network namespaces, nftables tables, mounts and cgroups (run `sudo make cluster-up` or the tests as root)")
	}
	return nil
}

// ReadState reads the running cluster's state file.
func ReadState(dirs layout.Dirs) (State, error) {
	var s State
	b, err := os.ReadFile(dirs.StateFile())
	if err != nil {
		return s, fmt.Errorf("read cluster state: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("read cluster state %s: %w", dirs.StateFile(), err)
	}
	return s, nil
}

func writeState(dirs layout.Dirs, s State) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("write cluster state: %w", err)
	}
	return writeFile(dirs.StateFile(), string(b)+"\n", 0o644)
}
