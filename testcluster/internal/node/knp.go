package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// KubeNetworkPoliciesTable is the nftables table kube-network-policies keeps (family inet),
// and KubeNetworkPoliciesQueue the queue it reads (its default).
const (
	KubeNetworkPoliciesTable = "kube-network-policies"
	KubeNetworkPoliciesQueue = "100"
)

// startKubeNetworkPolicies starts kube-network-policies and waits until its table holds the
// rules that send pods' packets to its queue, and its queue has a reader.
func (c *Cluster) startKubeNetworkPolicies(ctx context.Context) error {
	if err := c.start(c.kubeNetworkPolicies()); err != nil {
		return err
	}
	if err := setKNPNodeRule(ctx, c.opts.Holes.Node); err != nil {
		return err
	}
	return c.waitFor(ctx, "kube-network-policies' queue rules and reader", "kube-network-policies", 2*time.Minute, func(ctx context.Context) error {
		ok, why := knpEnforcing(ctx)
		if !ok {
			return fmt.Errorf("%s", why)
		}
		return nil
	})
}

// knpEnforcing reads kube-network-policies' two parts off the machine: its table's rules that
// queue pods' packets, and a reader bound to the queue (/proc/net/netfilter/nfnetlink_queue).
func knpEnforcing(ctx context.Context) (bool, string) {
	rules, table := knpRules(ctx)
	reader := knpQueueReader()
	switch {
	case !table:
		return false, "no table inet " + KubeNetworkPoliciesTable
	case !rules:
		return false, "its table sends no packet to the NFQUEUE target"
	case !reader:
		return false, "nothing reads its queue (none bound in /proc/net/netfilter/nfnetlink_queue)"
	}
	return true, ""
}

// knpRules reports whether the table exists and whether it queues packets.
func knpRules(ctx context.Context) (rules, table bool) {
	out, err := run(ctx, "nft", "list", "table", "inet", KubeNetworkPoliciesTable)
	if err != nil {
		return false, false
	}
	// nft prints the compat target as `xt target "NFQUEUE"` (or `queue` with nft_queue).
	return strings.Contains(out, "NFQUEUE") || strings.Contains(out, "queue "), true
}

// knpQueueReader reports whether some process is bound to a netfilter queue.
func knpQueueReader() bool {
	b, err := os.ReadFile("/proc/net/netfilter/nfnetlink_queue")
	return err == nil && strings.TrimSpace(string(b)) != ""
}

// StopKubeNetworkPolicies sends the running kube-network-policies sig and returns when the
// process is gone. Upstream catches SIGINT alone: on it, its shutdown deletes its table. Any
// other signal, SIGTERM among them (what the kubelet sends a pod that is stopped, in a rollout
// or an eviction), ends it at once, its table left behind.
func (c *Cluster) StopKubeNetworkPolicies(ctx context.Context, sig syscall.Signal) error {
	return c.signalEnforcer(ctx, EnforcerKubeNetworkPolicies, sig)
}

// signalEnforcer sends the running enforcer (the process named as the enforcer is) sig and
// returns when it is gone, after checking that it is this cluster's enforcer.
func (c *Cluster) signalEnforcer(ctx context.Context, name string, sig syscall.Signal) error {
	return c.signalProcess(ctx, name, name, sig)
}

// stateOf is the running cluster's recorded state, when it runs enforcer.
func (c *Cluster) stateOf(enforcer string) (State, error) {
	st, err := ReadState(c.dirs)
	if err != nil {
		return st, err
	}
	if st.Enforcer != enforcer {
		return st, fmt.Errorf("this cluster runs enforcer %s, not %s", st.Enforcer, enforcer)
	}
	return st, nil
}

// signalProcess sends process (the enforcer's program) sig and returns when it is gone, after
// checking that this cluster runs enforcer.
func (c *Cluster) signalProcess(ctx context.Context, enforcer, name string, sig syscall.Signal) error {
	if _, err := c.stateOf(enforcer); err != nil {
		return err
	}
	pid, err := readPid(filepath.Join(c.dirs.Pids(), name+".pid"))
	if err != nil || !alive(pid) {
		return fmt.Errorf("%s is not running", name)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("signal %s: %w", name, err)
	}
	for alive(pid) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s still runs after %s: %w", name, sig, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// StartKubeNetworkPolicies starts kube-network-policies again on the running cluster and waits
// until it enforces (its queue rules in place and read).
func (c *Cluster) StartKubeNetworkPolicies(ctx context.Context) error {
	st, err := c.stateOf(EnforcerKubeNetworkPolicies)
	if err != nil {
		return err
	}
	c.opts.Holes = st.OpenHoles()
	c.bins.kubeNetworkPolicies = filepath.Join(c.dirs.Bin(), "kube-network-policies") // linked there at up
	return c.startKubeNetworkPolicies(ctx)
}
