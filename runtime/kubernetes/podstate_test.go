package kubernetes

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// A migration's progress says what its pod does: one the scheduler cannot place is never shown
// as running.
func TestPodState(t *testing.T) {
	unschedulable := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/1 nodes are available: 1 Insufficient cpu."}
	for _, c := range []struct {
		name string
		pod  corev1.Pod
		want string
	}{
		{"unschedulable", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{unschedulable}}}, "not scheduled: 0/1 nodes are available: 1 Insufficient cpu."},
		{"pending", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}, "pending"},
		{"no phase yet", corev1.Pod{}, "pending"},
		{"running", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}, "running"},
	} {
		if got := podState(&c.pod); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
