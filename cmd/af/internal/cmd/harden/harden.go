// Package harden implements `af harden`: the node agent deploy/harden runs on every node. It
// puts and keeps the rules that close the holes af knows of the node's enforcer (package
// harden), reports per node as a ConfigMap af check reads and as events, and removes them only
// on --uninstall.
package harden

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/antifailure/af/cmd/af/internal/factory"
	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/harden"
)

// options are af harden's flags.
type options struct {
	hostRoot  string
	period    time.Duration
	once      bool
	uninstall bool
	wait      bool
	node      string
	podCIDRs  []string
	bridges   []string
	namespace string
	pod       string
	metrics   string
}

// NewCmdHarden returns `af harden`.
func NewCmdHarden(f *factory.Factory) *cobra.Command {
	o := options{}
	cmd := &cobra.Command{
		Use:   "harden",
		Short: "Keep the node rules that close the holes af knows of the node's enforcer (deploy/harden's agent)",
		Long: `Runs on one node (deploy/harden/harden.yaml runs it on every node, host network): reads the
node's packet filter to find its enforcer (kube-router, kube-network-policies or kindnet,
Calico, Cilium), puts in place the rules af knows close that enforcer's holes, and puts each
back within --period when it is removed or changed:

  AF-LINK-LOCAL  ip6tables  pods' link-local and multicast traffic on a bridge CNI's segment
                            dropped but neighbour discovery (any enforcer, a bridge found)
  AF-NODEPORT    iptables   pods' connections to host listeners in kube-router's NodePort
                 ip6tables  range refused; NodePort Services keep working (kube-router)
  AF-KNP-NODE    iptables   pods' new connections to the node sent to the enforcer's queue,
                 ip6tables  decided by their policies (kube-network-policies, kindnet)

On an enforcer it does not know, or none, it does nothing and says so. It uses the node's own
iptables (run in --host-root), so the backend (legacy or nft) is the enforcer's. Each pass is
reported as the ConfigMap af-harden-<node> in its namespace (af check reads it), when a rule
is put back or fails as an event, and with --metrics-address as Prometheus metrics
(af_harden_rule_in_place, af_harden_rules_put_back_total, af_harden_rule_failures_total,
af_harden_passes_total, af_harden_hardened, af_harden_last_pass_timestamp_seconds,
af_harden_enforcer).

When it stops the rules stay (a node without them would leak): only --uninstall removes them
(deploy/harden/uninstall.yaml). --once makes one pass and prints its report.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return run(cmd.Context(), f, o) },
	}
	fl := cmd.Flags()
	fl.StringVar(&o.hostRoot, "host-root", "/", "the node's root as this process sees it (deploy/harden mounts it at /host)")
	fl.DurationVar(&o.period, "period", 10*time.Second, "how often the rules are checked and put back")
	fl.BoolVar(&o.once, "once", false, "one pass: put the rules in place, print the report, exit")
	fl.BoolVar(&o.uninstall, "uninstall", false, "remove every rule af harden adds from both families, report it, and exit (with --wait: then wait to be stopped)")
	fl.BoolVar(&o.wait, "wait", false, "with --uninstall: wait to be stopped after removing (a DaemonSet's pod)")
	fl.StringVar(&o.node, "node", os.Getenv("NODE_NAME"), "the node's name (default: $NODE_NAME)")
	fl.StringSliceVar(&o.podCIDRs, "pod-cidr", nil, "the node's pod ranges (default: the Node's spec.podCIDRs from the API)")
	fl.StringSliceVar(&o.bridges, "bridge", nil, "the pods' bridges (default: the bridges holding an address in the pod ranges)")
	fl.StringVar(&o.namespace, "report-namespace", os.Getenv("POD_NAMESPACE"), "where the report ConfigMap and events go (default: $POD_NAMESPACE; empty: no report)")
	fl.StringVar(&o.pod, "pod", os.Getenv("POD_NAME"), "this pod's name, for its events (default: $POD_NAME)")
	fl.StringVar(&o.metrics, "metrics-address", "", "serve the agent's Prometheus metrics at http://ADDRESS/metrics (e.g. :9971; default: none)")
	return cmd
}

func run(ctx context.Context, f *factory.Factory, o options) error {
	if o.node == "" {
		return failure.Newf(failure.UsageInvalid, "--node (or $NODE_NAME) is required: the node's name")
	}
	host := harden.Host{Root: o.hostRoot}
	if _, err := host.Look("iptables"); err != nil {
		return failure.New(failure.HardenFailed, err.Error(), err)
	}
	var cs kubernetes.Interface
	if (len(o.podCIDRs) == 0 && !o.uninstall) || o.namespace != "" {
		var err error
		if cs, err = client(); err != nil {
			return failure.New(failure.HardenFailed, "no Kubernetes API to read the node's pod ranges or to report to: "+err.Error(), err)
		}
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(f.IO.ErrOut, "%s af harden: %s\n", time.Now().UTC().Format(time.RFC3339), fmt.Sprintf(format, args...))
	}
	a := &harden.Agent{
		Run: host, Node: o.node, Bridges: o.bridges, Sysctl: host.Sysctl, Period: o.period, Logf: logf,
		PodCIDRs: func(ctx context.Context) ([]string, error) {
			if len(o.podCIDRs) > 0 {
				return o.podCIDRs, nil
			}
			n, err := cs.CoreV1().Nodes().Get(ctx, o.node, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			if len(n.Spec.PodCIDRs) > 0 {
				return n.Spec.PodCIDRs, nil
			}
			if n.Spec.PodCIDR != "" {
				return []string{n.Spec.PodCIDR}, nil
			}
			return nil, nil
		},
	}
	if o.namespace != "" {
		r := reporter{cs: cs, ns: o.namespace, pod: o.pod}
		a.Report = r.report
	}
	switch {
	case o.uninstall:
		rep, err := a.Uninstall(ctx)
		if err != nil {
			return failure.New(failure.HardenFailed, err.Error(), err)
		}
		if err := print(f, rep); err != nil {
			return err
		}
		if o.wait {
			<-ctx.Done()
		}
		return nil
	case o.once:
		rep, err := a.Once(ctx)
		if err != nil {
			return failure.New(failure.HardenFailed, err.Error(), err)
		}
		if a.Report != nil {
			if err := a.Report(ctx, rep); err != nil {
				logf("could not publish the report: %v", err)
			}
		}
		if err := print(f, rep); err != nil {
			return err
		}
		if !rep.Hardened() {
			return failure.Newf(failure.HardenFailed, "a rule could not be put in place on node %s (the report above says which and why)", rep.Node)
		}
		return nil
	}
	if o.metrics != "" {
		// Metrics that cannot be served yet (the port still held, say by the agent's pod
		// before this one) are said and tried again each period; the rules are kept all the
		// same: a node left without them would leak.
		a.Metrics = harden.NewMetrics()
		stop := serveMetrics(ctx, o.metrics, a.Metrics, o.period, logf)
		defer stop()
	}
	return a.Keep(ctx)
}

// serveMetrics serves m at /metrics on address until stop is called, listening again each
// period while the address cannot be listened on.
func serveMetrics(ctx context.Context, address string, m *harden.Metrics, period time.Duration, logf func(string, ...any)) (stop func()) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	if period <= 0 {
		period = 10 * time.Second
	}
	go func() {
		for said := false; ; said = true {
			ln, err := net.Listen("tcp", address)
			if err == nil {
				logf("metrics at http://%s/metrics", address)
				_ = srv.Serve(ln)
				return
			}
			if !said {
				logf("no metrics yet (the rules are kept all the same; tried again every %s): listening on %s: %v", period, address, err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(period):
			}
		}
	}()
	return func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(c)
	}
}

// print writes the report: JSON with -o json, else one line per rule and note.
func print(f *factory.Factory, rep harden.Report) error {
	if f.IO.JSON() {
		return f.WriteJSON(rep)
	}
	enf := string(rep.Found.Enforcer)
	if enf == "" {
		enf = "no enforcer af knows"
	}
	fmt.Fprintf(f.IO.Out, "node %s: %s (%s)\n", rep.Node, enf, rep.Found.Evidence)
	for _, r := range rep.Rules {
		fmt.Fprintf(f.IO.Out, "  %-9s %-14s %-10s closes %s: %s\n", r.Tool, r.Chain, r.State, strings.Join(r.Closes, ", "), r.Why)
		if r.Error != "" {
			fmt.Fprintf(f.IO.Out, "    error: %s\n", r.Error)
		}
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(f.IO.Out, "  note: %s\n", n)
	}
	return nil
}

// client is the API the agent reads its node from and reports to: the pod's service account
// inside the cluster, else the kubeconfig.
func client() (kubernetes.Interface, error) {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), nil).ClientConfig()
		if err != nil {
			return nil, err
		}
	}
	cfg.UserAgent = "af-harden"
	return kubernetes.NewForConfig(cfg)
}

// reporter writes the agent's reports: the ConfigMap af-harden-<node>, and an event on the
// agent's pod when a rule was put back or failed.
type reporter struct {
	cs      kubernetes.Interface
	ns, pod string
}

func (r reporter) report(ctx context.Context, rep harden.Report) error {
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: "af-harden-" + rep.Node, Namespace: r.ns,
			Labels: map[string]string{harden.ReportLabel: harden.ReportLabelValue, "app.kubernetes.io/name": "af-harden"},
		},
		Data: map[string]string{harden.ReportKey: string(data)},
	}
	cms := r.cs.CoreV1().ConfigMaps(r.ns)
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); apierrors.IsNotFound(err) {
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
		if err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	for _, s := range rep.Rules {
		if s.State != harden.StateReapplied && s.State != harden.StateFailed {
			continue
		}
		msg := fmt.Sprintf("node %s: %s (%s) %s", rep.Node, s.Chain, s.Tool, s.State)
		if s.Changed != "" {
			msg += ": " + s.Changed
		}
		if s.Error != "" {
			msg += ": " + s.Error
		}
		r.event(ctx, s.State, msg)
	}
	return nil
}

func (r reporter) event(ctx context.Context, state, msg string) {
	if r.pod == "" {
		return
	}
	typ, reason := corev1.EventTypeNormal, "RulePutBack"
	if state == harden.StateFailed {
		typ, reason = corev1.EventTypeWarning, "RuleFailed"
	}
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: r.pod + ".", Namespace: r.ns},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: r.ns, Name: r.pod, APIVersion: "v1"},
		Reason:         reason, Message: msg, Type: typ,
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		Source: corev1.EventSource{Component: "af-harden"},
	}
	_, _ = r.cs.CoreV1().Events(r.ns).Create(ctx, ev, metav1.CreateOptions{})
}
