package node

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/antifailure/af/testcluster/internal/layout"
)

// What the cluster leaves in the kernel and the file system, found by name.
// Teardown removes what these find; Leftovers reports it.

// ourProcesses returns the pids of processes that belong to the cluster: their
// executable lives in the cache or state directories, or their command line
// names the cluster's run or state directory (containerd shims, etcd, the registry).
func ourProcesses(dirs layout.Dirs) []int {
	self := os.Getpid()
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || pid == 1 {
			continue
		}
		exe, _ := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		cmd := strings.ReplaceAll(string(cmdline), "\x00", " ")
		if under(exe, filepath.Join(dirs.Cache, "build"), filepath.Join(dirs.Cache, "own"), dirs.State) ||
			strings.Contains(cmd, dirs.Run+"/") || strings.Contains(cmd, dirs.State+"/") {
			pids = append(pids, pid)
		}
	}
	return pids
}

func under(path string, dirs ...string) bool {
	for _, d := range dirs {
		if path != "" && strings.HasPrefix(path, d+"/") {
			return true
		}
	}
	return false
}

// ourMounts returns mount points under the cluster's directories and the CNI
// network namespaces, deepest first.
func ourMounts(dirs layout.Dirs) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if under(mp, dirs.State, dirs.Run) || mp == dirs.State || mp == dirs.Run ||
			strings.HasPrefix(mp, "/run/netns/cni-") || strings.HasPrefix(mp, "/var/run/netns/cni-") ||
			mp == "/run/netns/"+layout.InetNetns || mp == "/run/netns/"+layout.MetaNetns {
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return strings.Count(out[i], "/") > strings.Count(out[j], "/") })
	return out
}

func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// ourNetns returns the named network namespaces the cluster made (its own and the CNI's).
func ourNetns(ctx context.Context) []string {
	out, err := run(ctx, "ip", "netns", "list")
	if err != nil {
		return nil
	}
	var names []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if f[0] == layout.InetNetns || f[0] == layout.MetaNetns || strings.HasPrefix(f[0], "cni-") {
			names = append(names, f[0])
		}
	}
	return names
}

// ourLinks returns the network interfaces the cluster made: its bridge, the
// veths to the test namespaces and any interface enslaved to the bridge.
func ourLinks(ctx context.Context) []string {
	var names []string
	for _, n := range []string{layout.Bridge, layout.InetVethHost, layout.MetaVethHost} {
		if _, err := os.Stat("/sys/class/net/" + n); err == nil {
			names = append(names, n)
		}
	}
	names = append(names, ciliumLinks(ctx)...)
	if out, err := run(ctx, "ip", "-o", "link", "show", "master", layout.Bridge); err == nil {
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				names = append(names, strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0])
			}
		}
	}
	return names
}

// ourCgroups returns the pod cgroup trees the kubelet made, one per hierarchy.
func ourCgroups() []string {
	var out []string
	hier, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	out = append(out, hier...)
	if _, err := os.Stat("/sys/fs/cgroup/kubepods"); err == nil { // cgroup v2
		out = append(out, "/sys/fs/cgroup/kubepods")
	}
	return out
}

// ourIPSets returns the ipsets kube-router made.
func ourIPSets(ctx context.Context) []string {
	out, err := run(ctx, "ipset", "list", "-n")
	if err != nil {
		return nil
	}
	var names []string
	for _, n := range strings.Fields(out) {
		if strings.Contains(n, "KUBE-") {
			names = append(names, n)
		}
	}
	return names
}

// ourChains returns "family table chain" for every iptables chain of Kubernetes,
// kube-router or CNI plugins.
func ourChains(ctx context.Context) []string {
	var out []string
	for _, fam := range []string{"iptables", "ip6tables"} {
		for _, table := range []string{"filter", "nat", "mangle", "raw"} {
			save, err := run(ctx, fam+"-save", "-t", table)
			if err != nil {
				continue
			}
			for _, line := range strings.Split(save, "\n") {
				if strings.HasPrefix(line, ":") {
					name := strings.Fields(line[1:])[0]
					if isOurChain(name) {
						out = append(out, fam+" "+table+" "+name)
					}
				}
			}
		}
	}
	return out
}

func isOurChain(name string) bool {
	return strings.HasPrefix(name, "KUBE-") || strings.HasPrefix(name, "CNI-") || strings.HasPrefix(name, "AF-") || strings.HasPrefix(name, "CILIUM_")
}

// ourNftTables returns nftables tables the cluster made directly.
func ourNftTables(ctx context.Context) []string {
	out, err := run(ctx, "nft", "list", "tables")
	if err != nil {
		return nil
	}
	var names []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "table" && (f[2] == layout.GuardTable || f[2] == "kube-proxy" || f[2] == "kube-network-policies") {
			names = append(names, f[1]+" "+f[2])
		}
	}
	return names
}
