package benchup

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/antifailure/af/testcluster"
)

const handoffNS = "af-bench-handoff"

// TestBenchHandoffTable (make bench-handoff, AF_BENCH=1) measures the kubelet's handoff from a
// gate to the application on the local test cluster, the two ways a pod can hold its
// application back: an init container that exits (today's gate; the kubelet sees the exit at
// its next relist), and a native sidecar (a restartable init container, Kubernetes >= 1.29)
// whose startup probe passes once the gate is done (the kubelet acts on the probe's result,
// probed every second; an exec probe, and a TCP probe from the node). Each pod's "gate" is the test image's shell ending its wait at a point
// spread over a second (1.0-1.9 s), so the handoff is measured over every phase of the
// kubelet's second; the figure is the gate's last line to the application's first, both from
// the container runtime's log timestamps. Nothing of af runs: this is the kubelet's part alone.
func TestBenchHandoffTable(t *testing.T) {
	if os.Getenv("AF_BENCH") != "1" {
		t.Skip("a benchmark on the local test cluster: make bench-handoff (AF_BENCH=1)")
	}
	pods := countEnv(t, "PODS", 10)
	ctx := t.Context()
	h, err := testcluster.Open(ctx)
	if err != nil {
		t.Fatalf("the test cluster (make bench-handoff brings it up): %v", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", h.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	deleteNS := func() {
		err := cs.CoreV1().Namespaces().Delete(context.Background(), handoffNS, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Logf("deleting %s: %v", handoffNS, err)
			return
		}
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
			if _, err := cs.CoreV1().Namespaces().Get(context.Background(), handoffNS, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				return
			}
		}
		t.Logf("%s still terminating after 2 minutes", handoffNS)
	}
	deleteNS()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: handoffNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(deleteNS)

	fmt.Printf("the kubelet's handoff from a gate to the application, %d pods each, test image %s\n", pods, h.TestImage)
	fmt.Printf("%-16s %-28s %-28s %s\n", "gate", "gate's end -> app's first line", "pod written -> app's first line", "pods")
	for _, mode := range []string{"init container", "native sidecar", "native tcp"} {
		var handoff, total []int64
		written := map[string]time.Time{}
		for i := range pods {
			name := fmt.Sprintf("h%d-%s", i, strings.Fields(mode)[0])
			wait := 1000 + i*900/pods // ms: spread over the kubelet's second
			p := handoffPod(name, h.TestImage, mode, wait)
			written[name] = time.Now()
			if _, err := cs.CoreV1().Pods(handoffNS).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		for name, at := range written {
			gate, app := waitFirstLines(ctx, t, cs, name)
			handoff = append(handoff, app.Sub(gate).Milliseconds())
			total = append(total, app.Sub(at).Milliseconds())
		}
		fmt.Printf("%-16s median %-21s median %-21s %d\n", mode, Num(Median(handoff))+"ms", Num(Median(total))+"ms", len(handoff))
		// The next way starts on a node that is not busy ending these pods.
		if err := cs.CoreV1().Pods(handoffNS).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
			left, err := cs.CoreV1().Pods(handoffNS).List(ctx, metav1.ListOptions{})
			if err == nil && len(left.Items) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the pods of %q were not gone within 2 minutes", mode)
			}
		}
		time.Sleep(2 * time.Second)
	}
}

// handoffPod is a pod whose gate waits waitMS, says "gate done" and ends (init container) or
// stays, its startup probe passing from then on: an exec probe finding a file (native
// sidecar), or a TCP probe the gate's listener then answers (native tcp: the kubelet connects
// from the node). Its application says "app start" and sleeps.
func handoffPod(name, image, mode string, waitMS int) *corev1.Pod {
	always := corev1.ContainerRestartPolicyAlways
	no := false
	gate := corev1.Container{
		Name: "gate", Image: image, ImagePullPolicy: corev1.PullNever,
		Command: []string{"sh", "-c", fmt.Sprintf("usleep %d; echo gate done", waitMS*1000)},
	}
	switch mode {
	case "native tcp":
		gate.RestartPolicy = &always
		gate.Command = []string{"sh", "-c", fmt.Sprintf("usleep %d; echo gate done; exec httpd -f -p 8999 -h /tmp", waitMS*1000)}
		gate.StartupProbe = &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8999)}},
			PeriodSeconds: 1, FailureThreshold: 60, TimeoutSeconds: 1,
		}
	case "native sidecar":
		gate.RestartPolicy = &always
		gate.Command = []string{"sh", "-c", fmt.Sprintf("usleep %d; touch /tmp/done; echo gate done; exec sleep 3600", waitMS*1000)}
		gate.StartupProbe = &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-f", "/tmp/done"}}},
			PeriodSeconds: 1, FailureThreshold: 60, TimeoutSeconds: 1,
		}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken:  &no,
			TerminationGracePeriodSeconds: new(int64),
			InitContainers:                []corev1.Container{gate},
			Containers: []corev1.Container{{
				Name: "app", Image: image, ImagePullPolicy: corev1.PullNever,
				Command: []string{"sh", "-c", "echo app start; exec sleep 3600"},
			}},
		},
	}
}

// waitFirstLines waits until the pod's application has said its first line and returns the
// log timestamps of the gate's last line and that one.
func waitFirstLines(ctx context.Context, t *testing.T, cs kubernetes.Interface, pod string) (gate, app time.Time) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		a := firstLine(ctx, cs, pod, "app", "app start")
		if !a.IsZero() {
			g := firstLine(ctx, cs, pod, "gate", "gate done")
			if g.IsZero() {
				t.Fatalf("pod %s: the application started and the gate never said it was done", pod)
			}
			return g, a
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("pod %s: no application line within 2 minutes", pod)
	return
}

// firstLine is the timestamp of the container's first log line that is text, zero if none.
func firstLine(ctx context.Context, cs kubernetes.Interface, pod, container, text string) time.Time {
	data, err := cs.CoreV1().Pods(handoffNS).GetLogs(pod, &corev1.PodLogOptions{Container: container, Timestamps: true}).DoRaw(ctx)
	if err != nil {
		return time.Time{}
	}
	for _, l := range lines(string(data)) {
		if at, rest := stamp(l); !at.IsZero() && rest == text {
			return at
		}
	}
	return time.Time{}
}
