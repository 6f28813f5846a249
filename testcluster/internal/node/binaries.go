package node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/antifailure/af/testcluster/internal/build"
)

// buildAll produces every binary, from the cache when it is there. Upstream
// builds run one at a time (the build lock); Traefik, the slowest, goes last.
func (c *Cluster) buildAll(ctx context.Context) error {
	b := &build.Builder{CacheDir: c.dirs.Cache, Log: c.opts.Log}
	upstream := []build.Program{build.CoreDNS()}
	switch c.opts.Enforcer {
	case EnforcerKubeRouter:
		upstream = append(upstream, build.KubeRouter())
	case EnforcerKubeNetworkPolicies:
		upstream = append(upstream, build.KubeNetworkPolicies())
	case EnforcerCilium:
		upstream = append(upstream, build.CiliumAgent(), build.CiliumCNI())
	}
	if c.opts.Ingress {
		upstream = append(upstream, build.Traefik())
	}
	// Download the other programs' modules while Kubernetes compiles (a cold
	// run's downloads need the network, the compile needs the CPU).
	prefetched := make(chan error, 1)
	go func() {
		for _, p := range upstream {
			if err := b.Prefetch(ctx, p); err != nil {
				prefetched <- err
				return
			}
		}
		prefetched <- nil
	}()
	var err error
	if c.bins.aftool, err = c.buildOwn(ctx, "aftool"); err != nil {
		return err
	}
	if c.bins.afpause, err = c.buildOwn(ctx, "afpause"); err != nil {
		return err
	}
	if c.bins.kube, err = b.Binary(ctx, build.Kubernetes()); err != nil {
		return err
	}
	if err := <-prefetched; err != nil {
		return err
	}
	if c.bins.coreDNS, err = b.Binary(ctx, build.CoreDNS()); err != nil {
		return err
	}
	switch c.opts.Enforcer {
	case EnforcerKubeRouter:
		if c.bins.kubeRouter, err = b.Binary(ctx, build.KubeRouter()); err != nil {
			return err
		}
	case EnforcerKubeNetworkPolicies:
		if c.bins.kubeNetworkPolicies, err = b.Binary(ctx, build.KubeNetworkPolicies()); err != nil {
			return err
		}
	case EnforcerCilium:
		if c.bins.ciliumAgent, err = b.Binary(ctx, build.CiliumAgent()); err != nil {
			return err
		}
		if c.bins.ciliumCNI, err = b.Binary(ctx, build.CiliumCNI()); err != nil {
			return err
		}
	}
	if c.opts.Ingress {
		if c.bins.traefik, err = b.Binary(ctx, build.Traefik()); err != nil {
			return err
		}
	}
	return nil
}

// buildOwn builds one of af's own test commands (testcluster/cmd/NAME), static.
func (c *Cluster) buildOwn(ctx context.Context, name string) (string, error) {
	out := filepath.Join(c.dirs.Cache, "own", name)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", fmt.Errorf("build %s: %w", name, err)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, "github.com/antifailure/af/testcluster/cmd/"+name)
	cmd.Dir = c.opts.ModuleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %w\n%s", name, err, b)
	}
	return out, nil
}

// linkBinaries puts every command a person needs (kubectl first) in one
// directory for PATH; the Kubernetes commands are links to the combined binary.
func (c *Cluster) linkBinaries() error {
	dir := c.dirs.Bin()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("link binaries: %w", err)
	}
	links := map[string]string{"aftool": c.bins.aftool}
	for _, name := range build.KubernetesCommands() {
		links[name] = c.bins.kube
	}
	if c.bins.kubeRouter != "" {
		links["kube-router"] = c.bins.kubeRouter
	}
	if c.bins.kubeNetworkPolicies != "" {
		links["kube-network-policies"] = c.bins.kubeNetworkPolicies
	}
	if c.bins.ciliumAgent != "" {
		links["cilium-agent"] = c.bins.ciliumAgent
	}
	for name, target := range links {
		p := filepath.Join(dir, name)
		_ = os.Remove(p)
		if err := os.Symlink(target, p); err != nil {
			return fmt.Errorf("link binaries: %w", err)
		}
	}
	return nil
}

func (c *Cluster) bin(name string) string { return filepath.Join(c.dirs.Bin(), name) }
