package testcluster_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/antifailure/af/internal/testreq"
	"github.com/antifailure/af/testcluster"
)

// TestNothingLeftAfterDown runs after `afcluster down` (AF_TESTCLUSTER_DOWN=1,
// set by make test-cluster): no process, interface, network namespace, nft
// table, iptables chain, ipset, mount, cgroup or state directory may be left.
func TestNothingLeftAfterDown(t *testing.T) {
	if os.Getenv("AF_TESTCLUSTER_DOWN") != "1" {
		// make test runs it after its last phase has taken the cluster down.
		testreq.Elsewhere(t, "runs only after cluster-down; run `make test-cluster` (sets AF_TESTCLUSTER_DOWN=1)")
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
		{"processes", []string{"ps", "-eo", "stat=,args="}, []string{"kube-apiserver", "kubelet", "kube-router", "kube-network-policies", "containerd-shim", "/usr/bin/etcd", "docker-registry serve", "aftool fake-", "aftool serve -tcp 10.244.0.1"}},
	}
	for _, c := range checks {
		out, err := exec.CommandContext(ctxFor(t, 30*time.Second), c.cmd[0], c.cmd[1:]...).CombinedOutput()
		if err != nil {
			t.Errorf("%s: %v: %s", strings.Join(c.cmd, " "), err, out)
			continue
		}
		for _, line := range strings.Split(string(out), "\n") {
			if c.what == "processes" && !ourProcess(line) {
				continue
			}
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

// ourProcess tells, from a `ps -eo stat=,args=` line, a process that could hold something of
// the cluster: a zombie holds nothing (state Z), and a container shim is ours only when it
// serves the cluster's own containerd (its state directory is in its arguments); a shim of
// another container daemon on the machine is not.
func ourProcess(line string) bool {
	stat, args, _ := strings.Cut(strings.TrimSpace(line), " ")
	if strings.HasPrefix(stat, "Z") {
		return false
	}
	if strings.Contains(args, "containerd-shim") {
		return strings.Contains(args, "af-testcluster")
	}
	return true
}

func TestOurProcess(t *testing.T) {
	for line, want := range map[string]bool{
		"Z    [containerd-shim] <defunct>": false,
		"Sl   /usr/bin/containerd-shim-runc-v2 -namespace k8s.io -id 1 -address /run/af-testcluster/containerd/containerd.sock": true,
		"Sl   /usr/bin/containerd-shim-runc-v2 -namespace moby -id 2 -address /run/containerd/containerd.sock":                  false,
		"Ssl  /var/lib/af-testcluster/bin/kubelet --config x":                                                                   true,
	} {
		if got := ourProcess(line); got != want {
			t.Errorf("ourProcess(%q) = %v, want %v", line, got, want)
		}
	}
}
