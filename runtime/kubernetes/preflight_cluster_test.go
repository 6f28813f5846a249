package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/manifest"
	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/runtime/kubernetes/capacity"
)

// TestPreflightOnTheCluster: the capacity preflight against the real cluster's nodes and pods:
// an instance larger than any node and a set too large in total are refused with AF-RUN-047
// before anything is created; a big node added to the cluster counts only while it is
// schedulable and Ready; an identity with af's documented permissions but not nodes brings an
// environment up and down, saying the preflight was skipped.
func TestPreflightOnTheCluster(t *testing.T) {
	f := setup(t)
	ctx := ctxFor(t, 5*time.Minute)
	rt := f.runtime(t)
	sized := func(cpu string, replicas int) *manifest.Manifest {
		return small(t, map[string]*manifest.Service{"big": {Replicas: replicas, Resources: &manifest.Resources{CPU: manifest.Quantity(cpu)}}})
	}

	for _, c := range []struct {
		name     string
		cpu      string
		replicas int
		want     string
	}{
		{"larger than any node", "48", 1, "one instance of big needs 48 of cpu"},
		{"fits a node, not the total", "500m", 20, "needs 10050m of cpu in all"},
	} {
		ref := afruntime.Ref{ID: "preflight-test", Manifest: sized(c.cpu, c.replicas)}
		_, err := rt.Up(ctx, afruntime.Spec{Ref: ref})
		if failure.CodeOf(err) != failure.CapacityShort.Code || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want AF-RUN-047 saying %q, got %v", c.name, c.want, err)
		}
		t.Logf("%s: %v", c.name, err)
		if _, err := f.kube.CoreV1().Namespaces().Get(ctx, "af-env-preflight-test", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: the namespace was created: %v", c.name, err)
		}
	}

	// A big node, added by hand: it counts only while schedulable and Ready.
	big := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "af-test-big-node", Labels: map[string]string{"af.test/fake": "true"}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "Test", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		},
	}
	nodes := f.kube.CoreV1().Nodes()
	created, err := nodes.Create(ctx, big, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nodes.Delete(context.Background(), big.Name, metav1.DeleteOptions{}) })
	if created.Status.Allocatable.Cpu().Value() != 64 {
		created.Status = big.Status
		if created, err = nodes.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	spec := afruntime.Spec{Ref: afruntime.Ref{ID: "preflight-test", Manifest: sized("48", 1)}}
	if err := rt.Preflight(ctx, spec); err != nil {
		t.Fatalf("with a Ready, schedulable 64-CPU node: %v", err)
	}
	cordon := func(on bool) {
		patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on)
		if _, err := nodes.Patch(ctx, big.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cordon(true)
	if err := rt.Preflight(ctx, spec); failure.CodeOf(err) != failure.CapacityShort.Code || !strings.Contains(err.Error(), "af-test-big-node (cordoned)") {
		t.Errorf("cordoned big node: want AF-RUN-047 naming it left out, got %v", err)
	}
	cordon(false)
	// The node controller writes this node too (taints, its own view of Ready): retry on
	// conflict.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := nodes.Get(ctx, big.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "Test", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		_, err = nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Preflight(ctx, spec); failure.CodeOf(err) != failure.CapacityShort.Code || !strings.Contains(err.Error(), "af-test-big-node (not ready)") {
		t.Errorf("NotReady big node: want AF-RUN-047 naming it left out, got %v", err)
	}

	// An identity with what docs/runtime.md lists as af's permissions, but not nodes:
	// impersonated, it brings an environment up, saying the preflight was skipped.
	user := "af-test-no-nodes"
	all := []string{"get", "list", "create", "patch", "delete"}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "af-test-no-nodes"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"namespaces", "services", "secrets", "pods"}, Verbs: all},
			{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"resourcequotas", "limitranges"}, Verbs: all},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: all},
			{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: all},
			{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies", "ingresses"}, Verbs: all},
		},
	}
	if _, err := f.kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = f.kube.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "af-test-no-nodes"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: user}},
	}
	if _, err := f.kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = f.kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	cfg, err := clientcmd.LoadFromFile(f.h.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range cfg.AuthInfos {
		a.Impersonate = user
		a.ImpersonateGroups = []string{"system:authenticated"}
	}
	limited := filepath.Join(t.TempDir(), "limited.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, limited); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var said []string
	lrt := f.runtime(t, func(o *Options) {
		o.Kubeconfig = limited
		o.Progress = func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			said = append(said, fmt.Sprintf(format, args...))
			t.Logf("af (no nodes): "+format, args...)
		}
	})
	ok := small(t, map[string]*manifest.Service{"app": {Port: 8080, Command: manifest.Command{Exec: []string{"aftool", "serve", "-tcp", ":8080", "-udp", ""}}, Resources: &manifest.Resources{CPU: "50m"}}})
	ref := afruntime.Ref{ID: "preflight-rbac", Manifest: ok}
	down(t, f.runtime(t), ref) // whatever happens below, as the administrator
	if _, err := lrt.Up(ctx, afruntime.Spec{Ref: ref}); err != nil {
		t.Fatalf("af up without permission to list nodes: want it to go on, got %v", err)
	}
	// Nor leases (a role from before af held environments): it goes on, saying what it cannot keep out.
	mu.Lock()
	if !strings.Contains(strings.Join(said, "\n"), "may not read leases in af-env-preflight-rbac, so this run does not hold the environment") {
		t.Errorf("af up with an identity that may not read leases did not say it holds nothing")
	}
	mu.Unlock()
	if err := lrt.Down(ctx, ref); err != nil {
		t.Errorf("af down with the same identity: %v", err)
	}
	saidSoFar := func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(said, "\n")
	}
	if got := saidSoFar(); !strings.Contains(got, "capacity preflight skipped: context") || !strings.Contains(got, "may not list nodes") {
		t.Errorf("no progress message about the skipped preflight: %q", got)
	}
	if got := saidSoFar(); !strings.Contains(got, "cluster ranges: the nodes could not be listed (forbidden)") {
		t.Errorf("no progress message about the unknown pod ranges: %q", got)
	}
	// The same identity, with a cidr rule: the pod ranges unknown, af cannot keep the rule out
	// of the cluster, so it refuses before creating anything.
	wide := small(t, map[string]*manifest.Service{"app": {Port: 8080, Command: manifest.Command{Exec: []string{"aftool", "serve", "-tcp", ":8080", "-udp", ""}}}})
	wide.Egress.Rules = []manifest.EgressRule{{CIDR: "10.20.0.0/16", Ports: []int{5432}, Mode: "allow"}}
	wref := afruntime.Ref{ID: "preflight-rbac-cidr", Manifest: wide}
	down(t, f.runtime(t), wref)
	_, err = lrt.Up(ctx, afruntime.Spec{Ref: wref})
	if failure.CodeOf(err) != failure.ClusterRangesUnknown.Code || !strings.Contains(err.Error(), "egress.rules[0] (10.20.0.0/16)") {
		t.Errorf("a cidr rule with the cluster's ranges unknown: want AF-RUN-052 naming the rule, got %v", err)
	}
	if _, err := f.kube.CoreV1().Namespaces().Get(ctx, "af-env-preflight-rbac-cidr", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused up created its namespace (%v)", err)
	}
}

// TestConcurrentUpsBeyondTheNode: four af up at once of environments that each ask about 42%
// of the CPU the node has free: those that fit come up contained; the others are refused by
// the capacity preflight (AF-RUN-047: naming the environments being brought up while their
// pods are not placed yet, else by what the node has left) before any pod of theirs, leaving
// no namespace, instead of waiting minutes for CPU that is not there.
// Alone: it sizes its environments by what the node has free.
func TestConcurrentUpsBeyondTheNode(t *testing.T) {
	f := setup(t)
	ctx := ctxFor(t, 10*time.Minute)
	rt := f.runtime(t)
	tally := capacity.NewTally()
	nodes, err := f.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range nodes.Items {
		tally.AddNode(&nodes.Items[i])
	}
	pods, err := f.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		tally.AddPod(&pods.Items[i])
	}
	var free int64
	for _, n := range tally.Free() {
		free += n.Free.MilliCPU
	}
	sidecar := rt.asks(small(t, map[string]*manifest.Service{"s": {}})).MilliCPU
	each := free * 42 / 100
	cpu := each - sidecar
	if cpu < 20 {
		t.Fatalf("the node has %dm CPU free: too little to size the environments (the sidecar asks %dm)", free, sidecar)
	}
	t.Logf("the node has %dm CPU free; each environment asks %dm (%dm for its service, %dm its sidecar)", free, each, cpu, sidecar)
	type outcome struct {
		id  string
		res *afruntime.Result
		err error
	}
	out := make(chan outcome, 4)
	for i := 1; i <= 4; i++ {
		ref := afruntime.Ref{ID: fmt.Sprintf("beyond-%d", i), Manifest: small(t, map[string]*manifest.Service{"s": {
			Command:   manifest.Command{Exec: []string{"aftool", "serve"}},
			Resources: &manifest.Resources{CPU: manifest.Quantity(fmt.Sprintf("%dm", cpu)), Memory: "16Mi"},
		}})}
		down(t, rt, ref)
		go func() {
			res, err := rt.Up(ctx, afruntime.Spec{Ref: ref})
			out <- outcome{ref.ID, res, err}
		}()
	}
	var up, refused int
	for range 4 {
		o := <-out
		switch {
		case o.err == nil && o.res.Probe != nil && o.res.Probe.Verdict == "contained":
			up++
		case errors.Is(o.err, failure.CapacityShort):
			// Refused beside runs still placing their pods (which it names), or once they are
			// placed, by what the node has left: either way before any pod of its own.
			refused++
			t.Logf("%s: %v", o.id, o.err)
			ns, err := f.kube.CoreV1().Namespaces().Get(ctx, "af-env-"+o.id, metav1.GetOptions{})
			if err == nil && ns.DeletionTimestamp == nil {
				t.Errorf("%s: refused, but its namespace is left", o.id)
			}
		default:
			t.Errorf("%s: %v, want contained or refused by the capacity preflight", o.id, o.err)
		}
	}
	if up < 1 || up > 2 || refused < 2 {
		t.Errorf("%d came up and %d were refused, want 1 or 2 up (two fit what is free) and the others refused", up, refused)
	}
}
