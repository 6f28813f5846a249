package kubernetes

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/manifest"
)

func TestQuotaHard(t *testing.T) {
	migrate := manifest.Command{Exec: []string{"/app", "migrate"}}
	for _, c := range []struct {
		name     string
		limits   manifest.Limits
		services map[string]*manifest.Service
		// pods, requests.cpu, requests.memory, limits.cpu, limits.memory
		want [5]string
	}{
		{
			// R = max(1, 3) = 3, surge 1: 4 pods at 1/1Gi; the sidecar (50m/64Mi, 1/256Mi) and
			// the probe (10m/16Mi, 1/1Gi).
			"one unsized service, default ceilings", manifest.Limits{Replicas: 3, CPU: "1", Memory: "1Gi"},
			map[string]*manifest.Service{"web": {Replicas: 1}},
			[5]string{"6", "4060m", "4176Mi", "6", "5376Mi"},
		},
		{
			// Limits left out (a manifest not read by manifest.Parse) are the defaults: web and
			// worker each R = 3, surge 1, worker's migration 1 more; 9 pods at 1/1Gi.
			"limits left out, a migration", manifest.Limits{},
			map[string]*manifest.Service{
				"web":    {Replicas: 2, Resources: &manifest.Resources{CPU: "250m"}},
				"worker": {Migrate: migrate},
			},
			[5]string{"11", "9060m", "9296Mi", "11", "10496Mi"},
		},
		{
			// Over the ceilings (af up on a developer's machine does not clamp): R = 5, surge
			// 2, a migration: 8 pods at max(2, 1) CPU and max(512Mi, 1Gi) memory.
			"a service over the ceilings", manifest.Limits{Replicas: 3, CPU: "1", Memory: "1Gi"},
			map[string]*manifest.Service{"big": {Replicas: 5, Migrate: migrate, Resources: &manifest.Resources{CPU: "2", Memory: "512Mi"}}},
			[5]string{"10", "16060m", "8272Mi", "18", "9472Mi"},
		},
		{
			// Ceilings at or below af's defaults (memory at the manifest's floor): the default
			// request is the ceiling, the sidecar's CPU limit its request (50m).
			"tiny ceilings", manifest.Limits{Replicas: 1, CPU: "5m", Memory: "16Mi"},
			map[string]*manifest.Service{"web": {}},
			[5]string{"4", "65m", "112Mi", "65m", "304Mi"},
		},
		{
			// R = 8: surge ceil(8/4) = 2.
			"surge rounds up", manifest.Limits{Replicas: 8, CPU: "100m", Memory: "64Mi"},
			map[string]*manifest.Service{"web": {Replicas: 1}},
			[5]string{"12", "1060m", "720Mi", "1200m", "960Mi"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			ceil, err := ceilingsOf(c.limits)
			if err != nil {
				t.Fatal(err)
			}
			hard, err := quotaHard(&manifest.Manifest{Limits: c.limits, Services: c.services}, ceil)
			if err != nil {
				t.Fatal(err)
			}
			for i, k := range []corev1.ResourceName{corev1.ResourcePods, corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory, corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory} {
				got, want := hard[k], resource.MustParse(c.want[i])
				if got.Cmp(want) != 0 {
					t.Errorf("%s = %s, want %s", k, got.String(), want.String())
				}
			}
		})
	}
}

func TestSurge(t *testing.T) {
	// The Deployment controller's maxSurge 25%, rounded up.
	for r, want := range map[int]int{1: 1, 3: 1, 4: 1, 5: 2, 8: 2, 9: 3, 20: 5} {
		if got := surge(r); got != want {
			t.Errorf("surge(%d) = %d, want %d", r, got, want)
		}
	}
}

// TestCeilingsAdmitAfsContainers puts every container af makes through what the LimitRanger
// does (defaults for what a container leaves out, a request never above its limit) and what it
// refuses (a limit over max), and checks each pod fits the per-pod size the quota counted.
func TestCeilingsAdmitAfsContainers(t *testing.T) {
	for _, limits := range []manifest.Limits{
		{Replicas: 3, CPU: "1", Memory: "1Gi"},
		{Replicas: 1, CPU: "1m", Memory: "16Mi"}, // the smallest the manifest allows
		{Replicas: 2, CPU: "100m", Memory: "128Mi"},
	} {
		e := testEnv()
		var err error
		if e.Ceilings, err = ceilingsOf(limits); err != nil {
			t.Fatal(err)
		}
		e.Manifest.Limits = limits
		e.Manifest.Services["big"] = &manifest.Service{Replicas: 1, Port: 80, Migrate: manifest.Command{Exec: []string{"m"}},
			Resources: &manifest.Resources{CPU: "3", Memory: "3Gi"}}
		lr, q, err := e.ceilingObjects()
		if err != nil {
			t.Fatal(err)
		}
		item := lr.Spec.Limits[0]
		for k, d := range item.Default {
			if d.Cmp(item.Max[k]) > 0 {
				t.Errorf("%+v: default %s %s over max %s", limits, k, d.String(), str(item.Max[k]))
			}
			if dr := item.DefaultRequest[k]; dr.Cmp(d) > 0 {
				t.Errorf("%+v: default request %s %s over the default limit %s", limits, k, dr.String(), d.String())
			}
		}
		type pod struct {
			name string
			spec corev1.PodSpec
		}
		var pods []pod
		for name, s := range e.Manifest.Services {
			pods = append(pods, pod{"service " + name, e.deployment(name, s).Spec.Template.Spec})
			if len(s.Migrate.Argv()) > 0 {
				pods = append(pods, pod{"migration " + name, e.migrationJob(name, s).Spec.Template.Spec})
			}
		}
		pods = append(pods, pod{"probe", e.probePod(DefaultWatch).Spec}, pod{"sidecar", e.sidecarDeployment("h").Spec.Template.Spec})
		sum := corev1.ResourceList{}
		for _, p := range pods {
			eff := corev1.ResourceList{}
			for _, group := range [][]corev1.Container{p.spec.InitContainers, p.spec.Containers} {
				for _, c := range group {
					r := limitRanger(item, c.Resources)
					for _, k := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
						lim, req := r.Limits[k], r.Requests[k]
						if lim.Cmp(item.Max[k]) > 0 {
							t.Errorf("%+v: %s container %s: limit %s %s over max %s: refused", limits, p.name, c.Name, k, lim.String(), str(item.Max[k]))
						}
						if req.Cmp(lim) > 0 {
							t.Errorf("%+v: %s container %s: request %s %s over limit %s: invalid", limits, p.name, c.Name, k, req.String(), lim.String())
						}
						if cur := eff[corev1.ResourceName("limits."+k)]; lim.Cmp(cur) > 0 {
							eff[corev1.ResourceName("limits."+k)] = lim
						}
					}
				}
			}
			for k, v := range eff {
				s := sum[k]
				s.Add(v)
				sum[k] = s
			}
		}
		// Every pod at once (one of each: the quota also counts surges and R above replicas)
		// fits the quota.
		for k, v := range sum {
			if h := q.Spec.Hard[k]; v.Cmp(h) > 0 {
				t.Errorf("%+v: one of each pod holds %s %s, over the quota's %s", limits, k, v.String(), h.String())
			}
		}
		if p := q.Spec.Hard[corev1.ResourcePods]; p.Value() < int64(len(pods)) {
			t.Errorf("%+v: quota pods %d < %d pods af makes", limits, p.Value(), len(pods))
		}
	}
}

// limitRanger is what the LimitRanger admission plugin makes of a container's resources
// (after the API's own defaulting: a limit without a request makes the request).
func limitRanger(item corev1.LimitRangeItem, r corev1.ResourceRequirements) corev1.ResourceRequirements {
	out := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	for k, v := range r.Limits {
		out.Limits[k] = v
	}
	for k, v := range r.Requests {
		out.Requests[k] = v
	}
	for k, v := range out.Limits {
		if _, ok := out.Requests[k]; !ok {
			out.Requests[k] = v
		}
	}
	for k, v := range item.Default {
		if _, ok := out.Limits[k]; !ok {
			out.Limits[k] = v
		}
	}
	for k, v := range item.DefaultRequest {
		if _, ok := out.Requests[k]; !ok {
			out.Requests[k] = v
		}
	}
	return out
}

func str(q resource.Quantity) string { return q.String() }

// The sidecar's CPU limit is the ceiling, never below its request.
func TestSidecarResources(t *testing.T) {
	for cpu, want := range map[manifest.Quantity]string{"1": "1", "20m": "50m", "": "1"} {
		c, err := ceilingsOf(manifest.Limits{CPU: cpu})
		if err != nil {
			t.Fatal(err)
		}
		d := (&env{Ceilings: c}).sidecarDeployment("h")
		got := d.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU]
		if got.Cmp(resource.MustParse(want)) != 0 {
			t.Errorf("limits.cpu %q: sidecar CPU limit %s, want %s", cpu, got.String(), want)
		}
		if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
			t.Errorf("the sidecar is counted once: its strategy must stay Recreate, is %s", d.Spec.Strategy.Type)
		}
	}
}

func TestQuotaRefusal(t *testing.T) {
	msg := `pods "web-5c9d-x2" is forbidden: exceeded quota: af-ceilings, requested: limits.cpu=2,pods=1, used: limits.cpu=5,pods=4, limited: limits.cpu=6,pods=5`
	d := &appsv1.Deployment{Status: appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{
		{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetCreated"},
		{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: msg},
	}}}
	if got := quotaRefusal(d); got != msg {
		t.Errorf("quotaRefusal = %q", got)
	}
	d.Status.Conditions[1].Message = `pods "web-1" is forbidden: exceeded quota: someone-elses, requested: pods=1, used: pods=1, limited: pods=1`
	if got := quotaRefusal(d); got != "" {
		t.Errorf("another quota's refusal taken as af's: %q", got)
	}
	req := quotaRequested(msg)
	if cpu, pods := req[corev1.ResourceLimitsCPU], req[corev1.ResourcePods]; len(req) != 2 || cpu.String() != "2" || pods.Value() != 1 {
		t.Errorf("quotaRequested = %v", req)
	}
	if req := quotaRequested("exceeded quota: af-ceilings"); len(req) != 0 {
		t.Errorf("quotaRequested of a message without figures = %v", req)
	}
	err := quotaFailure(deploymentWords("web"), msg)
	if failure.CodeOf(err) != failure.NotReady.Code || !strings.Contains(err.Error(), "service web") || !strings.Contains(err.Error(), CeilingsName) ||
		!strings.Contains(failure.As(err).Hint, "base branch's af.yaml limits") {
		t.Errorf("quotaFailure: %v", err)
	}
	if got := deploymentWords(SidecarName); got != "the sidecar" {
		t.Errorf("deploymentWords(%s) = %q", SidecarName, got)
	}
}
