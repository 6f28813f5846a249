package kubernetes

// The environment's pods and their addresses: af net log names the pod behind a decision's
// client address with them.

import (
	"context"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	afruntime "github.com/antifailure/af/runtime"
)

// Instances lists the pods of the environment's namespace that have an address: the services'
// and migrations' (by their labels), the probe's and the sidecar's.
func (r *Runtime) Instances(ctx context.Context, ref afruntime.Ref) ([]afruntime.Instance, error) {
	t, err := r.resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	if err := ownNamespace(ctx, t, ref); err != nil {
		return nil, err
	}
	pods, err := t.c.cs.CoreV1().Pods(t.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, apiError(t.c, "listing the pods of "+t.ns, err)
	}
	var out []afruntime.Instance
	for _, p := range pods.Items {
		var addrs []string
		for _, ip := range p.Status.PodIPs {
			addrs = append(addrs, ip.IP)
		}
		if len(addrs) == 0 && p.Status.PodIP != "" {
			addrs = []string{p.Status.PodIP}
		}
		if len(addrs) == 0 {
			continue
		}
		in := afruntime.Instance{Name: p.Name, Addresses: addrs, Workload: p.Labels[LabelWorkload]}
		switch {
		case p.Labels[LabelRole] == RoleSidecar:
			in.Workload = RoleSidecar
		case in.Workload == WorkloadService || in.Workload == WorkloadMigration:
			in.Service = p.Labels[LabelService]
		case in.Workload == "":
			in.Workload = "unknown"
		}
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
