// Command afcluster runs af's test cluster on this machine (as root):
//
//	afcluster up [-enforcer kube-router|kube-network-policies|cilium|none] [-no-ingress] [-holes]
//	afcluster ensure [-enforcer ...]  # up, unless a cluster with that enforcer already runs
//	afcluster holes open|closed [ipv6|nodeport|all]  # IPv6 in pods, the node (the enforcer's exemption), or both (default), switched in place
//	afcluster down       # removes everything the cluster made; idempotent
//	afcluster status     # processes, node, pods, guard counters (fails if one is not 0)
//	afcluster env        # prints `export KUBECONFIG=... PATH=...`
//	afcluster internet   # prints the fake internet's addresses as shell assignments (AF_INTERNET_*)
//	afcluster leftovers  # lists what of a cluster is still on the machine (fails if any)
//	afcluster import ARCHIVE            # a docker-archive tarball into the node's containerd
//	afcluster image REF BINARY          # an image of one static binary (its entrypoint), imported
//
// The make targets cluster-up, cluster-down, cluster-status and cluster-env call it.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/antifailure/af/testcluster"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "afcluster:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "afcluster %s: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: afcluster up|ensure|down|status|env|holes|internet|leftovers|import|image|test-image")
	}
	switch args[0] {
	case "up", "ensure":
		fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
		opts := testcluster.OptionsFromEnv()
		fs.StringVar(&opts.Enforcer, "enforcer", opts.Enforcer, "NetworkPolicy enforcer: kube-router, kube-network-policies, cilium or none (default from AF_ENFORCER, else kube-router)")
		fs.BoolVar(&opts.NoIngress, "no-ingress", opts.NoIngress, "do not build or run Traefik")
		fs.BoolVar(&opts.Holes, "holes", opts.Holes, "leave IPv6 on in pods and the node open (kube-router's NodePort exemption; under kube-network-policies, pods' connections to the node): the unhardened variant af must refuse")
		fs.BoolVar(&opts.DualStack, "dual-stack", opts.DualStack, "IPv4 and IPv6 pod and Service ranges, the node and the fake internet over both, kube-router with IPv6 (its IPv6 hole: kube-router without IPv6)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		opts.Log = logf
		start := time.Now()
		if args[0] == "ensure" {
			want := opts.Enforcer
			if want == "" {
				want = testcluster.EnforcerKubeRouter
			}
			if h, err := testcluster.Open(ctx); err == nil && h.Enforcer == want && h.Holes == opts.Holes && h.DualStack == opts.DualStack {
				fmt.Printf("cluster already up: enforcer %s, API server %s\n", h.Enforcer, h.APIServer)
				return nil
			}
		}
		h, err := testcluster.Up(ctx, opts)
		if err != nil {
			return err
		}
		fmt.Printf("cluster up in %s: enforcer %s, API server %s\n", time.Since(start).Round(time.Second), h.Enforcer, h.APIServer)
		printEnv(h)
		return nil
	case "holes":
		if len(args) < 2 || len(args) > 3 || (args[1] != "open" && args[1] != "closed") {
			return fmt.Errorf("usage: afcluster holes open|closed [ipv6|nodeport|all]")
		}
		which := "all"
		if len(args) == 3 {
			which = args[2]
		}
		start := time.Now()
		h, err := testcluster.SetHoles(ctx, which, args[1] == "open", logf)
		if err != nil {
			return err
		}
		node := "kube-router's whole NodePort exemption"
		if h.Enforcer == testcluster.EnforcerKubeNetworkPolicies {
			node = "pods' connections to the node (not sent to kube-network-policies' queue)"
		}
		ipv6 := "IPv6 in pods"
		if h.DualStack {
			ipv6 = "pods' IPv6 ungoverned (kube-router IPv4-only, no link-local rule)"
		}
		fmt.Printf("holes %s %s in %s (enforcer %s); open now: %s %s, %s %s\n", which, args[1], time.Since(start).Round(time.Second), h.Enforcer,
			ipv6, openClosed(h.HoleIPv6), node, openClosed(h.HoleNode))
		return nil
	case "down":
		start := time.Now()
		if err := testcluster.Down(ctx, logf); err != nil {
			return err
		}
		fmt.Printf("cluster down in %s\n", time.Since(start).Round(100*time.Millisecond))
		return nil
	case "status":
		return testcluster.Status(ctx, os.Stdout)
	case "env":
		h, err := testcluster.Open(ctx)
		if err != nil {
			return err
		}
		printEnv(h)
		return nil
	case "internet":
		// The fake internet's plan, for a cluster other than this one (make k8s-conformance
		// runs the fake internet beside k3d): no cluster needed.
		return printInternet(os.Stdout)
	case "leftovers":
		left, err := testcluster.Leftovers(ctx)
		if err != nil {
			return err
		}
		if len(left) > 0 {
			return fmt.Errorf("left on the machine:\n  %s", strings.Join(left, "\n  "))
		}
		fmt.Println("nothing of the test cluster is left")
		return nil
	case "test-image":
		// The test image as an archive, for another cluster (make k8s-conformance).
		if len(args) != 3 {
			return fmt.Errorf("usage: afcluster test-image ARCHIVE AFTOOL-BINARY")
		}
		if err := testcluster.WriteTestImageArchive(ctx, args[1], args[2]); err != nil {
			return err
		}
		fmt.Printf("wrote %s (%s)\n", args[1], testcluster.TestImageRef)
		return nil
	case "import", "image":
		h, err := testcluster.Open(ctx)
		if err != nil {
			return err
		}
		if args[0] == "import" {
			if len(args) != 2 {
				return fmt.Errorf("usage: afcluster import ARCHIVE")
			}
			return h.ImportImage(ctx, args[1])
		}
		if len(args) != 3 {
			return fmt.Errorf("usage: afcluster image REF BINARY")
		}
		if err := h.ImportBinaryImage(ctx, args[1], args[2]); err != nil {
			return err
		}
		fmt.Printf("imported %s (%s)\n", args[1], args[2])
		return nil
	default:
		return fmt.Errorf("unknown command %q (want up, ensure, down, status, env, internet, leftovers, import, image or test-image)", args[0])
	}
}

func openClosed(open bool) string {
	if open {
		return "open"
	}
	return "closed"
}

func printEnv(h *testcluster.Handle) {
	fmt.Printf("export KUBECONFIG=%s PATH=%s:$PATH\n", h.Kubeconfig, h.BinDir)
	keys := make([]string, 0, len(h.GateEnv()))
	for k := range h.GateEnv() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("export %s=%s\n", k, h.GateEnv()[k])
	}
}

// printInternet writes the fake internet's addresses (testcluster.Internet) as shell
// assignments, for eval: its range and zone, and the address of each of its hosts.
func printInternet(w io.Writer) error {
	in := testcluster.Internet()
	host := func(hostport string) string {
		h, _, err := net.SplitHostPort(hostport)
		if err != nil {
			return hostport
		}
		return h
	}
	vars := [][2]string{
		{"AF_INTERNET_CIDR", in.CIDR},
		{"AF_INTERNET_DOMAIN", in.Domain},
		{"AF_INTERNET_PUBLIC_IP", host(in.PublicTCP)},
		{"AF_INTERNET_RESOLVER_IP", host(in.Resolver)},
		{"AF_INTERNET_ALLOWED_API_IP", in.AllowedAPIIP},
		{"AF_INTERNET_BLOCKED_API_IP", in.BlockedAPIIP},
		{"AF_INTERNET_METADATA_IP", in.MetadataIP},
	}
	for _, v := range vars {
		if _, err := fmt.Fprintf(w, "%s=%s\n", v[0], v[1]); err != nil {
			return err
		}
	}
	return nil
}
