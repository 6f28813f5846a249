package node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/antifailure/af/testcluster/internal/build"
	"github.com/antifailure/af/testcluster/internal/layout"
)

// Cilium (build.CiliumAgent) as the test cluster runs it: cilium-agent as a host process, as
// its DaemonSet would run it on the node, without cilium-operator (which does not build here):
//   - IPAM from the node's spec.podCIDR (the controller manager allocates it), native routing,
//     no masquerade, no kube-proxy replacement (kube-proxy stays), IPv4 only, no Hubble, no
//     health endpoints, no L7 proxy: the policy engine and its datapath, nothing more;
//   - the node keeps its address (layout.NodeIP) on the bridge device, as a /32 with no pod on
//     it: the agent routes the pods' range through its own cilium_host;
//   - its devices are the fake internet's and metadata server's links only, so it attaches
//     nothing to the machine's own interfaces;
//   - the CRDs it needs are applied from its release (the operator registers them upstream),
//     and it gets cluster-admin here, as kube-router does (a test-only component).
//
// IPv4 only, without holes: docs/runtime.md, "Cilium".

// ciliumRunDir is where the agent keeps its socket and pid file: fixed upstream
// (defaults.RuntimePath), not under the cluster's directories.
const ciliumRunDir = "/var/run/cilium"

// ciliumBPFRoot is where the agent mounts the BPF filesystem and pins its maps and programs.
const ciliumBPFRoot = "/sys/fs/bpf"

// nodePrefix is the prefix of the node's address on the bridge: the pods' whole range where
// pods are on the bridge, the address alone under Cilium, which routes the range itself.
func (c *Cluster) nodePrefix() string {
	if c.opts.Enforcer == EnforcerCilium {
		return "/32"
	}
	return "/24"
}

// cniBinDir is where containerd finds CNI plugins: Debian's, and under Cilium a directory of
// the cluster's own with Debian's plugins and cilium-cni.
func (c *Cluster) cniBinDir() string {
	if c.opts.Enforcer == EnforcerCilium {
		return filepath.Join(c.dirs.State, "cni-bin")
	}
	return "/usr/lib/cni"
}

// linkCNIPlugins fills cniBinDir with links to Debian's plugins and to cilium-cni.
func (c *Cluster) linkCNIPlugins() error {
	dir := c.cniBinDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cni plugins: %w", err)
	}
	entries, err := os.ReadDir("/usr/lib/cni")
	if err != nil {
		return fmt.Errorf("cni plugins: %w", err)
	}
	links := map[string]string{"cilium-cni": c.bins.ciliumCNI}
	for _, e := range entries {
		links[e.Name()] = filepath.Join("/usr/lib/cni", e.Name())
	}
	for name, target := range links {
		p := filepath.Join(dir, name)
		_ = os.Remove(p)
		if err := os.Symlink(target, p); err != nil {
			return fmt.Errorf("cni plugins: %w", err)
		}
	}
	if err := os.MkdirAll(filepath.Join(c.configDir(), "cni"), 0o755); err != nil {
		return err
	}
	return writeFile(c.ciliumCNISource(), ciliumCNIConfig, 0o644)
}

// ciliumCNIConfig is the configuration the agent writes for containerd once it is ready
// (--read-cni-conf): upstream's own, at CNI version 0.4.0, which Debian's containerd 1.6 reads
// (it skips upstream's 1.0.0: "no network config found").
const ciliumCNIConfig = `{
  "cniVersion": "0.4.0",
  "name": "cilium",
  "plugins": [
    {"type": "cilium-cni", "enable-debug": false, "log-file": "/var/run/cilium/cilium-cni.log"}
  ]
}
`

func (c *Cluster) ciliumCNISource() string {
	return filepath.Join(c.configDir(), "cilium-cni.conflist")
}

func (c *Cluster) ciliumLibDir() string { return filepath.Join(c.dirs.State, "cilium") }

func (c *Cluster) ciliumCNIConf() string {
	return filepath.Join(c.configDir(), "cni", "05-cilium.conflist")
}

func (c *Cluster) ciliumAgent() process {
	return process{name: "cilium-agent", path: c.bins.ciliumAgent, argv: append([]string{"cilium-agent"}, joinFlags(
		"k8s-kubeconfig-path", c.kubeconfig("cilium"),
		"ipam", "kubernetes",
		"routing-mode", "native",
		"ipv4-native-routing-cidr", layout.PodCIDR,
		"enable-ipv4-masquerade", "false",
		"enable-ipv6", "false",
		"kube-proxy-replacement", "false",
		"bpf-lb-sock", "false",
		"enable-health-checking", "false",
		"enable-endpoint-health-checking", "false",
		"enable-l7-proxy", "false",
		"enable-hubble", "false",
		"identity-allocation-mode", "crd",
		"enable-policy", "default",
		"cgroup-root", "/sys/fs/cgroup/unified",
		"bpf-root", ciliumBPFRoot,
		"state-dir", ciliumRunDir,
		"lib-dir", c.ciliumLibDir(),
		"devices", csv(layout.InetVethHost, layout.MetaVethHost),
		"read-cni-conf", c.ciliumCNISource(),
		"write-cni-conf-when-ready", c.ciliumCNIConf(),
	)...), env: []string{
		"K8S_NODE_NAME=" + layout.NodeName,
		// clang 18.1 or later compiles its datapath (Debian's clang-19 is not on PATH).
		"PATH=/usr/lib/llvm-19/bin:" + os.Getenv("PATH"),
	}}
}

// ciliumSource is the directory of Cilium's module in the module cache (downloaded when the
// agent was built): its BPF sources and CRDs are read from there.
func ciliumSource(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMODCACHE").Output()
	if err != nil {
		return "", fmt.Errorf("find the module cache: %w", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "github.com", "cilium", "cilium@"+build.CiliumVersion)
	if _, err := os.Stat(filepath.Join(dir, "bpf")); err != nil {
		return "", fmt.Errorf("cilium's sources: %w", err)
	}
	return dir, nil
}

// ciliumCRDs are the CRDs the agent waits for (pkg/k8s/synced/crd.go).
var ciliumCRDs = []string{
	"v2/ciliumidentities.yaml", "v2/ciliumendpoints.yaml", "v2/ciliumnodes.yaml",
	"v2/ciliumnetworkpolicies.yaml", "v2/ciliumclusterwidenetworkpolicies.yaml",
	"v2/ciliumcidrgroups.yaml", "v2/ciliumloadbalancerippools.yaml",
	"v2alpha1/ciliumpodippools.yaml", "v2alpha1/ciliuml2announcementpolicies.yaml",
}

// ciliumRBAC gives the agent cluster-admin, as kube-router has here (a test-only component).
func ciliumRBAC() string { return clusterAdmin("af-cilium", "af:cilium") }

// startCilium applies the CRDs, copies the BPF sources to the agent's writable library
// directory, starts the agent once the node is registered (its spec.podCIDR set) and waits
// for the CNI configuration it writes when it is ready.
func (c *Cluster) startCilium(ctx context.Context) error {
	src, err := ciliumSource(ctx)
	if err != nil {
		return err
	}
	var docs []string
	for _, f := range ciliumCRDs {
		b, err := os.ReadFile(filepath.Join(src, "pkg/k8s/apis/cilium.io/client/crds", f))
		if err != nil {
			return fmt.Errorf("cilium CRDs: %w", err)
		}
		docs = append(docs, string(b))
	}
	docs = append(docs, ciliumRBAC())
	if _, err := c.Kubectl(ctx, strings.Join(docs, "\n---\n"), "apply", "-f", "-"); err != nil {
		return fmt.Errorf("cilium CRDs: %w", err)
	}
	lib := c.ciliumLibDir()
	if err := os.RemoveAll(lib); err != nil {
		return err
	}
	if err := os.MkdirAll(lib, 0o755); err != nil {
		return err
	}
	if _, err := run(ctx, "cp", "-r", filepath.Join(src, "bpf"), lib+"/"); err != nil {
		return fmt.Errorf("cilium BPF sources: %w", err)
	}
	if _, err := run(ctx, "chmod", "-R", "u+w", lib); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "the node's pod range", "kube-controller-manager", 2*time.Minute, func(ctx context.Context) error {
		out, err := c.Kubectl(ctx, "", "get", "node", layout.NodeName, "-o", "jsonpath={.spec.podCIDR}")
		if err != nil {
			return err
		}
		if strings.TrimSpace(out) == "" {
			return fmt.Errorf("no spec.podCIDR yet")
		}
		return nil
	}); err != nil {
		return err
	}
	return c.startCiliumAgent(ctx)
}

// StopCilium sends the running cilium-agent sig and returns when it is gone; its datapath
// stays as its shutdown leaves it (nothing is removed here).
func (c *Cluster) StopCilium(ctx context.Context, sig syscall.Signal) error {
	return c.signalProcess(ctx, EnforcerCilium, "cilium-agent", sig)
}

// StartCilium starts cilium-agent again on the running cluster and waits until it is ready
// (its CNI configuration written anew).
func (c *Cluster) StartCilium(ctx context.Context) error {
	if _, err := c.stateOf(EnforcerCilium); err != nil {
		return err
	}
	c.bins.ciliumAgent = filepath.Join(c.dirs.Bin(), "cilium-agent") // linked there at up
	// Its readiness is the configuration it writes: the one of its last run goes first.
	if err := os.Remove(c.ciliumCNIConf()); err != nil && !os.IsNotExist(err) {
		return err
	}
	return c.startCiliumAgent(ctx)
}

// startCiliumAgent starts the agent and waits for the CNI configuration it writes when ready.
func (c *Cluster) startCiliumAgent(ctx context.Context) error {
	if err := c.start(c.ciliumAgent()); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "cilium-agent's CNI configuration", "cilium-agent", 5*time.Minute, func(ctx context.Context) error {
		if _, err := os.Stat(c.ciliumCNIConf()); err != nil {
			return fmt.Errorf("not written yet")
		}
		return nil
	}); err != nil {
		return err
	}
	// Debian's containerd 1.6 reloads its CNI configuration on each event in the directory;
	// on the agent's write (a temporary file renamed) it reloaded at the temporary file's
	// removal, found nothing, and did not look again (seen: "no network config found" with the
	// file in place, the node NotReady for good). The same content put in place once more is
	// a second event, after which it reads the file.
	b, err := os.ReadFile(c.ciliumCNIConf())
	if err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(c.ciliumCNIConf()), ".af-cilium.tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, c.ciliumCNIConf())
}

// ciliumLinks are the interfaces the agent made: its router pair and the pods' veths.
func ciliumLinks(ctx context.Context) []string {
	out, err := run(ctx, "ip", "-o", "link", "show")
	if err != nil {
		return nil
	}
	var names []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		n := strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0]
		if n == "cilium_host" || n == "cilium_net" || n == "cilium_vxlan" || strings.HasPrefix(n, "lxc") {
			names = append(names, n)
		}
	}
	return names
}

// removeCilium removes what the agent leaves on the machine beside its interfaces and chains:
// its pinned maps and programs, the BPF filesystem it mounted, and its run directory.
func removeCilium(ctx context.Context) error {
	var errs []string
	if pathExists(filepath.Join(ciliumBPFRoot, "tc")) || pathExists(filepath.Join(ciliumBPFRoot, "cilium")) {
		if _, err := run(ctx, "umount", ciliumBPFRoot); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if err := os.RemoveAll(ciliumRunDir); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return fmt.Errorf("cilium's leftovers: %s", strings.Join(errs, "; "))
	}
	return nil
}

// ciliumLeftovers names what removeCilium removes, where it is still there.
func ciliumLeftovers() []string {
	var out []string
	if pathExists(filepath.Join(ciliumBPFRoot, "tc")) || pathExists(filepath.Join(ciliumBPFRoot, "cilium")) {
		out = append(out, "mount "+ciliumBPFRoot+" (Cilium's pinned maps and programs)")
	}
	if pathExists(ciliumRunDir) {
		out = append(out, "directory "+ciliumRunDir)
	}
	return out
}

func pathExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
