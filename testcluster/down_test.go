package testcluster_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/antifailure/af/testcluster"
)

// TestNothingLeftAfterDown runs after `afcluster down` (AF_TESTCLUSTER_DOWN=1,
// set by make test-cluster): no process, interface, network namespace, nft
// table, iptables chain, ipset, mount, cgroup or state directory may be left.
func TestNothingLeftAfterDown(t *testing.T) {
	if os.Getenv("AF_TESTCLUSTER_DOWN") != "1" {
		msg := "SKIPPED: runs only after cluster-down; run `make test-cluster` (sets AF_TESTCLUSTER_DOWN=1)"
		fmt.Fprintln(os.Stderr, "!!! "+t.Name()+": "+msg)
		t.Skip(msg)
	}
	left, err := testcluster.Leftovers(ctxFor(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Fatalf("left after cluster-down:\n  %s", strings.Join(left, "\n  "))
	}
	// The same, asked of the system directly rather than through the finders
	// that teardown itself uses.
	checks := []struct {
		what string
		cmd  []string
		bad  []string
	}{
		{"interfaces", []string{"ip", "-o", "link"}, []string{"af-cni0", "af-inet0", "af-meta0", "veth"}},
		{"network namespaces", []string{"ip", "netns", "list"}, []string{"af-inet", "af-meta", "cni-"}},
		{"nftables tables", []string{"nft", "list", "tables"}, []string{"af_guard", "kube-proxy"}},
		{"iptables rules", []string{"iptables-save"}, []string{"KUBE-", "CNI-"}},
		{"ipsets", []string{"ipset", "list", "-n"}, []string{"KUBE-"}},
		{"mounts", []string{"cat", "/proc/mounts"}, []string{"af-testcluster", "/run/netns/cni-"}},
		{"processes", []string{"ps", "-eo", "args"}, []string{"kube-apiserver", "kubelet", "kube-router", "containerd-shim", "/usr/bin/etcd", "docker-registry serve", "aftool fake-"}},
	}
	for _, c := range checks {
		out, err := exec.CommandContext(ctxFor(t, 30*time.Second), c.cmd[0], c.cmd[1:]...).CombinedOutput()
		if err != nil {
			t.Errorf("%s: %v: %s", strings.Join(c.cmd, " "), err, out)
			continue
		}
		for _, line := range strings.Split(string(out), "\n") {
			for _, b := range c.bad {
				if strings.Contains(line, b) && !strings.Contains(line, "go test") && !strings.Contains(line, "ps -eo") {
					t.Errorf("%s: still there after cluster-down: %s", c.what, strings.TrimSpace(line))
				}
			}
		}
	}
	for _, d := range []string{"/var/lib/af-testcluster", "/run/af-testcluster"} {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("directory %s still there after cluster-down", d)
		}
	}
}
