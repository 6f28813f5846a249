package node

import (
	"context"
	"fmt"
	"os"

	"github.com/antifailure/af/testcluster/internal/layout"
)

// Leftovers lists everything of the cluster still present on the machine:
// after Down it must be empty.
func Leftovers(ctx context.Context, dirs layout.Dirs) []string {
	var out []string
	for _, pid := range ourProcesses(dirs) {
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		out = append(out, fmt.Sprintf("process %d %q", pid, firstArg(cmd)))
	}
	for _, c := range ourCgroups() {
		out = append(out, "cgroup "+c)
	}
	for _, m := range ourMounts(dirs) {
		out = append(out, "mount "+m)
	}
	for _, n := range ourNetns(ctx) {
		out = append(out, "netns "+n)
	}
	for _, l := range ourLinks(ctx) {
		out = append(out, "interface "+l)
	}
	for _, c := range ourChains(ctx) {
		out = append(out, "iptables chain "+c)
	}
	for _, s := range ourIPSets(ctx) {
		out = append(out, "ipset "+s)
	}
	for _, t := range ourNftTables(ctx) {
		out = append(out, "nft table "+t)
	}
	for _, f := range outsideFiles(dirs) {
		out = append(out, "file "+f)
	}
	out = append(out, ciliumLeftovers()...)
	for _, d := range []string{dirs.State, dirs.Run} {
		if _, err := os.Stat(d); err == nil {
			out = append(out, "directory "+d)
		}
	}
	return out
}

func firstArg(cmdline []byte) string {
	for i, b := range cmdline {
		if b == 0 {
			return string(cmdline[:i])
		}
	}
	return string(cmdline)
}
