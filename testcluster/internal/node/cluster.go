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
)

// Options say how to bring the cluster up.
type Options struct {
	Dirs layout.Dirs
	// Enforcer is EnforcerKubeRouter (default), EnforcerKubeNetworkPolicies, or EnforcerNone
	// (the negative control).
	Enforcer string
	// Ingress builds and runs Traefik (the slowest build; default on).
	Ingress bool
	// Holes leaves IPv6 on in pods and kube-router's NodePort exemption open, as they are on
	// a cluster nobody hardened (hardening.go): the variant af must refuse.
	Holes bool
	// ModuleDir is a directory inside af's Go module, to build af's own test binaries from.
	ModuleDir string
	// Log receives progress lines.
	Log func(format string, args ...any)
}

// State records how the running cluster was started.
type State struct {
	Enforcer  string `json:"enforcer"`
	Ingress   bool   `json:"ingress"`
	Holes     bool   `json:"holes,omitempty"`
	Uplink    string `json:"uplink"`
	IPForward string `json:"ip_forward_before"`
	Started   string `json:"started"`
	UpSeconds int    `json:"up_seconds"`
}

// Cluster is one machine's test cluster.
type Cluster struct {
	dirs layout.Dirs
	opts Options
	bins binaries
}

// binaries are the executables the cluster runs.
type binaries struct {
	kube, kubeRouter, kubeNetworkPolicies, coreDNS, traefik, aftool, afpause string
}

// New returns the cluster described by opts.
func New(opts Options) (*Cluster, error) {
	switch opts.Enforcer {
	case "":
		opts.Enforcer = EnforcerKubeRouter
	case EnforcerKubeRouter, EnforcerKubeNetworkPolicies, EnforcerNone:
	default:
		return nil, fmt.Errorf("unknown enforcer %q (want %q, %q or %q)", opts.Enforcer, EnforcerKubeRouter, EnforcerKubeNetworkPolicies, EnforcerNone)
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
