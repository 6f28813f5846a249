package harden

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// SearchPath is where Host looks for the node's programs, inside its root: the usual places,
// and k3s' own (k3s carries its iptables).
var SearchPath = []string{"/usr/sbin", "/usr/bin", "/sbin", "/bin", "/usr/local/sbin", "/usr/local/bin",
	"/var/lib/rancher/k3s/data/current/bin/aux", "/var/lib/rancher/k3s/data/current/bin"}

// Host runs the node's own programs: with Root "/" (or "") as they are, else changed into Root
// (the node's root mounted in the agent's container), so the node's iptables, its backend and
// its modules are the ones used.
type Host struct {
	Root string
}

func (h Host) root() string {
	if h.Root == "" {
		return "/"
	}
	return h.Root
}

// Look finds name in SearchPath under the root, as the path inside it. A symbolic link is
// taken as it is (Debian's iptables is one, to /etc/alternatives): it points into the node's
// root, which only the program run in it sees.
func (h Host) Look(name string) (string, error) {
	for _, d := range SearchPath {
		p := filepath.Join(d, name)
		fi, err := os.Lstat(filepath.Join(h.root(), p))
		if err != nil || fi.IsDir() {
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 || fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s is not on the node (looked in %s under %s)", name, strings.Join(SearchPath, ":"), h.root())
}

// Run runs name with args on the node.
func (h Host) Run(ctx context.Context, name string, args ...string) (string, error) {
	path, err := h.Look(name)
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, path, args...)
	if h.root() != "/" {
		// The path is the one inside the root: the kernel resolves it after the chroot.
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: h.root()}
	}
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=" + strings.Join(SearchPath, ":")}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// Sysctl writes value to path under the root's /proc/sys (the node's network namespace when the
// agent runs in it).
func (h Host) Sysctl(path, value string) error {
	return os.WriteFile(filepath.Join(h.root(), "proc/sys", path), []byte(value+"\n"), 0o644)
}
