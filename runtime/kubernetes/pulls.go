package kubernetes

// Image pulls: which failures to pull an image no wait mends, and the pull's own error (the
// kubelet's event) behind a back-off. Every wait of af up reads its pods through these.

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antifailure/af/failure"
)

// pullWillNotWork reads a pull failure's message for what no retry within af up's wait mends:
// the registry has no such image (not found, manifest unknown) or refuses these credentials, or
// it cannot be reached at all (no such host, connection refused, a TLS or certificate error, a
// plain-HTTP registry asked over HTTPS). A rate limit or a server error may clear, and is
// waited for.
func pullWillNotWork(message string) bool {
	m := strings.ToLower(message)
	for _, s := range []string{"not found", "manifest unknown", "name unknown", "repository does not exist",
		"pull access denied", "unauthorized", "401 ", "403 ", "forbidden", "invalid reference format",
		"no such host", "connection refused", "network is unreachable", "no route to host", "i/o timeout",
		"x509:", "tls:", "server gave http response to https client"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// pullFailed is the failure of a pod one of whose images cannot be pulled and will not be by
// waiting (pullWillNotWork, an invalid name, a pull the pod's policy forbids): it names the
// workload, the image and the kubelet's reason. nil when no container is in that state.
func pullFailed(pod *corev1.Pod) error {
	statuses := append(append([]corev1.ContainerStatus(nil), pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
	for _, cs := range statuses {
		w := cs.State.Waiting
		if w == nil || !isPullFailure(w.Reason) {
			continue
		}
		if w.Reason != "InvalidImageName" && w.Reason != "ErrImageNeverPull" && !pullWillNotWork(w.Message) {
			continue
		}
		workload := pod.Name
		switch {
		case strings.HasPrefix(pod.Name, SidecarName):
			workload = "the sidecar"
		case strings.HasPrefix(pod.Name, ProbeName):
			workload = "the probe"
		case pod.Labels[LabelService] != "" && cs.Name == GateContainer:
			workload = "the gate of service " + pod.Labels[LabelService]
		case pod.Labels[LabelService] != "":
			workload = "service " + pod.Labels[LabelService]
		}
		err := failure.Newf(failure.NotReady, "%s (pod %s, container %s): image %s cannot be pulled: %s: %s", workload, pod.Name, cs.Name, cs.Image, w.Reason, w.Message)
		// The gate, and every container of af's own pods (their names start with af-, which no
		// service's may), run the engine image.
		if cs.Name == GateContainer || strings.HasPrefix(pod.Name, "af-") {
			return err.WithHint("This is af's engine image (the sidecar, the gate and the probe): let the nodes pull it from where it is released, import it into the nodes (`af engine-image`), name another with AF_ENGINE_IMAGE, or set a registry (runtime.registry, the action's registry input) so af publishes it there.")
		}
		return err.WithHint("Check the image name and tag (af up --image), that the registry is reachable from the nodes, and that the cluster's pull credentials (AF_REGISTRY_USERNAME/PASSWORD, imagePullSecrets) may read it.")
	}
	return nil
}

// withPullCause returns pod with the cause of each image pull in back-off: the kubelet's
// ImagePullBackOff says only "Back-off pulling image", and the pull's own error is in the pod's
// last Failed event. The pod itself when none is backing off or no event says more.
func (r *Runtime) withPullCause(ctx context.Context, t *target, pod *corev1.Pod) *corev1.Pod {
	backingOff := false
	for _, cs := range append(append([]corev1.ContainerStatus(nil), pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		backingOff = backingOff || cs.State.Waiting != nil && cs.State.Waiting.Reason == "ImagePullBackOff"
	}
	if !backingOff {
		return pod
	}
	evs, err := t.c.cs.CoreV1().Events(t.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod.Name + ",reason=Failed"})
	if err != nil {
		return pod
	}
	cause := map[string]string{} // image -> the last pull error
	last := map[string]time.Time{}
	for _, e := range evs.Items {
		m := e.Message
		rest, ok := strings.CutPrefix(m, `Failed to pull image "`)
		if !ok {
			continue
		}
		image, _, ok := strings.Cut(rest, `"`)
		if !ok {
			continue
		}
		at := e.LastTimestamp.Time
		if at.IsZero() {
			at = e.EventTime.Time
		}
		if at.After(last[image]) || cause[image] == "" {
			cause[image], last[image] = m, at
		}
	}
	if len(cause) == 0 {
		return pod
	}
	p := pod.DeepCopy()
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for i := range list {
			w := list[i].State.Waiting
			if w == nil || w.Reason != "ImagePullBackOff" {
				continue
			}
			if m, ok := cause[list[i].Image]; ok {
				w.Message = m
			}
		}
	}
	return p
}

func isPullFailure(reason string) bool {
	switch reason {
	case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull":
		return true
	}
	return false
}
