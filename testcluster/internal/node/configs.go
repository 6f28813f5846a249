package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/antifailure/af/testcluster/internal/layout"
)

// Image references of the images the cluster builds itself.
const (
	PauseImage   = "af.test/pause:1"
	TestImage    = "af.test/aftest:1"
	CoreDNSImage = "af.test/coredns:" + "v1.15.0"
	TraefikImage = "af.test/traefik:" + "v3.6.12"
)

// mirroredRegistries are answered by the local registry, so that a pull of an
// image the cluster lacks never leaves the machine.
var mirroredRegistries = []string{layout.RegistryAddr, "af.test", "docker.io", "registry.k8s.io", "ghcr.io", "quay.io", "gcr.io", "_default"}

func writeFile(path, content string, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func (c *Cluster) configDir() string { return filepath.Join(c.dirs.State, "config") }

func (c *Cluster) writeContainerdConfig() error {
	certsD := filepath.Join(c.configDir(), "certs.d")
	for _, reg := range mirroredRegistries {
		hosts := fmt.Sprintf("server = \"http://%s\"\n\n[host.\"http://%s\"]\n  capabilities = [\"pull\", \"resolve\", \"push\"]\n  skip_verify = true\n", layout.RegistryAddr, layout.RegistryAddr)
		if err := writeFile(filepath.Join(certsD, reg, "hosts.toml"), hosts, 0o644); err != nil {
			return err
		}
	}
	cfg := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  enable_selinux = false
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %q
`, filepath.Join(c.dirs.State, "containerd"), filepath.Join(c.dirs.Run, "containerd"), c.dirs.ContainerdSocket(),
		PauseImage, filepath.Join(c.dirs.Run, "runc"), c.cniBinDir(), filepath.Join(c.configDir(), "cni"), certsD)
	return writeFile(filepath.Join(c.configDir(), "containerd.toml"), cfg, 0o644)
}

func (c *Cluster) writeCNIConfig() error {
	if c.opts.Enforcer == EnforcerCilium {
		return c.linkCNIPlugins() // the agent writes its own configuration when it is ready
	}
	cfg := fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": %q,
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": %s,
        "routes": %s,
        "dataDir": %q
      }
    },
%s    {"type": "loopback"}
  ]
}
`, layout.CNINetwork, layout.Bridge, c.cniRanges(), c.cniRoutes(), filepath.Join(c.dirs.State, "cni-ipam"), c.cniTuning())
	return writeFile(filepath.Join(c.configDir(), "cni", "10-af-bridge.conflist"), cfg, 0o644)
}

// cniRanges and cniRoutes are host-local's address ranges and the pods' routes: IPv4, and on a
// dual-stack cluster IPv6 beside it.
func (c *Cluster) cniRanges() string {
	r := fmt.Sprintf(`[[{"subnet": %q, "gateway": %q}]`, layout.PodCIDR, layout.NodeIP)
	if c.opts.DualStack {
		r += fmt.Sprintf(`, [{"subnet": %q, "gateway": %q}]`, layout.PodCIDR6, layout.NodeIP6)
	}
	return r + "]"
}

func (c *Cluster) cniRoutes() string {
	if c.opts.DualStack {
		return `[{"dst": "0.0.0.0/0"}, {"dst": "::/0"}]`
	}
	return `[{"dst": "0.0.0.0/0"}]`
}

// kubeletAddress is where the kubelet listens: the node's IPv4 address, or on a dual-stack
// node every address (as a kubelet does by default), so that it answers on the node's IPv6
// address too.
func (c *Cluster) kubeletAddress() string {
	if c.opts.DualStack {
		return `"::"`
	}
	return layout.NodeIP
}

func (c *Cluster) writeKubeletConfig() error {
	pki := c.dirs.PKI()
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: %s
authorization:
  mode: AlwaysAllow
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
clusterDomain: cluster.local
clusterDNS: [%s]
resolvConf: %s
containerRuntimeEndpoint: unix://%s
tlsCertFile: %s
tlsPrivateKeyFile: %s
podCIDR: %s
maxPods: 60
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "1%%"
  imagefs.available: "1%%"
  nodefs.inodesFree: "1%%"
serializeImagePulls: false
protectKernelDefaults: false
makeIPTablesUtilChains: false
staticPodPath: ""
podLogsDir: %s
`, c.kubeletAddress(), filepath.Join(pki, "ca.crt"), layout.ClusterDNS, filepath.Join(c.configDir(), "empty-resolv.conf"),
		c.dirs.ContainerdSocket(), filepath.Join(pki, "kubelet-serving.crt"), filepath.Join(pki, "kubelet-serving.key"), layout.PodCIDR,
		filepath.Join(c.dirs.State, "pod-logs"))
	if err := writeFile(filepath.Join(c.configDir(), "empty-resolv.conf"), "# af test cluster: pods without cluster DNS get no resolver\n", 0o644); err != nil {
		return err
	}
	return writeFile(filepath.Join(c.configDir(), "kubelet.yaml"), cfg, 0o644)
}

func (c *Cluster) writeKubeProxyConfig() error {
	cfg := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: %s
hostnameOverride: %s
bindAddress: %s
clusterCIDR: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: [%s]
iptables:
  masqueradeAll: false
  localhostNodePorts: false
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, c.kubeconfig("kube-proxy"), layout.NodeName, layout.NodeIP, c.podCIDRs(), c.nodePortAddresses())
	return writeFile(filepath.Join(c.configDir(), "kube-proxy.yaml"), cfg, 0o644)
}

// nodePortAddresses are the node's own addresses as single-address ranges: where kube-proxy
// serves NodePorts.
func (c *Cluster) nodePortAddresses() string {
	if c.opts.DualStack {
		return layout.NodeIP + "/32, " + layout.NodeIP6 + "/128"
	}
	return layout.NodeIP + "/32"
}

func (c *Cluster) writeRegistryConfig() error {
	cfg := fmt.Sprintf(`version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
`, filepath.Join(c.dirs.State, "registry"), layout.RegistryAddr)
	return writeFile(filepath.Join(c.configDir(), "registry.yaml"), cfg, 0o644)
}

func (c *Cluster) kubeconfig(name string) string {
	return filepath.Join(c.configDir(), name+".kubeconfig")
}

// certSpecs are the certificates of the cluster's components.
func certSpecs() []certSpec {
	return []certSpec{
		{file: "apiserver", cn: "kube-apiserver", server: true,
			ips: []string{layout.NodeIP, layout.APIService, "127.0.0.1", layout.NodeIP6},
			dns: []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"}},
		{file: "apiserver-kubelet-client", cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}},
		{file: "admin", cn: "af-admin", orgs: []string{"system:masters"}},
		{file: "kube-controller-manager", cn: "system:kube-controller-manager"},
		{file: "kube-scheduler", cn: "system:kube-scheduler"},
		{file: "kubelet", cn: "system:node:" + layout.NodeName, orgs: []string{"system:nodes"}},
		{file: "kubelet-serving", cn: layout.NodeName, server: true, ips: []string{layout.NodeIP, "127.0.0.1", layout.NodeIP6}, dns: []string{layout.NodeName}},
		{file: "kube-proxy", cn: "system:kube-proxy"},
		{file: "kube-router", cn: "af:kube-router"},
		{file: "kube-network-policies", cn: "af:kube-network-policies"},
		{file: "cilium", cn: "af:cilium"},
	}
}

func (c *Cluster) writeKubeconfigs() error {
	server := fmt.Sprintf("https://%s:%d", layout.NodeIP, layout.APIServerPort)
	for _, name := range []string{"kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kube-router", "kube-network-policies", "cilium"} {
		if err := writeKubeconfig(c.kubeconfig(name), c.dirs.PKI(), name, server); err != nil {
			return err
		}
	}
	return writeKubeconfig(c.dirs.Kubeconfig(), c.dirs.PKI(), "admin", server)
}

func joinFlags(kv ...string) []string {
	out := make([]string, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, "--"+kv[i]+"="+kv[i+1])
	}
	return out
}

func csv(s ...string) string { return strings.Join(s, ",") }
