package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/manifest"
	afruntime "github.com/antifailure/af/runtime"
)

// TestQuotaAndLimitRange: af up gives the namespace the ResourceQuota and the LimitRange made
// from the manifest's limits; the API server sizes a container without a size by the limit
// range and refuses a pod over what the quota has left, whoever makes it; status reports the
// quota; and a service, or a migration, whose pods the quota refuses fails at once with
// AF-RUN-004 naming the quota, not after the readiness timeout.
func TestQuotaAndLimitRange(t *testing.T) {
	f := setup(t)
	requireEnforcer(t, f.h)
	ctx := ctxFor(t, 10*time.Minute)
	rt := f.runtime(t)
	serve := manifest.Command{Exec: []string{"aftool", "serve", "-tcp", ":8080", "-udp", ""}}
	m := small(t, map[string]*manifest.Service{
		"web": {Port: 8080, Command: serve, Migrate: manifest.Command{Exec: []string{"true"}}},
	})
	m.Limits = manifest.Limits{Replicas: 2, CPU: "200m", Memory: "128Mi"}
	ref := afruntime.Ref{ID: "quota-test", Manifest: m}
	ns := "af-env-quota-test"
	down(t, rt, ref)
	if _, err := rt.Up(ctx, afruntime.Spec{Ref: ref}); err != nil {
		t.Fatal(err)
	}

	// The quota: web R = max(1, 2) = 2, surge 1, its migration 1: 4 pods at 200m/128Mi; the
	// sidecar 50m/64Mi requested, 200m/256Mi limited; the probe 10m/16Mi, 200m/128Mi.
	q, err := f.kube.CoreV1().ResourceQuotas(ns).Get(ctx, CeilingsName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if q.Labels[LabelManagedBy] != "af" || q.Labels[LabelEnvironment] != "quota-test" {
		t.Errorf("quota labels %v", q.Labels)
	}
	for k, want := range map[corev1.ResourceName]string{
		corev1.ResourcePods: "6", corev1.ResourceRequestsCPU: "860m", corev1.ResourceRequestsMemory: "592Mi",
		corev1.ResourceLimitsCPU: "1200m", corev1.ResourceLimitsMemory: "896Mi",
	} {
		got := q.Spec.Hard[k]
		if got.Cmp(resource.MustParse(want)) != 0 {
			t.Errorf("quota hard %s = %s, want %s", k, got.String(), want)
		}
	}
	if len(q.Spec.Hard) != 5 {
		t.Errorf("quota hard %v: want exactly pods, requests and limits of cpu and memory", q.Spec.Hard)
	}
	lr, err := f.kube.CoreV1().LimitRanges(ns).Get(ctx, CeilingsName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lr.Labels[LabelManagedBy] != "af" || len(lr.Spec.Limits) != 1 || lr.Spec.Limits[0].Type != corev1.LimitTypeContainer {
		t.Fatalf("limit range %+v", lr)
	}
	item := lr.Spec.Limits[0]
	if got := fmt.Sprintf("default=%s defaultRequest=%s max=%s", rl(item.Default), rl(item.DefaultRequest), rl(item.Max)); got !=
		"default=[cpu=200m memory=128Mi] defaultRequest=[cpu=10m memory=16Mi] max=[cpu=200m memory=256Mi]" {
		t.Errorf("limit range: %s", got)
	}

	// The service's running pod, unsized in the manifest, has the limit range's defaults, its
	// gate too; the sidecar its own requests and the ceiling as its CPU limit.
	for sel, want := range map[string]string{
		LabelService + "=web," + LabelWorkload + "=" + WorkloadService: "limits=[cpu=200m memory=128Mi] requests=[cpu=10m memory=16Mi]",
		LabelRole + "=" + RoleSidecar:                                  "limits=[cpu=200m memory=256Mi] requests=[cpu=50m memory=64Mi]",
	} {
		pods, err := f.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil || len(pods.Items) != 1 {
			t.Fatalf("pods %s: %v %d", sel, err, len(pods.Items))
		}
		spec := pods.Items[0].Spec
		for _, c := range append(spec.InitContainers, spec.Containers...) {
			if got := fmt.Sprintf("limits=%s requests=%s", rl(c.Resources.Limits), rl(c.Resources.Requests)); got != want {
				t.Errorf("%s container %s: %s, want %s", sel, c.Name, got, want)
			}
		}
	}

	// Status: the sidecar, web's one instance and the probe, staying as the watch, hold 3 pods
	// and 600m, 512Mi of limits (the migration done); the quota controller counts within
	// moments.
	var st *afruntime.Status
	deadline := time.Now().Add(30 * time.Second)
	for {
		if st, err = rt.Status(ctx, ref); err != nil {
			t.Fatal(err)
		}
		if st.Quota != nil && st.Quota.Pods.Used == "3" || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	want := afruntime.Quota{Pods: afruntime.QuotaFigure{Used: "3", Hard: "6"}, CPU: afruntime.QuotaFigure{Used: "600m", Hard: "1200m"},
		Memory: afruntime.QuotaFigure{Used: "512Mi", Hard: "896Mi"}}
	if st.Quota == nil || *st.Quota != want {
		t.Errorf("status quota %+v, want %+v", st.Quota, want)
	}
	if data, err := json.Marshal(st); err != nil || !strings.Contains(string(data), `"quota":{"pods":{"used":"3","hard":"6"}`) {
		t.Errorf("status JSON: %s %v", data, err)
	}

	// A pod made in the namespace by anyone: each container within the limit range's max, five
	// of them over the 600m of limits.cpu the quota has left: refused by the API server.
	pod := func(name string, containers int, cpu string) *corev1.Pod {
		grace := int64(1)
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: &grace}}
		for i := range containers {
			c := corev1.Container{Name: fmt.Sprintf("c%d", i), Image: f.h.TestImage, ImagePullPolicy: corev1.PullNever, Command: []string{"sleep", "3600"}}
			if cpu != "" {
				l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("16Mi")}
				c.Resources = corev1.ResourceRequirements{Requests: l, Limits: l.DeepCopy()}
			}
			p.Spec.Containers = append(p.Spec.Containers, c)
		}
		return p
	}
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	_, err = f.kube.CoreV1().Pods(ns).Create(ctx, pod("over", 5, "200m"), dry)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota: "+CeilingsName) || !strings.Contains(err.Error(), "limits.cpu") {
		t.Errorf("a pod over the quota's limits.cpu: want a quota refusal, got %v", err)
	}
	// One without a size is admitted, sized by the limit range.
	made, err := f.kube.CoreV1().Pods(ns).Create(ctx, pod("plain", 1, ""), dry)
	if err != nil {
		t.Fatalf("a pod without a size: %v", err)
	}
	if got := fmt.Sprintf("limits=%s requests=%s", rl(made.Spec.Containers[0].Resources.Limits), rl(made.Spec.Containers[0].Resources.Requests)); got != "limits=[cpu=200m memory=128Mi] requests=[cpu=10m memory=16Mi]" {
		t.Errorf("a pod without a size: %s", got)
	}
	// A container over the limit range's max is refused whatever the quota has left.
	if _, err := f.kube.CoreV1().Pods(ns).Create(ctx, pod("big", 1, "300m"), dry); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "maximum cpu usage per Container is 200m") {
		t.Errorf("a container over max: want the limit range's refusal, got %v", err)
	}

	// Something else takes what is left (600m); web is scaled to 2 instances: its ReplicaSet
	// cannot create the second, and the wait fails at once with AF-RUN-004 naming the quota
	// (the watch, running, is not waited for as a probe that finishes would be).
	if _, err := f.kube.CoreV1().Pods(ns).Create(ctx, pod("hog", 3, "200m"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("a pod taking what the quota has left: %v", err)
	}
	if _, err := f.kube.AppsV1().Deployments(ns).Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"replicas":2}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	target, err := rt.resolve(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = rt.waitDeployment(ctx, target, "web", 2, 3*time.Minute)
	took := time.Since(start)
	t.Logf("wait for web refused by the quota: %s: %v", took.Round(time.Millisecond), err)
	if failure.CodeOf(err) != failure.NotReady.Code || !strings.Contains(err.Error(), "service web") || !strings.Contains(err.Error(), "ResourceQuota "+CeilingsName) {
		t.Errorf("want AF-RUN-004 naming service web and the quota, got %v", err)
	} else if !strings.Contains(failure.As(err).Hint, "base branch's af.yaml") {
		t.Errorf("hint: %q", failure.As(err).Hint)
	}
	if took > time.Minute {
		t.Errorf("the refusal took %s to report: the wait should not run out its timeout", took)
	}

	// A migration's Job whose pod the quota refuses fails at once too (the Job says so only in
	// a FailedCreate event).
	zero := int32(0)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "web-migrate-quota", Namespace: ns}, Spec: batchv1.JobSpec{
		BackoffLimit: &zero, Template: corev1.PodTemplateSpec{Spec: pod("", 1, "200m").Spec},
	}}
	if _, err := f.kube.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	err = rt.waitJob(ctx, target, "web", job.Name, 3*time.Minute)
	took = time.Since(start)
	t.Logf("wait for a migration refused by the quota: %s: %v", took.Round(time.Millisecond), err)
	if failure.CodeOf(err) != failure.NotReady.Code || !strings.Contains(err.Error(), "the migration of web") || !strings.Contains(err.Error(), "ResourceQuota "+CeilingsName) {
		t.Errorf("want AF-RUN-004 naming the migration of web and the quota, got %v", err)
	}
	if took > time.Minute {
		t.Errorf("the refusal took %s to report: the wait should not run out its timeout", took)
	}

	// The inventory lists both objects as the environment's.
	inv, err := rt.Inventory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, r := range inv {
		if r.Environment == "quota-test" {
			have[r.Kind+"/"+r.Name] = true
		}
	}
	if !have["ResourceQuota/"+CeilingsName] || !have["LimitRange/"+CeilingsName] {
		t.Errorf("inventory lacks the ceilings: %v", have)
	}
}
