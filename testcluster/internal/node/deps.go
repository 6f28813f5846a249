package node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// debianPackages maps a file the cluster needs to the Debian package providing it.
var debianPackages = []struct{ file, pkg string }{
	{"/usr/bin/containerd", "containerd"},
	{"/usr/bin/ctr", "containerd"},
	{"/usr/sbin/runc", "runc"},
	{"/usr/lib/cni/bridge", "containernetworking-plugins"},
	{"/usr/bin/etcd", "etcd-server"},
	{"/usr/bin/docker-registry", "docker-registry"},
	{"/usr/sbin/nft", "nftables"},
	{"/usr/sbin/iptables", "iptables"},
	{"/usr/sbin/ipset", "ipset"},
	{"/usr/sbin/conntrack", "conntrack"},
	{"/bin/busybox", "busybox-static"},
	{"/sbin/ip", "iproute2"},
	// Cilium's agent compiles its datapath with clang 18.1 or later (Debian 12: clang-19).
	{"/usr/lib/llvm-19/bin/clang", "clang-19"},
}

// EnsurePackages installs the Debian packages whose files are missing, with
// `apt-get update` once first. Package scripts are kept from starting services
// (a policy-rc.d that refuses, unless the machine already has one).
func EnsurePackages(ctx context.Context, logf func(string, ...any)) error {
	var missing []string
	seen := map[string]bool{}
	for _, d := range debianPackages {
		if _, err := os.Stat(d.file); err != nil && !seen[d.pkg] {
			seen[d.pkg] = true
			missing = append(missing, d.pkg)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	logf("installing Debian packages: %s", strings.Join(missing, " "))
	const policy = "/usr/sbin/policy-rc.d"
	if _, err := os.Stat(policy); os.IsNotExist(err) {
		if err := os.WriteFile(policy, []byte("#!/bin/sh\nexit 101\n"), 0o755); err != nil {
			return fmt.Errorf("install packages: %w", err)
		}
		defer os.Remove(policy)
	}
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	for _, args := range [][]string{
		{"update", "-q"},
		append([]string{"install", "-y", "-q", "--no-install-recommends"}, missing...),
	} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get %s: %w\n%s", strings.Join(args, " "), err, tail(string(out), 2000))
		}
	}
	return nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
