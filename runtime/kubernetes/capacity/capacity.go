// Package capacity is the capacity preflight of af up: from the cluster's nodes and the pods
// bound to them, what each node has free, and whether an environment's instances can fit at
// all. It refuses only what no packing can hold (an instance that fits no single node, or a
// total beyond the sum of what is free); passing is not a promise, the scheduler decides.
//
// Nodes and pods are added one at a time (Tally), so a caller can feed it page by page from a
// paginated list and never hold the whole cluster in memory.
package capacity

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Size is an amount of the two dimensions af sizes: CPU in millicores, memory in bytes.
type Size struct {
	MilliCPU int64
	Memory   int64
}

// Add returns s + o.
func (s Size) Add(o Size) Size { return Size{s.MilliCPU + o.MilliCPU, s.Memory + o.Memory} }

// Sub returns s - o.
func (s Size) Sub(o Size) Size { return Size{s.MilliCPU - o.MilliCPU, s.Memory - o.Memory} }

// Max returns the larger of s and o in each dimension.
func (s Size) Max(o Size) Size { return Size{max(s.MilliCPU, o.MilliCPU), max(s.Memory, o.Memory)} }

// Fits reports whether s fits in free, in both dimensions.
func (s Size) Fits(free Size) bool { return s.MilliCPU <= free.MilliCPU && s.Memory <= free.Memory }

// FromList reads the CPU and memory of a resource list; a dimension it does not name is 0.
func FromList(l corev1.ResourceList) Size {
	var s Size
	if q, ok := l[corev1.ResourceCPU]; ok {
		s.MilliCPU = q.MilliValue()
	}
	if q, ok := l[corev1.ResourceMemory]; ok {
		s.Memory = q.Value()
	}
	return s
}

// Requests is what a pod asks of its node: the sum of its containers' requests, or the largest
// init container's if that is more (init containers run one at a time, before the others),
// plus the pod's overhead. Sidecar-style init containers (restartPolicy Always) keep running,
// so they add to the sum.
func Requests(spec *corev1.PodSpec) Size {
	var run Size
	for i := range spec.Containers {
		run = run.Add(FromList(spec.Containers[i].Resources.Requests))
	}
	var initMax, restartable Size
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		r := FromList(c.Resources.Requests)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			restartable = restartable.Add(r)
			run = run.Add(r)
			continue
		}
		// An init container runs beside the restartable ones started before it.
		initMax = initMax.Max(r.Add(restartable))
	}
	return run.Max(initMax).Add(FromList(spec.Overhead))
}

// Node is one node's free capacity.
type Node struct {
	Name string
	Free Size
}

// Tally accumulates nodes and pods into each usable node's free capacity.
type Tally struct {
	nodes    map[string]*tallyNode
	excluded []string
	reserved Size // asked for by runs going on whose pods are not placed yet (Reserve)
}

type tallyNode struct {
	allocatable Size
	used        Size
}

// NewTally returns an empty tally.
func NewTally() *Tally { return &Tally{nodes: map[string]*tallyNode{}} }

// AddNode records a node. A cordoned (unschedulable) or not Ready node is left out entirely:
// nothing new will be placed there.
func (t *Tally) AddNode(n *corev1.Node) {
	if reason := unusable(n); reason != "" {
		t.excluded = append(t.excluded, n.Name+" ("+reason+")")
		return
	}
	tn := t.nodes[n.Name]
	if tn == nil {
		tn = &tallyNode{}
		t.nodes[n.Name] = tn
	}
	tn.allocatable = FromList(n.Status.Allocatable)
}

func unusable(n *corev1.Node) string {
	if n.Spec.Unschedulable {
		return "cordoned"
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				return ""
			}
			return "not ready"
		}
	}
	return "not ready"
}

// AddPod records a pod's requests against its node. Pods not bound to a node, pods that have
// finished (Succeeded or Failed) and pods on nodes left out do not count.
func (t *Tally) AddPod(p *corev1.Pod) {
	if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return
	}
	tn := t.nodes[p.Spec.NodeName]
	if tn == nil {
		// A pod listed before its node: keep its use; a node never added is dropped in Free.
		tn = &tallyNode{allocatable: Size{-1, -1}}
		t.nodes[p.Spec.NodeName] = tn
	}
	tn.used = tn.used.Add(Requests(&p.Spec))
}

// Reserve records what other environments being brought up will ask for beyond what their
// pods already hold on a node: Free takes it from the nodes with the most room, as the
// scheduler would place it.
func (t *Tally) Reserve(s Size) {
	t.reserved = t.reserved.Add(Size{max(s.MilliCPU, 0), max(s.Memory, 0)})
}

// Reserved is what Reserve recorded.
func (t *Tally) Reserved() Size { return t.reserved }

// Free returns each usable node's free capacity (never below zero), less what is reserved,
// sorted by name.
func (t *Tally) Free() []Node {
	out := make([]Node, 0, len(t.nodes))
	for name, tn := range t.nodes {
		if tn.allocatable.MilliCPU < 0 {
			continue // only pods were seen for it: excluded, or not a node
		}
		free := tn.allocatable.Sub(tn.used)
		free = Size{max(free.MilliCPU, 0), max(free.Memory, 0)}
		out = append(out, Node{Name: name, Free: free})
	}
	// The reservation, from the roomiest node down, one dimension at a time.
	left := t.reserved
	take := func(room func(*Node) *int64, want *int64) {
		order := make([]int, len(out))
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return *room(&out[order[a]]) > *room(&out[order[b]]) })
		for _, i := range order {
			n := min(*want, *room(&out[i]))
			*room(&out[i]) -= n
			*want -= n
		}
	}
	take(func(n *Node) *int64 { return &n.Free.MilliCPU }, &left.MilliCPU)
	take(func(n *Node) *int64 { return &n.Free.Memory }, &left.Memory)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Excluded names the nodes left out and why.
func (t *Tally) Excluded() []string { return t.excluded }

// Instance is one thing the environment will run: a replica, the sidecar, the probe, a
// migration.
type Instance struct {
	// Service names it in messages ("web", "the sidecar").
	Service string
	Size    Size
	// Concurrent instances run at the same time as the others and count in the total; the
	// probe and migrations finish before the services start, so they must fit a node but do
	// not add to the total.
	Concurrent bool
}

// Shortfall is why an environment cannot fit.
type Shortfall struct {
	Service   string
	Dimension string // "cpu" or "memory"
	Need      int64
	Have      int64
	// Total: the sum does not fit the sum of what is free (else: no single node has room).
	Total bool
	Nodes int
}

func (s *Shortfall) Error() string {
	need, have, short := format(s.Dimension, s.Need), format(s.Dimension, s.Have), format(s.Dimension, s.Need-s.Have)
	if s.Total {
		return fmt.Sprintf("the environment needs %s of %s in all and the %d usable nodes have %s free together: %s short", need, s.Dimension, s.Nodes, have, short)
	}
	return fmt.Sprintf("one instance of %s needs %s of %s and the most any of the %d usable nodes has free is %s: %s short", s.Service, need, s.Dimension, s.Nodes, have, short)
}

func format(dim string, v int64) string {
	if dim == "cpu" {
		return resource.NewMilliQuantity(v, resource.DecimalSI).String()
	}
	if v >= 1<<20 && v%(1<<20) != 0 {
		v -= v % (1 << 20) // whole MiB: what is free is never exact anyway
	}
	return resource.NewQuantity(v, resource.BinarySI).String()
}

// Check applies the two necessary conditions: every instance fits on some single node, and
// the concurrent ones together fit in the sum of what is free. It returns nil when both hold.
func Check(nodes []Node, instances []Instance) *Shortfall {
	var total, largest Size
	for _, n := range nodes {
		total = total.Add(n.Free)
		largest = largest.Max(n.Free)
	}
	for _, in := range instances {
		fits := false
		for _, n := range nodes {
			if in.Size.Fits(n.Free) {
				fits = true
				break
			}
		}
		if fits {
			continue
		}
		s := &Shortfall{Service: in.Service, Nodes: len(nodes), Dimension: "cpu", Need: in.Size.MilliCPU, Have: largest.MilliCPU}
		switch {
		case in.Size.MilliCPU > largest.MilliCPU:
		case in.Size.Memory > largest.Memory:
			s.Dimension, s.Need, s.Have = "memory", in.Size.Memory, largest.Memory
		default:
			// Each dimension fits some node, never both on one: report CPU on the node with
			// the most memory room, which is where the memory fits.
			best := Node{}
			for _, n := range nodes {
				if in.Size.Memory <= n.Free.Memory && n.Free.MilliCPU >= best.Free.MilliCPU {
					best = n
				}
			}
			s.Have = best.Free.MilliCPU
		}
		return s
	}
	var need Size
	for _, in := range instances {
		if in.Concurrent {
			need = need.Add(in.Size)
		}
	}
	if need.MilliCPU > total.MilliCPU {
		return &Shortfall{Service: "all services", Dimension: "cpu", Need: need.MilliCPU, Have: total.MilliCPU, Total: true, Nodes: len(nodes)}
	}
	if need.Memory > total.Memory {
		return &Shortfall{Service: "all services", Dimension: "memory", Need: need.Memory, Have: total.Memory, Total: true, Nodes: len(nodes)}
	}
	return nil
}

// Format writes one dimension of a size as Kubernetes quantities are written (500m, 64Mi).
func Format(dim string, v int64) string { return format(dim, v) }

// Describe summarises free capacity for progress output.
func Describe(nodes []Node) string {
	var total Size
	for _, n := range nodes {
		total = total.Add(n.Free)
	}
	return fmt.Sprintf("%d usable node(s), %s CPU and %s memory free in all", len(nodes), format("cpu", total.MilliCPU), format("memory", total.Memory))
}
