package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/antifailure/af/testcluster/internal/layout"
)

// Files the cluster's upstream parts write outside its own directories, at
// paths they do not let us choose: the kubelet's log links, the CNI library's
// result cache, containerd's shim sockets.
const (
	containerLogLinks = "/var/log/containers"
	cniResults        = "/var/lib/cni/results"
	shimSockets       = "/run/containerd/s"
	runcRoot          = "/run/containerd/runc/k8s.io" // from before runc's root was set (older runs)
)

// outsideFiles lists those files that belong to this cluster.
func outsideFiles(dirs layout.Dirs) []string {
	var out []string
	links, _ := filepath.Glob(filepath.Join(containerLogLinks, "*.log"))
	for _, l := range links {
		if target, err := os.Readlink(l); err == nil && strings.HasPrefix(target, dirs.State+"/") {
			out = append(out, l)
		}
	}
	results, _ := filepath.Glob(filepath.Join(cniResults, layout.CNINetwork+"-*"))
	out = append(out, results...)
	// Shim sockets, containerd's own loopback results and runc state carry no
	// owner; the cluster's containerd is the only one here, so when no
	// containerd runs any more, they are its.
	if !containerdRunning() {
		for _, pattern := range []string{filepath.Join(shimSockets, "*"), filepath.Join(cniResults, "cni-loopback-*"), filepath.Join(runcRoot, "*")} {
			found, _ := filepath.Glob(pattern)
			out = append(out, found...)
		}
	}
	return out
}

func containerdRunning() bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil || !strings.HasPrefix(strings.TrimSpace(string(comm)), "containerd") {
			continue
		}
		if pid, err := strconv.Atoi(e.Name()); err == nil && alive(pid) {
			return true
		}
	}
	return false
}

// removeOutsideFiles removes those files, then the directories they were in
// when nothing else is left there.
func removeOutsideFiles(dirs layout.Dirs) error {
	var errs []error
	for _, f := range outsideFiles(dirs) {
		if err := os.RemoveAll(f); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", f, err))
		}
	}
	for _, d := range []string{containerLogLinks, cniResults, filepath.Dir(cniResults), shimSockets, runcRoot, filepath.Dir(runcRoot), filepath.Dir(shimSockets)} {
		_ = os.Remove(d) // only succeeds when empty
	}
	return errors.Join(errs...)
}
