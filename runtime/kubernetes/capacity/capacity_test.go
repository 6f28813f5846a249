package capacity

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func list(cpu, mem string) corev1.ResourceList {
	l := corev1.ResourceList{}
	if cpu != "" {
		l[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		l[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	return l
}

func node(name, cpu, mem string, ready, cordoned bool) *corev1.Node {
	st := corev1.ConditionTrue
	if !ready {
		st = corev1.ConditionFalse
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{Unschedulable: cordoned},
		Status:     corev1.NodeStatus{Allocatable: list(cpu, mem), Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}},
	}
}

func pod(nodeName string, phase corev1.PodPhase, containers, inits []corev1.ResourceList) *corev1.Pod {
	p := &corev1.Pod{Spec: corev1.PodSpec{NodeName: nodeName}, Status: corev1.PodStatus{Phase: phase}}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Resources: corev1.ResourceRequirements{Requests: c}})
	}
	for _, c := range inits {
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Resources: corev1.ResourceRequirements{Requests: c}})
	}
	return p
}

func TestRequests(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	for _, c := range []struct {
		name string
		spec corev1.PodSpec
		want Size
	}{
		{"containers sum", corev1.PodSpec{Containers: []corev1.Container{{Resources: req("100m", "64Mi")}, {Resources: req("50m", "")}}}, Size{150, 64 << 20}},
		{"init is a max, not a sum", corev1.PodSpec{
			InitContainers: []corev1.Container{{Resources: req("300m", "16Mi")}, {Resources: req("200m", "200Mi")}},
			Containers:     []corev1.Container{{Resources: req("100m", "64Mi")}}}, Size{300, 200 << 20}},
		{"a dimension not named asks nothing", corev1.PodSpec{Containers: []corev1.Container{{Resources: req("", "1Gi")}}}, Size{0, 1 << 30}},
		{"overhead", corev1.PodSpec{Containers: []corev1.Container{{Resources: req("100m", "")}}, Overhead: list("10m", "1Mi")}, Size{110, 1 << 20}},
		{"restartable init containers run beside the rest", corev1.PodSpec{
			InitContainers: []corev1.Container{{Resources: req("100m", ""), RestartPolicy: &always}, {Resources: req("250m", "")}},
			Containers:     []corev1.Container{{Resources: req("100m", "")}}}, Size{350, 0}},
	} {
		if got := Requests(&c.spec); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

func req(cpu, mem string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: list(cpu, mem)}
}

func TestTally(t *testing.T) {
	tl := NewTally()
	// A pod listed before its node still counts.
	tl.AddPod(pod("a", corev1.PodRunning, []corev1.ResourceList{list("500m", "1Gi")}, nil))
	tl.AddNode(node("a", "2", "4Gi", true, false))
	tl.AddNode(node("b", "4", "8Gi", true, true))    // cordoned
	tl.AddNode(node("c", "8", "16Gi", false, false)) // not ready
	tl.AddNode(node("d", "1", "1Gi", true, false))
	tl.AddPod(pod("a", corev1.PodPending, []corev1.ResourceList{list("250m", "")}, []corev1.ResourceList{list("1", "")}))
	tl.AddPod(pod("a", corev1.PodSucceeded, []corev1.ResourceList{list("1", "1Gi")}, nil)) // finished: free again
	tl.AddPod(pod("a", corev1.PodFailed, []corev1.ResourceList{list("1", "1Gi")}, nil))
	tl.AddPod(pod("", corev1.PodPending, []corev1.ResourceList{list("1", "1Gi")}, nil))  // not bound
	tl.AddPod(pod("b", corev1.PodRunning, []corev1.ResourceList{list("1", "1Gi")}, nil)) // on an excluded node
	tl.AddPod(pod("d", corev1.PodRunning, []corev1.ResourceList{list("2", "2Gi")}, nil)) // overcommitted: 0, not negative
	got := fmt.Sprint(tl.Free())
	want := "[{a {500 3221225472}} {d {0 0}}]"
	if got != want {
		t.Errorf("free: %s, want %s", got, want)
	}
	if ex := strings.Join(tl.Excluded(), "; "); ex != "b (cordoned); c (not ready)" {
		t.Errorf("excluded: %s", ex)
	}
}

// What runs going on will ask for is taken from the roomiest nodes first, never below zero.
func TestTallyReserve(t *testing.T) {
	tl := NewTally()
	tl.AddNode(node("a", "2", "4Gi", true, false))
	tl.AddNode(node("b", "1", "1Gi", true, false))
	tl.Reserve(Size{MilliCPU: 2500, Memory: 4 << 30})
	tl.Reserve(Size{MilliCPU: -5}) // nothing: a reservation its pods already cover
	if got, want := fmt.Sprint(tl.Free()), "[{a {0 0}} {b {500 1073741824}}]"; got != want {
		t.Errorf("free: %s, want %s", got, want)
	}
	if tl.Reserved() != (Size{2500, 4 << 30}) {
		t.Errorf("reserved %+v", tl.Reserved())
	}
	tl.Reserve(Size{MilliCPU: 10000, Memory: 10 << 30})
	if got, want := fmt.Sprint(tl.Free()), "[{a {0 0}} {b {0 0}}]"; got != want {
		t.Errorf("free when more is reserved than there is: %s, want %s", got, want)
	}
}

func TestCheck(t *testing.T) {
	nodes := []Node{{"a", Size{1000, 2 << 30}}, {"b", Size{500, 4 << 30}}}
	for _, c := range []struct {
		name string
		in   []Instance
		want string // "" passes
	}{
		{"fits", []Instance{{"web", Size{500, 1 << 30}, true}, {"worker", Size{500, 1 << 30}, true}}, ""},
		{"nothing named asks nothing", []Instance{{"web", Size{}, true}}, ""},
		{"larger than any node (cpu)", []Instance{{"web", Size{2000, 0}, true}},
			"one instance of web needs 2 of cpu and the most any of the 2 usable nodes has free is 1: 1 short"},
		{"larger than any node (memory)", []Instance{{"db", Size{0, 5 << 30}, true}},
			"one instance of db needs 5Gi of memory and the most any of the 2 usable nodes has free is 4Gi: 1Gi short"},
		{"each dimension fits a node, never both on one", []Instance{{"web", Size{1000, 3 << 30}, true}},
			"one instance of web needs 1 of cpu and the most any of the 2 usable nodes has free is 500m: 500m short"},
		{"fits per node, not in total", []Instance{{"web", Size{900, 0}, true}, {"web", Size{900, 0}, true}},
			"the environment needs 1800m of cpu in all and the 2 usable nodes have 1500m free together: 300m short"},
		{"migrations and the probe do not add to the total", []Instance{{"web", Size{1000, 0}, true}, {"web", Size{500, 0}, true}, {"migration of web", Size{1000, 0}, false}}, ""},
		{"but they must fit a node", []Instance{{"migration of web", Size{1500, 0}, false}},
			"one instance of migration of web needs 1500m of cpu and the most any of the 2 usable nodes has free is 1: 500m short"},
	} {
		got := ""
		if s := Check(nodes, c.in); s != nil {
			got = s.Error()
		}
		if got != c.want {
			t.Errorf("%s:\n got  %q\n want %q", c.name, got, c.want)
		}
	}
	if s := Check(nil, []Instance{{"web", Size{1, 0}, true}}); s == nil {
		t.Errorf("no usable node passed a request")
	}
}

// BenchmarkPreflight computes the check for 5,000 nodes and 150,000 pods held in memory, as
// a paginated list would feed them.
func BenchmarkPreflight(b *testing.B) {
	nodes := make([]*corev1.Node, 5000)
	for i := range nodes {
		nodes[i] = node(fmt.Sprintf("node-%05d", i), "16", "64Gi", i%50 != 0, i%70 == 0)
	}
	pods := make([]*corev1.Pod, 150000)
	for i := range pods {
		phase := corev1.PodRunning
		if i%20 == 0 {
			phase = corev1.PodSucceeded
		}
		pods[i] = pod(fmt.Sprintf("node-%05d", i%5000), phase,
			[]corev1.ResourceList{list("100m", "128Mi"), list("50m", "64Mi")}, []corev1.ResourceList{list("200m", "32Mi")})
	}
	instances := []Instance{{"the sidecar", Size{50, 64 << 20}, true}, {"the probe", Size{}, false}}
	for range 20 {
		instances = append(instances, Instance{"web", Size{250, 256 << 20}, true})
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		tl := NewTally()
		for _, n := range nodes {
			tl.AddNode(n)
		}
		for _, p := range pods {
			tl.AddPod(p)
		}
		if s := Check(tl.Free(), instances); s != nil {
			b.Fatal(s)
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(b.N), "ms/check")
	b.ReportMetric(float64(after.HeapAlloc)/(1<<20), "MiB-heap-with-objects")
}
