package node

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/antifailure/af/testcluster/internal/layout"
)

// Up brings the cluster up from nothing: it first removes whatever a previous
// run left, then starts every part and waits for a Ready node, CoreDNS and
// (when asked) the ingress controller.
func (c *Cluster) Up(ctx context.Context) error {
	start := time.Now()
	if err := CheckRoot(); err != nil {
		return err
	}
	if err := EnsurePackages(ctx, c.logf); err != nil {
		return err
	}
	if err := c.buildAll(ctx); err != nil {
		return err
	}
	c.logf("binaries ready after %s", time.Since(start).Round(time.Second))
	if err := c.Down(ctx); err != nil {
		return fmt.Errorf("clean up the previous cluster: %w", err)
	}
	uplink, err := Uplink(ctx)
	if err != nil {
		return err
	}
	if err := checkAddressPlan(ctx); err != nil {
		return err
	}
	st := State{Enforcer: c.opts.Enforcer, Ingress: c.opts.Ingress, DualStack: c.opts.DualStack, Uplink: uplink, IPForward: getSysctl("net.ipv4.ip_forward"), Started: start.UTC().Format(time.RFC3339)}
	if c.opts.DualStack {
		st.IPv6Forward = getSysctl("net.ipv6.conf.all.forwarding")
	}
	st.setHoles(c.opts.Holes)
	if err := writeState(c.dirs, st); err != nil {
		return err
	}
	if err := installGuard(ctx, uplink); err != nil {
		return err
	}
	if err := c.setupNetwork(ctx); err != nil {
		return err
	}
	for _, p := range c.fakeHosts() {
		if err := c.start(p); err != nil {
			return err
		}
	}
	if err := c.writeFiles(); err != nil {
		return err
	}
	if err := c.startRuntime(ctx); err != nil {
		return err
	}
	if err := c.startKubernetes(ctx); err != nil {
		return err
	}
	if err := c.waitReady(ctx); err != nil {
		return err
	}
	st.UpSeconds = int(time.Since(start).Seconds())
	if err := writeState(c.dirs, st); err != nil {
		return err
	}
	stack := "IPv4"
	if c.opts.DualStack {
		stack = "dual-stack"
	}
	c.logf("cluster up in %s (%s, enforcer %s, holes open: %s)", time.Since(start).Round(time.Second), stack, c.opts.Enforcer, c.opts.Holes)
	return nil
}

func (c *Cluster) writeFiles() error {
	if err := writePKI(c.dirs.PKI(), certSpecs()); err != nil {
		return err
	}
	for _, f := range []func() error{c.writeKubeconfigs, c.writeContainerdConfig, c.writeCNIConfig, c.writeKubeletConfig, c.writeKubeProxyConfig, c.writeRegistryConfig, c.linkBinaries} {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

// startRuntime starts etcd, containerd and the registry and loads the images.
func (c *Cluster) startRuntime(ctx context.Context) error {
	for _, p := range []process{c.etcd(), c.containerd(), c.registry()} {
		if err := c.start(p); err != nil {
			return err
		}
	}
	if err := c.waitFor(ctx, "etcd", "etcd", time.Minute, httpOK("http://127.0.0.1:12379/health")); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "containerd", "containerd", time.Minute, func(ctx context.Context) error {
		_, err := run(ctx, "ctr", "--address", c.dirs.ContainerdSocket(), "version")
		return err
	}); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "registry", "registry", time.Minute, httpOK("http://"+layout.RegistryAddr+"/v2/")); err != nil {
		return err
	}
	archives, err := c.buildImages(ctx)
	if err != nil {
		return err
	}
	for _, a := range archives {
		if err := ImportImage(ctx, c.dirs, a); err != nil {
			return err
		}
	}
	return nil
}

// startKubernetes starts the control plane, the node agents, the add-ons and the enforcer.
func (c *Cluster) startKubernetes(ctx context.Context) error {
	if err := c.start(c.apiserver()); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "kube-apiserver", "kube-apiserver", 2*time.Minute, func(ctx context.Context) error {
		_, err := c.Kubectl(ctx, "", "get", "--raw", "/readyz")
		return err
	}); err != nil {
		return err
	}
	procs := []process{c.controllerManager(), c.scheduler(), c.kubelet(), c.kubeProxy()}
	if c.opts.Ingress {
		procs = append(procs, c.ingressForwards()...)
	}
	for _, p := range procs {
		if err := c.start(p); err != nil {
			return err
		}
	}
	addons := rbacAddons() + "---\n" + coreDNSAddon()
	if c.opts.Ingress {
		addons += "---\n" + traefikAddon()
	}
	if _, err := c.Kubectl(ctx, addons, "apply", "-f", "-"); err != nil {
		return fmt.Errorf("apply add-ons: %w", err)
	}
	return nil
}

func (c *Cluster) waitReady(ctx context.Context) error {
	// Cilium's agent is the CNI: the node is Ready only once it wrote its configuration.
	if c.opts.Enforcer == EnforcerCilium {
		if err := c.startCilium(ctx); err != nil {
			return err
		}
	}
	if err := c.waitFor(ctx, "node Ready", "kubelet", 3*time.Minute, func(ctx context.Context) error {
		out, err := c.Kubectl(ctx, "", "get", "node", layout.NodeName, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		if err != nil {
			return err
		}
		if strings.TrimSpace(out) != "True" {
			return fmt.Errorf("node Ready=%q", out)
		}
		return nil
	}); err != nil {
		return err
	}
	// The enforcers look their node up once at start, so they start after it registered.
	if c.opts.Enforcer == EnforcerKubeNetworkPolicies {
		if err := c.startKubeNetworkPolicies(ctx); err != nil {
			return err
		}
	}
	if c.opts.Enforcer == EnforcerKubeRouter {
		if c.governsIPv6() {
			if err := setLinkLocalRule(ctx, false); err != nil {
				return err
			}
		}
		if err := c.start(c.kubeRouter()); err != nil {
			return err
		}
		if err := c.waitKubeRouterChains(ctx); err != nil {
			return err
		}
	}
	return c.waitAddons(ctx)
}

// waitAddons waits for CoreDNS and (when asked) the ingress controller to be rolled out.
func (c *Cluster) waitAddons(ctx context.Context) error {
	waits := [][]string{{"-n", "kube-system", "rollout", "status", "deployment/coredns", "--timeout=5s"}}
	if c.opts.Ingress {
		waits = append(waits, []string{"-n", IngressNamespace, "rollout", "status", "deployment/traefik", "--timeout=5s"})
	}
	for _, w := range waits {
		if err := c.waitFor(ctx, strings.Join(w, " "), "kubelet", 3*time.Minute, func(ctx context.Context) error {
			_, err := c.Kubectl(ctx, "", w...)
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// Kubectl runs kubectl against the cluster as its administrator, with stdin as input.
func (c *Cluster) Kubectl(ctx context.Context, stdin string, args ...string) (string, error) {
	return runInput(ctx, stdin, c.bin("kubectl"), append([]string{"--kubeconfig", c.dirs.Kubeconfig()}, args...)...)
}

func httpOK(url string) func(context.Context) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil, DialContext: (&net.Dialer{Timeout: time.Second}).DialContext}}
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		return nil
	}
}
