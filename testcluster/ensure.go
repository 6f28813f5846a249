package testcluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/antifailure/af/testcluster/internal/layout"
	"github.com/antifailure/af/testcluster/internal/node"
)

// Options say how Up starts a cluster.
type Options struct {
	// Enforcer is EnforcerKubeRouter (the default), EnforcerKubeNetworkPolicies or
	// EnforcerNone.
	Enforcer string
	// NoIngress skips building and running Traefik.
	NoIngress bool
	// Holes leaves IPv6 on in pods and kube-router's NodePort exemption open: the cluster as
	// nobody hardened it, which af must refuse (SetHoles switches a running cluster).
	Holes bool
	// DualStack gives pods, Services, the node and the fake internet IPv6 beside IPv4, with
	// kube-router governing both (kube-router only).
	DualStack bool
	// Log receives progress lines (nil: none).
	Log func(format string, args ...any)
}

// OptionsFromEnv reads AF_ENFORCER (kube-router or none) and AF_INGRESS (0 to skip Traefik).
func OptionsFromEnv() Options {
	return Options{Enforcer: os.Getenv("AF_ENFORCER"), NoIngress: os.Getenv("AF_INGRESS") == "0"}
}

// Ensure returns the running cluster, starting it (with OptionsFromEnv) when
// none runs. Several processes may call it at once: one starts the cluster,
// the others wait for it.
func Ensure(ctx context.Context) (*Handle, error) {
	unlock, err := rootLocked(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if h, err := open(ctx); err == nil {
		return h, nil
	}
	if err := up(ctx, OptionsFromEnv()); err != nil {
		return nil, err
	}
	return open(ctx)
}

// Open returns the running cluster, or an error when none runs.
func Open(ctx context.Context) (*Handle, error) {
	if err := node.CheckRoot(); err != nil {
		return nil, err
	}
	return open(ctx)
}

func open(ctx context.Context) (*Handle, error) {
	dirs, err := layout.DefaultDirs()
	if err != nil {
		return nil, err
	}
	st, err := node.ReadState(dirs)
	if err != nil {
		return nil, fmt.Errorf("no test cluster is running (start one with `make cluster-up`): %w", err)
	}
	if st.UpSeconds == 0 {
		return nil, fmt.Errorf("the test cluster did not finish starting (see %s)", dirs.Logs())
	}
	h := newHandle(dirs, st)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := h.Kubectl(ctx, "", "get", "--raw", "/readyz"); err != nil {
		return nil, fmt.Errorf("the test cluster is not answering: %w", err)
	}
	return h, nil
}

// Up starts a fresh cluster, removing whatever an earlier one left first.
func Up(ctx context.Context, opts Options) (*Handle, error) {
	unlock, err := rootLocked(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := up(ctx, opts); err != nil {
		return nil, err
	}
	return open(ctx)
}

func up(ctx context.Context, opts Options) error {
	c, err := cluster(opts)
	if err != nil {
		return err
	}
	return c.Up(ctx)
}

// Down removes the cluster and everything it made; it is idempotent.
func Down(ctx context.Context, log func(string, ...any)) error {
	unlock, err := rootLocked(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	c, err := cluster(Options{Log: log})
	if err != nil {
		return err
	}
	return c.Down(ctx)
}

// Status writes a report of the cluster (processes, node, pods, guard
// counters) and fails when it is not running or a guard counter is not zero.
func Status(ctx context.Context, w io.Writer) error {
	if err := node.CheckRoot(); err != nil {
		return err
	}
	c, err := cluster(Options{})
	if err != nil {
		return err
	}
	return c.Status(ctx, w)
}

// Leftovers lists what of a cluster is still on the machine; empty after Down.
func Leftovers(ctx context.Context) ([]string, error) {
	dirs, err := layout.DefaultDirs()
	if err != nil {
		return nil, err
	}
	return node.Leftovers(ctx, dirs), nil
}

func cluster(opts Options) (*node.Cluster, error) {
	dirs, err := layout.DefaultDirs()
	if err != nil {
		return nil, err
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("working directory: %w", err)
	}
	return node.New(node.Options{Dirs: dirs, Enforcer: opts.Enforcer, Ingress: !opts.NoIngress, Holes: node.Holes{IPv6: opts.Holes, Node: opts.Holes}, DualStack: opts.DualStack, ModuleDir: wd, Log: opts.Log})
}

// SetHoles opens or closes the running cluster's containment holes in place (which: ipv6,
// the IPv6 segment of pods; nodeport, the node open to pods past their policies; all, both),
// leaving the other as it is: new pods, and the cluster's own pods, which are recreated, get
// the new configuration.
func SetHoles(ctx context.Context, which string, holes bool, log func(string, ...any)) (*Handle, error) {
	w, err := node.ParseHoles(which)
	if err != nil {
		return nil, err
	}
	unlock, err := rootLocked(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	c, err := cluster(Options{Log: log})
	if err != nil {
		return nil, err
	}
	if err := c.SetHoles(ctx, w, holes); err != nil {
		return nil, err
	}
	return open(ctx)
}

// rootLocked checks for root and takes the machine-wide lock: what every change of the
// cluster starts with.
func rootLocked(ctx context.Context) (func(), error) {
	if err := node.CheckRoot(); err != nil {
		return nil, err
	}
	return lock(ctx)
}

// lock takes the machine-wide lock that serialises starting and stopping.
func lock(ctx context.Context) (func(), error) {
	f, err := os.OpenFile(layout.LockFile(), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cluster lock: %w", err)
	}
	for {
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("cluster lock: %w", ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// RestartAPIServer stops the running cluster's API server, keeps it stopped for downFor, then
// starts it again and waits until it is ready. Callers hold no lock: tests run it while their
// own work talks to the cluster.
func RestartAPIServer(ctx context.Context, downFor time.Duration, log func(string, ...any)) error {
	c, err := cluster(Options{Log: log})
	if err != nil {
		return err
	}
	return c.RestartAPIServer(ctx, downFor)
}

// StopEnforcer sends the running cluster's enforcer (kube-network-policies, kube-router or cilium-agent) sig
// and returns when it is gone; StartEnforcer starts it again and waits until it enforces.
// Tests of how traffic fares while the enforcer is away use them.
func StopEnforcer(ctx context.Context, sig syscall.Signal, log func(string, ...any)) error {
	return withEnforcer(log, func(c *node.Cluster, enforcer string) error {
		switch enforcer {
		case EnforcerKubeRouter:
			return c.StopKubeRouter(ctx, sig)
		case EnforcerCilium:
			return c.StopCilium(ctx, sig)
		}
		return c.StopKubeNetworkPolicies(ctx, sig)
	})
}

// StartEnforcer: see StopEnforcer.
func StartEnforcer(ctx context.Context, log func(string, ...any)) error {
	return withEnforcer(log, func(c *node.Cluster, enforcer string) error {
		switch enforcer {
		case EnforcerKubeRouter:
			return c.StartKubeRouter(ctx)
		case EnforcerCilium:
			return c.StartCilium(ctx)
		}
		return c.StartKubeNetworkPolicies(ctx)
	})
}

// withEnforcer calls f with the running cluster and which enforcer it runs.
func withEnforcer(log func(string, ...any), f func(c *node.Cluster, enforcer string) error) error {
	c, err := cluster(Options{Log: log})
	if err != nil {
		return err
	}
	enforcer, err := c.Enforcer()
	if err != nil {
		return err
	}
	return f(c, enforcer)
}

// SetLinkLocalRule puts the link-local rule (the AF-LINK-LOCAL ip6tables chain on the pods'
// bridge, package harden's, as deploy/harden puts it: docs/runtime.md, "af harden") in place on the running cluster, or removes it with
// on false, whatever the cluster's holes: alone on an IPv4-only cluster with IPv6 on in pods,
// it closes their link-local segment as the tuning plugin would, where a CNI has no such
// plugin (k3s).
func SetLinkLocalRule(ctx context.Context, on bool) error {
	return node.SetLinkLocalRule(ctx, on)
}
