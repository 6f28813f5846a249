package kubernetes

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/antifailure/af/conformance"
	"github.com/antifailure/af/conformance/verdict"
	"github.com/antifailure/af/envid"
	"github.com/antifailure/af/failure"
	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/testcluster/fakenet"
)

// TestConformance runs the conformance roster against the Kubernetes runtime on the test
// cluster. `make conformance` runs it with the startup proof and reads the verdict.
// It runs beside the startup proof: each has its own environments (their prefixes) and its
// own namespace for the positive controls.
func TestConformance(t *testing.T) {
	besideOthers(t)
	f := setup(t)
	conformance.RunRuntime(t, f.subject, f.conformanceOptions(t))
}

// TestImmediateStartupCannotBypassContainment is the startup proof on the test cluster.
func TestImmediateStartupCannotBypassContainment(t *testing.T) {
	besideOthers(t)
	f := setup(t)
	conformance.RunStartupProof(t, f.subject, f.conformanceOptions(t))
}

// conformanceOptions points the suite at the test cluster's fake internet, fake metadata
// server and its own API server (by address and by its service).
func (fx *fixture) conformanceOptions(t *testing.T) conformance.Options {
	t.Helper()
	in := fx.h.Internet
	svc, err := fx.kube.CoreV1().Services("default").Get(context.Background(), "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the API server's service: %v", err)
	}
	_, apiPort, _ := net.SplitHostPort(strings.TrimPrefix(fx.h.APIServer, "https://"))
	dns, err := fx.kube.CoreV1().Services("kube-system").Get(context.Background(), "kube-dns", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the cluster resolver's service: %v", err)
	}
	return conformance.Options{
		Image: fx.h.TestImage,
		Targets: conformance.Targets{
			AllowedHost: in.AllowedAPIHost, AllowedIP: in.AllowedAPIIP,
			UnlistedHost: in.BlockedAPIHost,
			Banner:       "af-fake-internet",
			PublicTCP:    in.PublicTCP,
			Resolver:     in.Resolver, ResolverName: in.PublicHost,
			Metadata: in.Metadata, MetadataBanner: fakenet.MetadataBanner,
			APIServer:  []string{net.JoinHostPort(fx.h.APIServerIP, apiPort), net.JoinHostPort(svc.Spec.ClusterIP, "443")},
			TokenPaths: []string{"/var/run/secrets/kubernetes.io/serviceaccount/token"},
			// The cluster resolver by its Service, and the node by its address: the kubelet,
			// and a host-network listener in the NodePort range.
			ClusterResolver: net.JoinHostPort(dns.Spec.ClusterIP, "53"), ClusterName: "kubernetes.default.svc.cluster.local",
			Node: nodeTargets(fx.h.APIServerIP, fx.h.NodeService),
		},
	}
}

// nodeTargets are the kubelet on the node's address and, where the cluster has one (the test
// cluster does; AF_CONFORMANCE_NODE_SERVICE names one elsewhere), a host-network listener in
// the NodePort range.
func nodeTargets(nodeIP, service string) []string {
	out := []string{net.JoinHostPort(nodeIP, "10250")}
	if service != "" {
		out = append(out, service)
	}
	return out
}

// subject is the conformance factory: the runtime as the other cluster tests configure it,
// and a harness over the administrator's client. For a negative control
// (AF_CONFORMANCE_NEGATIVE=1, set by `hack/conformance.sh --expect-refusal`) af's own probe and
// gates are off, so that the suite's attempts alone meet the cluster's holes: the verdict
// reader then requires each behaviour that tries a route to have failed by an escape, and
// every other behaviour to have passed, which a cluster broken in another way cannot do.
func (fx *fixture) subject(t *testing.T) conformance.Subject {
	rt := fx.runtime(t)
	if os.Getenv("AF_CONFORMANCE_NEGATIVE") == "1" {
		rt.opts.negativeControl = fx.h.TestImage
		t.Log(verdict.NegativeControlMarker + ": af's probe and gates are off; the suite's own attempts measure the cluster")
	}
	// The positive controls' namespace, one per test: the suite and the startup proof run side
	// by side, and each removes its own at the end.
	outside := "af-conformance-outside"
	if t.Name() == verdict.StartupProof {
		outside = "af-proof-outside"
	}
	h := &harness{kube: fx.kube, rt: rt, image: fx.h.TestImage, ingress: fx.h.IngressHTTP, outsideNS: outside}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := h.removeNamespace(ctx, h.outsideNS); err != nil {
			t.Errorf("removing %s: %v", h.outsideNS, err)
		}
	})
	return conformance.Subject{Runtime: rt, Harness: h}
}

// harness implements conformance.Harness on a Kubernetes cluster.
type harness struct {
	kube      kubernetes.Interface
	rt        *Runtime
	image     string
	ingress   string // host:port where preview URLs are served
	outsideNS string // a namespace of no environment, without policies
}

func (h *harness) namespace(env afruntime.Ref) (string, error) {
	return envid.Namespace(env.Manifest.Runtime.NamespacePrefix, env.ID)
}

// Try runs the attempts in a pod made from the service's own pod template: its labels (so
// its policies), its gate, resolver, proxy variables, size and (lack of) credentials; only
// the container's command is the suite's.
func (h *harness) Try(ctx context.Context, env afruntime.Ref, service string, attempts []conformance.Attempt) ([]conformance.Outcome, error) {
	ns, err := h.namespace(env)
	if err != nil {
		return nil, err
	}
	d, err := h.kube.AppsV1().Deployments(ns).Get(ctx, service, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	script, err := attemptScript(attempts)
	if err != nil {
		return nil, err
	}
	tpl := d.Spec.Template.DeepCopy()
	tpl.Labels[LabelWorkload] = "conformance" // not one of the service's instances
	app := tpl.Spec.Containers[0]
	app.Command, app.Args, app.ReadinessProbe, app.LivenessProbe, app.Ports = []string{"sh", "-c", script}, nil, nil, nil, nil
	tpl.Spec.Containers = []corev1.Container{app}
	tpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "conformance-", Namespace: ns, Labels: tpl.Labels}, Spec: tpl.Spec}
	log, ip, err := h.runPodFrom(ctx, pod)
	if err != nil {
		return nil, err
	}
	out, err := parseAttempts(log, len(attempts))
	for i := range out {
		out[i].From = ip
	}
	return out, err
}

// TryOutside runs the attempts in a plain pod in a namespace no environment owns.
func (h *harness) TryOutside(ctx context.Context, attempts []conformance.Attempt) ([]conformance.Outcome, error) {
	script, err := attemptScript(attempts)
	if err != nil {
		return nil, err
	}
	if _, err := h.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: h.outsideNS}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "control-", Namespace: h.outsideNS},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "control", Image: h.image, ImagePullPolicy: corev1.PullIfNotPresent, Command: []string{"sh", "-c", script}}},
		},
	}
	log, err := h.runPod(ctx, pod)
	if err != nil {
		return nil, err
	}
	out, err := parseAttempts(log, len(attempts))
	if err != nil {
		return nil, err
	}
	return h.nodeControls(ctx, attempts, out)
}

// nodeControls makes again, from the node's own network, the node attempts (Attempt.Node) a
// plain pod was refused: on a node whose firewall refuses every pod's connection to the node
// (deploy/harden's AF-NODEPORT on kube-router's NodePort range) the control can only show
// that the target answers. Where the node's network answers, the outcome says where it came
// from; where it does not (or a host-network pod is refused), the pod's outcome stands.
func (h *harness) nodeControls(ctx context.Context, attempts []conformance.Attempt, out []conformance.Outcome) ([]conformance.Outcome, error) {
	var again []conformance.Attempt
	var at []int
	for i, a := range attempts {
		if a.Node && !out[i].OK {
			again, at = append(again, a), append(at, i)
		}
	}
	if len(again) == 0 {
		return out, nil
	}
	script, err := attemptScript(again)
	if err != nil {
		return nil, err
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "control-node-", Namespace: h.outsideNS},
		Spec: corev1.PodSpec{
			HostNetwork:   true,
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "control", Image: h.image, ImagePullPolicy: corev1.PullIfNotPresent, Command: []string{"sh", "-c", script}}},
		},
	}
	log, err := h.runPod(ctx, pod)
	if err != nil {
		for _, i := range at {
			out[i].Output += fmt.Sprintf(" (refused to a pod; the node's own network could not be tried: %v)", err)
		}
		return out, nil
	}
	host, err := parseAttempts(log, len(again))
	if err != nil {
		return nil, err
	}
	for j, i := range at {
		if host[j].OK {
			out[i] = conformance.Outcome{OK: true, Output: fmt.Sprintf("from the node's own network (a pod was refused: %q): %s", out[i].Output, host[j].Output)}
		}
	}
	return out, nil
}

// runPod creates the pod (retrying while a new namespace has no default service account
// yet), waits for it to finish, returns its log and deletes it.
func (h *harness) runPod(ctx context.Context, pod *corev1.Pod) (string, error) {
	log, _, err := h.runPodFrom(ctx, pod)
	return log, err
}

// runPodFrom is runPod that also returns the pod's address.
func (h *harness) runPodFrom(ctx context.Context, pod *corev1.Pod) (string, string, error) {
	pods := h.kube.CoreV1().Pods(pod.Namespace)
	var made *corev1.Pod
	var err error
	for range 60 {
		made, err = pods.Create(ctx, pod, metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), "serviceaccount") {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil {
		return "", "", err
	}
	defer func() { _ = pods.Delete(context.Background(), made.Name, metav1.DeleteOptions{}) }()
	ip := ""
	for {
		p, err := pods.Get(ctx, made.Name, metav1.GetOptions{})
		if err != nil {
			return "", "", err
		}
		if p.Status.PodIP != "" {
			ip = p.Status.PodIP
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			break
		}
		select {
		case <-ctx.Done():
			return "", "", fmt.Errorf("pod %s/%s did not finish: %s %+v", pod.Namespace, made.Name, p.Status.Phase, p.Status.InitContainerStatuses)
		case <-time.After(500 * time.Millisecond):
		}
	}
	raw, err := pods.GetLogs(made.Name, &corev1.PodLogOptions{Container: pod.Spec.Containers[0].Name}).DoRaw(ctx)
	return string(raw), ip, err
}

var (
	safeTarget = regexp.MustCompile(`^[A-Za-z0-9._:/,\[\]-]+$`)
	safeHeader = regexp.MustCompile(`^[A-Za-z-]+: [A-Za-z0-9._ -]+$`)
	safeMail   = regexp.MustCompile(`^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+$`)
)

// smtpSession sends one message to host:port for rcpt with busybox nc, a command at a time,
// and prints the server's reply to the message; it fails when the message was not taken.
func smtpSession(target, rcpt string) string {
	host, port, _ := strings.Cut(target, ":")
	lines := []string{"EHLO conformance", "MAIL FROM:<suite@af-conformance.test>", "RCPT TO:<" + rcpt + ">", "DATA",
		"Subject: conformance capture\r\nTo: " + rcpt + "\r\n\r\nThe suite was here.\r\n.", "QUIT"}
	var b strings.Builder
	// A group, not a subshell: "$((" would open an arithmetic expansion in the caller's $(...).
	b.WriteString("{ sleep 0.5")
	for _, l := range lines {
		fmt.Fprintf(&b, "; printf '%s\r\n'; sleep 0.3", l)
	}
	// The reply to the message itself (after DATA's 354) says it was taken: "250 ... captured".
	fmt.Fprintf(&b, "; } | nc -w 5 %s %s | tr -d '\r' | grep '^250 .*captured'", host, port)
	return b.String()
}

// attemptScript is the shell that makes each attempt and prints "RESULT i rc output".
func attemptScript(attempts []conformance.Attempt) (string, error) {
	var b strings.Builder
	for i, a := range attempts {
		if !safeTarget.MatchString(a.Target) || (a.Server != "" && !safeTarget.MatchString(a.Server)) {
			return "", fmt.Errorf("attempt %s: target %q is not a plain address", a.Name, a.Target)
		}
		if a.Header != "" && !safeHeader.MatchString(a.Header) || a.To != "" && !safeMail.MatchString(a.To) {
			return "", fmt.Errorf("attempt %s: header %q or recipient %q is not plain", a.Name, a.Header, a.To)
		}
		var cmd string
		switch a.Kind {
		case conformance.TCP:
			cmd = "aftool tcp -timeout 3s " + a.Target
		case conformance.TCPConnect:
			cmd = "aftool connect -timeout 3s " + a.Target
		case conformance.DNS:
			cmd = "aftool dns -timeout 3s " + a.Target
			if a.Server != "" {
				cmd = "aftool dns -timeout 3s -server " + a.Server + " " + a.Target
			}
		case conformance.HTTP:
			cmd = "aftool http -timeout 5s " + a.Target
		case conformance.HTTPProxy:
			cmd = `test -n "$HTTP_PROXY" && ` + viaProxyWith(a.Target, a.Header)
		case conformance.Mail:
			cmd = smtpSession(a.Target, a.To)
		case conformance.Read:
			cmd = "cat " + a.Target
		case conformance.LinkLocal:
			cmd = "aftool linklocal -timeout 3s -ports " + a.Target
		default:
			return "", fmt.Errorf("attempt %s: unknown kind %q", a.Name, a.Kind)
		}
		fmt.Fprintf(&b, "out=$(%s 2>&1); rc=$?; echo \"RESULT %d $rc $(echo $out | head -c 300)\"\n", cmd, i)
	}
	return b.String(), nil
}

func parseAttempts(log string, n int) ([]conformance.Outcome, error) {
	out := make([]conformance.Outcome, n)
	seen := 0
	for _, m := range regexp.MustCompile(`(?m)^RESULT (\d+) (\d+) ?(.*)$`).FindAllStringSubmatch(log, -1) {
		i, _ := strconv.Atoi(m[1])
		if i >= n {
			continue
		}
		out[i] = conformance.Outcome{OK: m[2] == "0", Output: m[3]}
		seen++
	}
	if seen != n {
		return nil, fmt.Errorf("%d of %d attempts reported; the log:\n%s", seen, n, failure.LastLines(log, 20))
	}
	return out, nil
}

// Addresses lists the service's full name, its ClusterIP and its pods' addresses (each family's).
func (h *harness) Addresses(ctx context.Context, env afruntime.Ref, service string) ([]string, error) {
	ns, err := h.namespace(env)
	if err != nil {
		return nil, err
	}
	svc, err := h.kube.CoreV1().Services(ns).Get(ctx, service, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range svc.Spec.Ports {
		port := strconv.Itoa(int(p.Port))
		out = append(out, net.JoinHostPort(service+"."+ns+".svc."+h.rt.opts.ClusterDomain, port), net.JoinHostPort(svc.Spec.ClusterIP, port))
		pods, err := h.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: LabelService + "=" + service + "," + LabelWorkload + "=" + WorkloadService})
		if err != nil {
			return nil, err
		}
		for _, pod := range pods.Items {
			for _, ip := range pod.Status.PodIPs { // every family's address (dual-stack)
				out = append(out, net.JoinHostPort(ip.IP, p.TargetPort.String()))
			}
		}
	}
	return out, nil
}

// Instances lists the pods of the environment's services and migrations.
func (h *harness) Instances(ctx context.Context, env afruntime.Ref) ([]conformance.Instance, error) {
	ns, err := h.namespace(env)
	if err != nil {
		return nil, err
	}
	pods, err := h.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: LabelWorkload + " in (" + WorkloadService + "," + WorkloadMigration + ")"})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	var out []conformance.Instance
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		in := conformance.Instance{Name: p.Name, Service: p.Labels[LabelService], Migration: p.Labels[LabelWorkload] == WorkloadMigration}
		in.Gated = len(p.Spec.InitContainers) > 0 && p.Spec.InitContainers[0].Name == GateContainer
		in.Started = appStarted(&p)
		for _, s := range p.Status.InitContainerStatuses {
			if s.Name == GateContainer && s.State.Terminated != nil {
				code := int(s.State.Terminated.ExitCode)
				in.GateExitCode = &code
			}
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				in.Ready = true
			}
		}
		if raw, err := h.kube.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: p.Spec.Containers[0].Name}).DoRaw(ctx); err == nil {
			in.Log = string(raw)
		}
		out = append(out, in)
	}
	return out, nil
}

// Remove deletes the pod; its Deployment replaces it.
func (h *harness) Remove(ctx context.Context, env afruntime.Ref, instance string) error {
	ns, err := h.namespace(env)
	if err != nil {
		return err
	}
	return h.kube.CoreV1().Pods(ns).Delete(ctx, instance, metav1.DeleteOptions{})
}

// Unmanaged makes the environment's namespace without af's labels, with a ConfigMap in it.
func (h *harness) Unmanaged(ctx context.Context, env afruntime.Ref) (conformance.Unmanaged, error) {
	ns, err := h.namespace(env)
	if err != nil {
		return nil, err
	}
	n, err := h.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	cm, err := h.kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "precious"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil {
		_ = h.removeNamespace(ctx, ns)
		return nil, err
	}
	return &unmanagedNS{h: h, name: ns, nsVersion: n.ResourceVersion, cmVersion: cm.ResourceVersion}, nil
}

type unmanagedNS struct {
	h                    *harness
	name                 string
	nsVersion, cmVersion string
}

func (u *unmanagedNS) Unchanged(ctx context.Context) error {
	n, err := u.h.kube.CoreV1().Namespaces().Get(ctx, u.name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if n.DeletionTimestamp != nil || n.ResourceVersion != u.nsVersion {
		return fmt.Errorf("namespace %s changed (resourceVersion %s, was %s; deleting %v)", u.name, n.ResourceVersion, u.nsVersion, n.DeletionTimestamp != nil)
	}
	cm, err := u.h.kube.CoreV1().ConfigMaps(u.name).Get(ctx, "precious", metav1.GetOptions{})
	if err != nil {
		return err
	}
	if cm.ResourceVersion != u.cmVersion {
		return fmt.Errorf("configmap %s/precious changed", u.name)
	}
	return nil
}

func (u *unmanagedNS) Remove(ctx context.Context) error { return u.h.removeNamespace(ctx, u.name) }

func (h *harness) removeNamespace(ctx context.Context, name string) error {
	if err := h.kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	for {
		if _, err := h.kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %s still there: %w", name, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// Fetch GETs the URL from this machine through the ingress controller's address.
func (h *harness) Fetch(ctx context.Context, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, h.ingress)
	}}}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, string(body), nil
}
