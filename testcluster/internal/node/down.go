package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/antifailure/af/testcluster/internal/layout"
)

// stopOrder is the order processes are asked to stop: the enforcer and node
// agents before the control plane, the runtime and the store last.
var stopOrder = []string{
	"kube-router", "kube-network-policies", "cilium-agent", "ingress-http", "ingress-https", "kube-proxy", "kubelet", "kube-scheduler",
	"kube-controller-manager", "kube-apiserver", "registry", "containerd", "etcd", "fake-internet", "fake-metadata", "node-service", "node-service-v6",
}

// Down removes everything the cluster made: processes (also ones no pid file
// names), pod cgroups, mounts, network namespaces, interfaces, iptables chains,
// ipsets, nftables tables, and the state and run directories. It is safe to run
// at any time, also when nothing is up and after a crash; it goes through every
// step and reports all the steps that failed.
func (c *Cluster) Down(ctx context.Context) error {
	if err := CheckRoot(); err != nil {
		return err
	}
	st, _ := ReadState(c.dirs)
	var errs []error
	killed := c.stopProcesses()
	inCgroups, cgErr := killCgroups()
	strays, strayErr := c.killStrays()
	errs = append(errs, cgErr, strayErr)
	// Killed processes whose parent is gone wait as zombies until PID 1 reaps
	// them; wait (bounded) so that nothing of the cluster shows in ps after Down.
	waitGone(append(append(killed, inCgroups...), strays...), 10*time.Second)
	errs = append(errs, unmountAll(c.dirs))
	for _, ns := range ourNetns(ctx) {
		if _, err := run(ctx, "ip", "netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	for _, l := range ourLinks(ctx) {
		if _, err := os.Stat("/sys/class/net/" + l); err == nil {
			// A veth goes away by itself once its peer's namespace is gone.
			if _, err := run(ctx, "ip", "link", "del", l); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
				errs = append(errs, err)
			}
		}
	}
	errs = append(errs, removeChains(ctx), removeCilium(ctx))
	for _, s := range ourIPSets(ctx) {
		if _, err := run(ctx, "ipset", "destroy", s); err != nil {
			errs = append(errs, err)
		}
	}
	for _, t := range ourNftTables(ctx) {
		f := strings.Fields(t)
		if _, err := run(ctx, "nft", "delete", "table", f[0], f[1]); err != nil {
			errs = append(errs, err)
		}
	}
	if st.IPForward != "" {
		errs = append(errs, setSysctl("net.ipv4.ip_forward", st.IPForward))
	}
	if st.IPv6Forward != "" {
		errs = append(errs, setSysctl("net.ipv6.conf.all.forwarding", st.IPv6Forward))
	}
	errs = append(errs, removeOutsideFiles(c.dirs), c.removeDirs())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cluster down: %w", err)
	}
	return nil
}

// stopProcesses asks each recorded process to stop, then kills what is left.
// It returns the pids it signalled.
func (c *Cluster) stopProcesses() []int {
	var pids []int
	for _, name := range stopOrder {
		pid, err := readPid(filepath.Join(c.dirs.Pids(), name+".pid"))
		if err == nil && alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGTERM)
			pids = append(pids, pid)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return pids
}

// waitGone waits until none of pids exists any more (not even as a zombie), or until timeout.
func waitGone(pids []int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for _, pid := range pids {
		for time.Now().Before(deadline) {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); os.IsNotExist(err) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// killStrays kills every process that still belongs to the cluster and
// returns the pids it killed.
func (c *Cluster) killStrays() ([]int, error) {
	var killed []int
	for range 50 {
		pids := ourProcesses(c.dirs)
		if len(pids) == 0 {
			return killed, nil
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		killed = append(killed, pids...)
		time.Sleep(100 * time.Millisecond)
	}
	return killed, fmt.Errorf("processes still running: %v", ourProcesses(c.dirs))
}

// killCgroups kills every process in the pod cgroups and removes the cgroups.
// It returns the pids it killed.
func killCgroups() ([]int, error) {
	var errs []error
	var killed []int
	for _, root := range ourCgroups() {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- { // children before parents
			pids, err := emptyCgroup(dirs[i])
			killed = append(killed, pids...)
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	return killed, errors.Join(errs...)
}

func emptyCgroup(dir string) ([]int, error) {
	var killed []int
	for range 100 {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			break
		}
		procs := strings.Fields(string(b))
		if len(procs) == 0 {
			break
		}
		for _, p := range procs {
			var pid int
			if _, err := fmt.Sscan(p, &pid); err == nil && pid > 1 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				killed = append(killed, pid)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	var err error
	for range 50 {
		if err = os.Remove(dir); err == nil || os.IsNotExist(err) {
			return killed, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return killed, fmt.Errorf("remove cgroup %s: %w", dir, err)
}

func unmountAll(dirs layout.Dirs) error {
	for range 5 {
		mounts := ourMounts(dirs)
		if len(mounts) == 0 {
			return nil
		}
		for _, m := range mounts {
			_ = syscall.Unmount(m, syscall.MNT_DETACH)
		}
	}
	if m := ourMounts(dirs); len(m) > 0 {
		return fmt.Errorf("still mounted: %v", m)
	}
	return nil
}

// removeDirs keeps the logs of the last cluster in the cache, then removes the
// state and run directories. It refuses while anything is still mounted below
// them, so that removing can never reach through a mount.
func (c *Cluster) removeDirs() error {
	if m := ourMounts(c.dirs); len(m) > 0 {
		return fmt.Errorf("not removing %s and %s: still mounted: %v", c.dirs.State, c.dirs.Run, m)
	}
	if _, err := os.Stat(c.dirs.Logs()); err == nil {
		_ = os.RemoveAll(c.dirs.LastLogs())
		if err := os.MkdirAll(filepath.Dir(c.dirs.LastLogs()), 0o755); err == nil {
			_ = os.Rename(c.dirs.Logs(), c.dirs.LastLogs())
		}
	}
	var errs []error
	for _, d := range []string{c.dirs.State, c.dirs.Run} {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}
