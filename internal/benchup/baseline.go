// Package benchup is make bench-up: af up and af down of an example app on the local test
// cluster, next to kubectl applying and waiting for the same services as plain Kubernetes
// objects. It holds what the table is made of: the plain objects a manifest stands for
// (NewBaseline), the gate's figures read off a pod's logs (ReadPod) and the medians.
// TestBenchUpTable runs it (AF_BENCH=1).
package benchup

import (
	"encoding/json"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/antifailure/af/manifest"
)

// LabelApp names the service on every plain pod: the Deployments' selector, and what picks
// the plain pods to replace.
const LabelApp = "app"

// Baseline is a manifest's services as plain Kubernetes objects in one namespace: a Deployment
// each (its replicas, image, command, port, readiness, environment and size as the manifest
// says), a Service for each that listens and a Job for each migration; none of what af adds
// (policies, sidecar, probe, gate, holds, proxy variables).
type Baseline struct {
	Namespace   string
	Deployments []*appsv1.Deployment // in start order
	Services    []*corev1.Service
	Jobs        []*batchv1.Job
	// Steps is af's start order as levels: each step's objects are applied together and
	// waited for before the next. A migration runs once its migrate_after services are ready
	// (without them: at once, beside the services its own depends on); a service starts once
	// its dependencies are ready and its migration is done.
	Steps []Step
	// Pods is how many pods the Deployments run.
	Pods int
}

// Step is one level of the start order.
type Step struct {
	Objects     []any    // Deployments, Services and Jobs
	Deployments []string // waited for until Available
	Jobs        []string // waited for until Complete
}

// NewBaseline builds the plain objects of m's services in namespace ns. images names each
// service's image (a service's own image: field is the default); a service with neither is an
// error.
func NewBaseline(m *manifest.Manifest, ns string, images map[string]string) (*Baseline, error) {
	b := &Baseline{Namespace: ns}
	order := manifest.StartOrder(m.Services)
	level, migration := levels(m.Services, order)
	top := 0
	for _, name := range order {
		top = max(top, level[name])
	}
	b.Steps = make([]Step, top+1)
	for _, name := range order {
		s := m.Services[name]
		image := images[name]
		if image == "" {
			image = s.Image
		}
		if image == "" {
			return nil, fmt.Errorf("service %s: no image: the manifest builds it and none was given", name)
		}
		res, err := size(s.Resources)
		if err != nil {
			return nil, fmt.Errorf("service %s: %w", name, err)
		}
		d := deployment(ns, name, image, res, s)
		b.Deployments = append(b.Deployments, d)
		b.Pods += int(*d.Spec.Replicas)
		step := &b.Steps[level[name]]
		step.Objects = append(step.Objects, d)
		step.Deployments = append(step.Deployments, name)
		if s.Port > 0 {
			svc := service(ns, name, s.Port)
			b.Services = append(b.Services, svc)
			step.Objects = append(step.Objects, svc)
		}
		if !s.Migrate.IsZero() {
			j := job(ns, name, image, res, s)
			b.Jobs = append(b.Jobs, j)
			step := &b.Steps[migration[name]]
			step.Objects = append(step.Objects, j)
			step.Jobs = append(step.Jobs, j.Name)
		}
	}
	b.Steps = slices.DeleteFunc(b.Steps, func(s Step) bool { return len(s.Objects) == 0 })
	return b, nil
}

// levels returns each service's step and each migration's: a migration's is one past its
// migrate_after services' (0 without them), a service's one past its dependencies' and its
// migration's. order has every service after its dependencies.
func levels(services map[string]*manifest.Service, order []string) (service, migration map[string]int) {
	service, migration = map[string]int{}, map[string]int{}
	for _, name := range order {
		s := services[name]
		l := 0
		for _, d := range s.DependsOn {
			l = max(l, service[d]+1)
		}
		if !s.Migrate.IsZero() {
			m := 0
			for _, a := range s.MigrateAfter {
				m = max(m, service[a]+1)
			}
			migration[name] = m
			l = max(l, m+1)
		}
		service[name] = l
	}
	return service, migration
}

// Plain is every Deployment and Service, without the migrations: all at once, the floor.
func (b *Baseline) Plain() []any {
	var out []any
	for _, d := range b.Deployments {
		out = append(out, d)
	}
	for _, s := range b.Services {
		out = append(out, s)
	}
	return out
}

// DeploymentNames are the Deployments' names, in start order.
func (b *Baseline) DeploymentNames() []string {
	var out []string
	for _, d := range b.Deployments {
		out = append(out, d.Name)
	}
	return out
}

// List is objects as one v1 List in JSON, for kubectl apply -f -.
func List(objects []any) ([]byte, error) {
	data, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": objects})
	if err != nil {
		return nil, fmt.Errorf("encoding the objects: %w", err)
	}
	return data, nil
}

func deployment(ns, name, image string, res corev1.ResourceRequirements, s *manifest.Service) *appsv1.Deployment {
	replicas := int32(max(s.Replicas, 1))
	labels := map[string]string{LabelApp: name}
	c := container(name, image, res, s.Env, s.Command.Argv())
	if s.Port > 0 {
		c.Ports = []corev1.ContainerPort{{ContainerPort: int32(s.Port), Protocol: corev1.ProtocolTCP}}
		// The readiness af's own Deployments have: the health path when the manifest names
		// one, else the port accepting a connection; as often.
		probe := corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(int32(s.Port))}}
		if s.HealthPath != "" {
			probe = corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: s.HealthPath, Port: intstr.FromInt32(int32(s.Port))}}
		}
		c.ReadinessProbe = &corev1.Probe{ProbeHandler: probe, PeriodSeconds: 1, FailureThreshold: 3, TimeoutSeconds: 1}
	}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       podSpec(c, corev1.RestartPolicyAlways),
			},
		},
	}
}

func service(ns, name string, port int) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{LabelApp: name}},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{LabelApp: name},
			Ports:    []corev1.ServicePort{{Port: int32(port), TargetPort: intstr.FromInt32(int32(port)), Protocol: corev1.ProtocolTCP}},
		},
	}
}

// job is a service's migration: its image, its migrate command, its size; run once, never
// retried.
func job(ns, name, image string, res corev1.ResourceRequirements, s *manifest.Service) *batchv1.Job {
	zero := int32(0)
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: name + "-migrate", Namespace: ns},
		Spec: batchv1.JobSpec{
			BackoffLimit: &zero,
			Template: corev1.PodTemplateSpec{
				Spec: podSpec(container("migrate", image, res, s.Env, s.Migrate.Argv()), corev1.RestartPolicyNever),
			},
		},
	}
}

func container(name, image string, res corev1.ResourceRequirements, env map[string]string, argv []string) corev1.Container {
	c := corev1.Container{Name: name, Image: image, ImagePullPolicy: corev1.PullIfNotPresent, Command: argv, Resources: res}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: env[k]})
	}
	return c
}

func podSpec(c corev1.Container, restart corev1.RestartPolicy) corev1.PodSpec {
	no := false
	return corev1.PodSpec{AutomountServiceAccountToken: &no, EnableServiceLinks: &no, RestartPolicy: restart, Containers: []corev1.Container{c}}
}

// size requests and limits the manifest's figures, as af does; a dimension it does not name is
// in neither.
func size(r *manifest.Resources) (corev1.ResourceRequirements, error) {
	if r == nil {
		return corev1.ResourceRequirements{}, nil
	}
	list := corev1.ResourceList{}
	for name, q := range map[corev1.ResourceName]manifest.Quantity{corev1.ResourceCPU: r.CPU, corev1.ResourceMemory: r.Memory} {
		if q == "" {
			continue
		}
		v, err := q.Value()
		if err != nil {
			return corev1.ResourceRequirements{}, fmt.Errorf("%s: %w", name, err)
		}
		list[name] = v
	}
	if len(list) == 0 {
		return corev1.ResourceRequirements{}, nil
	}
	return corev1.ResourceRequirements{Requests: list, Limits: list.DeepCopy()}, nil
}
