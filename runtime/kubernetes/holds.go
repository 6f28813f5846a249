package kubernetes

// Holds: every customer pod of an environment is created at once, while the probe runs, and
// each one's gate, once it has observed containment on its own, waits at its hold before the
// application may start. A hold is a Service of af's that selects no pod while it is closed
// (connections to it are refused or dropped) and the sidecar once af releases it (they are
// accepted). af releases a workload's hold only after the probe has passed and, for a service,
// once every service it depends on is ready and its migration has succeeded; for a migration,
// once the services its migrate_after names are ready. So pods are scheduled and gated
// together, and a dependency chain costs the applications' own start, not scheduling, a gate
// and a readiness period per level.
//
// The hold is durable and needs no token: it is the Service's selector, which only af can
// write; a replacement pod sees it as it is (released: it starts after its own gate). `af up`
// closes every hold again before it changes anything, so new pods of a changed service wait
// for their turn while the running ones go on serving.

import (
	"context"
	"maps"
	"net"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/antifailure/af/manifest"
)

const (
	holdPrefix = "af-hold-"
	// LabelHold is the only key of a closed hold's selector: no pod carries it.
	LabelHold = "dev.antifailure.hold"
	// RoleHold labels the hold Services.
	RoleHold = "hold"
	// holdPort is the port a hold serves: the sidecar's proxy port, which every customer pod
	// may reach already.
	holdPort = 3128
)

// serviceHold names the hold of a service's instances; migrationHold that of its migration.
// Service names are at most 40 characters, so both stay within a DNS label.
func serviceHold(service string) string   { return holdPrefix + service }
func migrationHold(service string) string { return holdPrefix + service + "-migrate" }

// holdService is the hold named, closed or released.
func (e *env) holdService(name, service string, released bool) *corev1.Service {
	sel := map[string]string{LabelHold: name}
	if released {
		sel = map[string]string{LabelRole: RoleSidecar, LabelEnvironment: e.ID}
	}
	return &corev1.Service{
		ObjectMeta: meta(name, e.Namespace, e.labels(RoleHold, service)),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: sel,
			Ports:    []corev1.ServicePort{{Name: "hold", Port: holdPort, TargetPort: intstr.FromInt32(holdPort), Protocol: corev1.ProtocolTCP}},
		},
	}
}

// holds lists the holds of the manifest's workloads: each service's, and each migration's.
func holds(m *manifest.Manifest) map[string]string {
	out := map[string]string{}
	for name, s := range m.Services {
		out[serviceHold(name)] = name
		if !s.Migrate.IsZero() {
			out[migrationHold(name)] = name
		}
	}
	return out
}

// closeHolds closes every hold of the environment (creating those that do not exist) and
// records their addresses for the pods' gates. It runs before any workload is written.
func (r *Runtime) closeHolds(ctx context.Context, t *target, e *env) error {
	addrs := map[string]string{}
	hs := holds(t.m)
	for _, name := range slices.Sorted(maps.Keys(hs)) {
		svc, err := apply(ctx, t.c, t.c.cs.CoreV1().Services(t.ns), "v1", "Service", name, e.holdService(name, hs[name], false))
		if err != nil {
			return err
		}
		addrs[name] = net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(holdPort))
	}
	// Only writeWorkloads reads them, after this; the probe written beside it names no hold.
	e.Holds = addrs
	return nil
}

// release lets the pods held by the hold named start: they connect once the cluster routes
// the hold's address to the sidecar.
func (r *Runtime) release(ctx context.Context, t *target, e *env, name string) error {
	_, err := apply(ctx, t.c, t.c.cs.CoreV1().Services(t.ns), "v1", "Service", name, e.holdService(name, holds(t.m)[name], true))
	return err
}
