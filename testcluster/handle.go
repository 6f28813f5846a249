package testcluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/antifailure/af/images"
	"github.com/antifailure/af/images/engine"
	"github.com/antifailure/af/internal/afbuild"
	"github.com/antifailure/af/testcluster/internal/layout"
	"github.com/antifailure/af/testcluster/internal/node"
	"github.com/antifailure/af/version"
)

// Enforcers a cluster can run with.
const (
	EnforcerKubeRouter          = node.EnforcerKubeRouter
	EnforcerKubeNetworkPolicies = node.EnforcerKubeNetworkPolicies
	EnforcerNone                = node.EnforcerNone
	EnforcerCilium              = node.EnforcerCilium
)

// FakeInternet names the test hosts beside the cluster. Every address is in a
// network namespace the cluster made; none is a real host.
type FakeInternet struct {
	CIDR      string // the "public" range, 198.51.100.0/24
	PublicTCP string // TCP echo on a public address
	PublicUDP string // UDP echo on a public address
	Resolver  string // the public resolver (UDP and TCP DNS); CoreDNS's only upstream
	// AllowedAPIHost and BlockedAPIHost resolve (through Resolver and CoreDNS) to
	// AllowedAPIIP and BlockedAPIIP, each serving HTTP on :80 and HTTPS on :443.
	AllowedAPIHost, AllowedAPIIP string
	BlockedAPIHost, BlockedAPIIP string
	PublicHost                   string // resolves to the PublicTCP address
	// Domain is the zone of every name the fake resolver answers (af.test).
	Domain string
	// Metadata is the fake metadata server (HTTP), on a link-local address that
	// is not 169.254.169.254.
	Metadata   string
	MetadataIP string
	// The IPv6 twins, served on a dual-stack cluster only (Handle.DualStack): the public TCP
	// and UDP echo, the resolver, and the fake metadata server, each on an address of
	// 2001:db8:af::/48 or, for the metadata server, a unique local one.
	CIDR6, PublicTCP6, PublicUDP6, Resolver6, Metadata6 string
}

// Handle is a running test cluster.
type Handle struct {
	Kubeconfig  string // the administrator's kubeconfig
	BinDir      string // kubectl and the other commands, for PATH
	APIServer   string // https://host:port of the real API server
	APIServerIP string // the API server's address (also the node's IP), for NetworkPolicy ipBlocks
	Registry    string // host:port of the local registry (loopback, plain HTTP)
	// Containerd is the node's containerd socket (AF_CONTAINERD_ADDRESS imports there).
	Containerd string
	// IngressHTTP and IngressHTTPS are loopback addresses of the ingress
	// controller (empty when the cluster runs without one).
	IngressHTTP, IngressHTTPS string
	Enforcer                  string // EnforcerKubeRouter, EnforcerKubeNetworkPolicies or EnforcerNone
	// Holes is true when IPv6 in pods and the NodePort exemption are left open.
	Holes bool
	// HoleIPv6 and HoleNode say which is open: IPv6 in pods, the node (kube-router's whole
	// NodePort exemption, or pods' connections to the node unqueued under
	// kube-network-policies).
	HoleIPv6, HoleNode bool
	// NodeService is a host-network TCP and UDP echo on the node's address inside the
	// NodePort range: it answers from outside any environment, and the node route tries it.
	NodeService string
	// DualStack is true when pods, Services and the node have IPv6 beside IPv4 (afcluster up
	// -dual-stack); NodeService6, PodCIDR6, ServiceCIDR6 and NodeIP6 are then set.
	DualStack                                     bool
	NodeService6, PodCIDR6, ServiceCIDR6, NodeIP6 string
	NodeName                                      string
	PodCIDR, ServiceCIDR                          string
	TestImage                                     string // image with busybox and aftool, present on the node
	Internet                                      FakeInternet

	dirs layout.Dirs
}

func newHandle(dirs layout.Dirs, st node.State) *Handle {
	h := &Handle{
		Kubeconfig:  dirs.Kubeconfig(),
		BinDir:      dirs.Bin(),
		APIServer:   "https://" + net.JoinHostPort(layout.NodeIP, strconv.Itoa(layout.APIServerPort)),
		APIServerIP: layout.NodeIP,
		Registry:    layout.RegistryAddr,
		Containerd:  dirs.ContainerdSocket(),
		Enforcer:    st.Enforcer,
		Holes:       st.OpenHoles().Any(),
		HoleIPv6:    st.OpenHoles().IPv6,
		HoleNode:    st.OpenHoles().Node,
		NodeService: net.JoinHostPort(layout.NodeIP, layout.NodeServicePort),
		NodeName:    layout.NodeName,
		PodCIDR:     layout.PodCIDR,
		ServiceCIDR: layout.ServiceCIDR,
		TestImage:   node.TestImage,
		Internet:    Internet(),
		dirs:        dirs,
	}
	if st.Ingress {
		h.IngressHTTP, h.IngressHTTPS = layout.IngressHTTPAddr, layout.IngressHTTPSAddr
	}
	if st.DualStack {
		h.DualStack = true
		h.NodeService6 = net.JoinHostPort(layout.NodeIP6, layout.NodeServicePort)
		h.PodCIDR6, h.ServiceCIDR6, h.NodeIP6 = layout.PodCIDR6, layout.ServiceCIDR6, layout.NodeIP6
	}
	return h
}

// GateEnv returns the AF_GATE_* variables that point every route of the gate and the probe
// at this cluster's test hosts: the fake internet, the fake metadata server, and the node's
// kubelet and its service in the NodePort range.
func (h *Handle) GateEnv() map[string]string {
	env := map[string]string{
		"AF_GATE_PUBLIC_TCP": h.Internet.PublicTCP,
		"AF_GATE_PUBLIC_DNS": h.Internet.Resolver,
		"AF_GATE_METADATA":   h.Internet.Metadata,
	}
	if _, port, err := net.SplitHostPort(h.NodeService); err == nil {
		env["AF_GATE_NODE_PORTS"] = "10250/tcp," + port + "/tcp," + port + "/udp"
	}
	if h.DualStack {
		env["AF_GATE_PUBLIC_TCP6"] = h.Internet.PublicTCP6
		env["AF_GATE_PUBLIC_DNS6"] = h.Internet.Resolver6
		env["AF_GATE_METADATA6"] = h.Internet.Metadata6
	}
	return env
}

// Env returns KUBECONFIG and PATH for commands run against the cluster.
func (h *Handle) Env() []string {
	return []string{"KUBECONFIG=" + h.Kubeconfig, "PATH=" + h.BinDir + string(os.PathListSeparator) + os.Getenv("PATH")}
}

// Kubectl runs kubectl against the cluster with stdin as its input and returns
// its standard output; a failure carries its standard error.
func (h *Handle) Kubectl(ctx context.Context, stdin string, args ...string) (string, error) {
	return h.KubectlAs(ctx, h.Kubeconfig, stdin, args...)
}

// KubectlAs runs kubectl as Kubectl does, with the identity of the kubeconfig file given.
func (h *Handle) KubectlAs(ctx context.Context, kubeconfig, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, h.BinDir+"/kubectl", append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// ImportImage loads a docker-archive tarball into the node's containerd, where
// pods find it without pulling.
func (h *Handle) ImportImage(ctx context.Context, archive string) error {
	return node.ImportImage(ctx, h.dirs, archive)
}

// PushImage pushes the image ref held in a docker-archive tarball to the local
// registry as repo (e.g. "af/web:1") and returns the reference pods pull it by.
func (h *Handle) PushImage(ctx context.Context, archive, ref, repo string) (string, error) {
	return node.PushImage(ctx, h.dirs, archive, ref, repo)
}

// GuardCounters returns the packets the guard dropped, per counter; every
// value must stay zero.
func (h *Handle) GuardCounters(ctx context.Context) (map[string]uint64, error) {
	return node.GuardCounters(ctx)
}

// WriteTestImage writes a docker-archive tarball at path holding a copy of the
// test image (busybox and aftool) named ref, with env added to its environment:
// a quick distinct image for import and registry tests.
func (h *Handle) WriteTestImage(ctx context.Context, path, ref string, env ...string) error {
	spec, err := node.TestImageSpec(ctx, filepath.Join(h.dirs.Cache, "own", "aftool"))
	if err != nil {
		return err
	}
	spec.Env = env
	return node.WriteImage(spec, ref, path)
}

// ImportBinaryImage builds an image holding one static binary at /<its file name>, which is
// the entrypoint, and imports it into the node as ref: how the demo and the runtime's tests
// make service images without a container daemon.
func (h *Handle) ImportBinaryImage(ctx context.Context, ref, binary string) error {
	name := "/" + filepath.Base(binary)
	archive := filepath.Join(os.TempDir(), fmt.Sprintf("af-image-%d.tar", os.Getpid()))
	defer os.Remove(archive)
	img := images.Files{Entrypoint: []string{name}, Paths: map[string]string{name: binary}, Dirs: []string{"/tmp"}}
	if err := node.WriteImage(img, ref, archive); err != nil {
		return err
	}
	return h.ImportImage(ctx, archive)
}

// ImportEngineImage builds af from the module at repoRoot and imports its engine image into
// the node under the name this build deploys (version.LocalEngineImage): what a test needs
// before af runs a sidecar, a gate or a probe on the cluster. The same binary is imported once
// per bring-up, whichever test (or several at once) asks first.
func (h *Handle) ImportEngineImage(ctx context.Context, repoRoot string) error {
	dir, bin, err := buildAF(ctx, repoRoot)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// The image is made from the binary alone (and the digest this build names): one made
	// from the same bytes since the cluster came up is on the node and in the registry
	// already. Making it again took 10 s of each test process's time.
	sum, err := fileSHA256(bin)
	if err != nil {
		return err
	}
	done := "engine-from-" + sum[:32] + "-" + version.EngineDigest
	if node.Done(h.dirs, done) {
		return nil
	}
	img, err := engine.ImageFromFile(bin, version.EngineDigest)
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	archive := filepath.Join(dir, "engine.tar")
	if err := engine.WriteTarball(archive, version.LocalEngineImage, img); err != nil {
		return err
	}
	imported, err := node.ImportImageOnce(ctx, h.dirs, archive, "engine-"+digest.Hex)
	if err != nil {
		return err
	}
	if !imported { // imported and pushed by an earlier call
		return node.MarkDone(h.dirs, done)
	}
	// And where a pull finds it, as GitHub's registry serves the release: the node's
	// containerd takes ghcr.io from the local registry. A kubelet that verifies an image's
	// pull credentials (KubeletEnsureSecretPulledImages) pulls it again for a pod with pull
	// secrets once another such pod has pulled the same image: that pull must succeed.
	released := strings.TrimPrefix(version.LocalEngineImage, "ghcr.io/")
	if _, err := node.PushImage(ctx, h.dirs, archive, version.LocalEngineImage, released); err != nil {
		return fmt.Errorf("the engine image by its released name in the local registry: %w", err)
	}
	return node.MarkDone(h.dirs, done)
}

// ImportEngineImageAs builds af from the module at repoRoot and imports its engine image into
// the node as ref, and pushes it to the local registry by that name when it is ghcr.io's: an
// image a manifest of deploy/ names (the App's, deploy/harden's), made locally by that name,
// so the manifest is applied as written.
func (h *Handle) ImportEngineImageAs(ctx context.Context, repoRoot, ref string) error {
	dir, bin, err := buildAF(ctx, repoRoot)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	img, err := engine.ImageFromFile(bin, version.EngineDigest)
	if err != nil {
		return err
	}
	archive := filepath.Join(dir, "engine.tar")
	if err := engine.WriteTarball(archive, ref, img); err != nil {
		return err
	}
	if err := h.ImportImage(ctx, archive); err != nil {
		return err
	}
	// And where a pull finds it, as its registry serves it: the node's containerd takes ghcr.io
	// from the local registry. The image is the engine image's bytes, which pods with pull
	// secrets have pulled by then; a kubelet that verifies pull credentials
	// (KubeletEnsureSecretPulledImages) then pulls it again for a pod without them, and
	// without this the pull of a name only imported fails (NotFound).
	if released, ok := strings.CutPrefix(ref, "ghcr.io/"); ok {
		if _, err := node.PushImage(ctx, h.dirs, archive, ref, released); err != nil {
			return fmt.Errorf("%s by its name in the local registry: %w", ref, err)
		}
	}
	return nil
}

// buildAF builds af from the module at repoRoot into a new temporary directory, which the
// caller removes, and returns the directory and the binary's path.
func buildAF(ctx context.Context, repoRoot string) (dir, bin string, err error) {
	if dir, err = os.MkdirTemp("", "af-engine"); err != nil {
		return "", "", err
	}
	bin = filepath.Join(dir, "af")
	if err := afbuild.Build(ctx, repoRoot, bin); err != nil {
		os.RemoveAll(dir)
		return "", "", err
	}
	return dir, bin, nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Internet is the fake internet's plan: its addresses and names, the same wherever it runs
// (beside this test cluster, or beside a k3d cluster for make k8s-conformance).
func Internet() FakeInternet {
	return FakeInternet{
		CIDR:           layout.FakeInternetCIDR,
		PublicTCP:      net.JoinHostPort(layout.PublicIP, "80"),
		PublicUDP:      net.JoinHostPort(layout.PublicIP, "7"),
		Resolver:       net.JoinHostPort(layout.ResolverIP, "53"),
		AllowedAPIHost: layout.AllowedAPIHost,
		AllowedAPIIP:   layout.AllowedAPIIP,
		BlockedAPIHost: layout.BlockedAPIHost,
		BlockedAPIIP:   layout.BlockedAPIIP,
		PublicHost:     layout.PublicHost,
		Domain:         layout.FakeDomain,
		Metadata:       net.JoinHostPort(layout.MetadataIP, "80"),
		MetadataIP:     layout.MetadataIP,
		CIDR6:          layout.FakeInternetCIDR6,
		PublicTCP6:     net.JoinHostPort(layout.PublicIP6, "80"),
		PublicUDP6:     net.JoinHostPort(layout.PublicIP6, "7"),
		Resolver6:      net.JoinHostPort(layout.ResolverIP6, "53"),
		Metadata6:      net.JoinHostPort(layout.MetadataIP6, "80"),
	}
}

// TestImageRef is the test image's reference.
const TestImageRef = node.TestImage

// WriteTestImageArchive writes the test image (Debian's static busybox and the aftool binary
// given) as a docker archive named TestImageRef, for clusters other than this one (make
// k8s-conformance imports it into k3d). It needs /bin/busybox from busybox-static.
func WriteTestImageArchive(ctx context.Context, path, aftool string) error {
	spec, err := node.TestImageSpec(ctx, aftool)
	if err != nil {
		return err
	}
	return node.WriteImage(spec, node.TestImage, path)
}

// KubeconfigAs writes a kubeconfig into dir that authenticates as the ServiceAccount
// namespace/name (a token the API server issues for 10 minutes), for tests of what an
// identity with only its own RBAC can and cannot do.
func (h *Handle) KubeconfigAs(ctx context.Context, namespace, name, dir string) (string, error) {
	token, err := h.Kubectl(ctx, "", "-n", namespace, "create", "token", name, "--duration", "10m")
	if err != nil {
		return "", err
	}
	admin, err := clientcmd.LoadFromFile(h.Kubeconfig)
	if err != nil {
		return "", err
	}
	cur, ok := admin.Contexts[admin.CurrentContext]
	if !ok {
		return "", fmt.Errorf("the test cluster's kubeconfig has no current context")
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = admin.Clusters[cur.Cluster]
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: strings.TrimSpace(token)}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: name}
	cfg.CurrentContext = name
	path := filepath.Join(dir, name+".kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}

// CIKubeconfig applies deploy/ci/ of the module at repoRoot as written (the identity, its
// role and binding, and the admission policies that keep it to af's namespaces), waits until
// the API server enforces the policies, and returns a self-contained kubeconfig for af-ci as
// docs/github.md makes one: a token from the TokenRequest API, the cluster's CA embedded.
func (h *Handle) CIKubeconfig(ctx context.Context, repoRoot, dir string) (string, error) {
	if _, err := h.Kubectl(ctx, "", "apply", "-f", filepath.Join(repoRoot, "deploy", "ci")); err != nil {
		return "", fmt.Errorf("applying deploy/ci: %w", err)
	}
	path, err := h.KubeconfigAs(ctx, "af-ci", "af-ci", dir)
	if err != nil {
		return "", err
	}
	if err := h.WaitCIPolicy(ctx, path); err != nil {
		return "", err
	}
	flat, err := h.KubectlAs(ctx, path, "", "config", "view", "--flatten", "--raw")
	if err != nil {
		return "", fmt.Errorf("flattening af-ci's kubeconfig: %w", err)
	}
	return flat, nil
}

// CIPolicy is what the API server says when deploy/ci's admission policy refuses af-ci.
const CIPolicy = "ValidatingAdmissionPolicy 'af-ci-"

// WaitCIPolicy waits until deploy/ci's admission policy refuses the identity of kubeconfig a
// namespace without af's label (by server-side dry run, which creates nothing): a policy takes
// effect once the API server has read it, a second or so after it was applied.
func (h *Handle) WaitCIPolicy(ctx context.Context, kubeconfig string) error {
	const ns = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: af-ci-policy-check\n"
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(250 * time.Millisecond) {
		_, err := h.KubectlAs(ctx, kubeconfig, ns, "create", "--dry-run=server", "-f", "-")
		if err != nil && strings.Contains(err.Error(), CIPolicy) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("deploy/ci's admission policy is not enforced a minute after it was applied (a namespace without af's label, dry run: %v)", err)
		}
	}
}
