package kubernetes

// The pods that run customer code: every service's Deployment and Service, every migration's
// Job, each pod with the gate first and DNS and the proxy through the sidecar.

import (
	"context"
	"maps"
	"net"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/antifailure/af/manifest"
)

// proxyURL is the explicit proxy every service is told about.
func (e *env) proxyURL() string { return "http://" + e.sidecarProxy() }

// sidecarProxy is the sidecar's proxy address, host:port.
func (e *env) sidecarProxy() string { return net.JoinHostPort(e.SidecarIP, "3128") }

// noProxy lists what clients reach directly: the environment's own services, by every name
// they may be called.
func (e *env) noProxy() string {
	names := []string{"localhost", "127.0.0.1", "::1"}
	for _, s := range slices.Sorted(maps.Keys(e.Manifest.Services)) {
		names = append(names, s)
	}
	names = append(names, "."+e.Namespace, "."+e.Namespace+".svc", "."+e.Namespace+".svc."+e.Domain)
	return strings.Join(names, ",")
}

// dnsConfig sends every query to the sidecar, with the namespace's search list and ndots 1, so
// a name with a dot is asked as it is first (no cluster suffix tried before an external name).
// A query unanswered after a second is sent again, up to five times (DNSTimeout, DNSAttempts):
// the sidecar is in the namespace and answers external names from memory, so silence means a
// lost datagram, not a slow server. An enforcer that decides new flows in userspace drops first
// packets while its queue overflows (kube-network-policies: 232 dropped in four seconds under a
// burst of gated starts on two loaded cores), and each lost query would otherwise cost the
// resolver's default of five seconds, past many clients' own deadlines.
func (e *env) dnsConfig() *corev1.PodDNSConfig {
	one, timeout, attempts := "1", DNSTimeout, DNSAttempts
	return &corev1.PodDNSConfig{
		Nameservers: []string{e.SidecarIP},
		Searches:    []string{e.Namespace + ".svc." + e.Domain, "svc." + e.Domain, e.Domain},
		Options: []corev1.PodDNSConfigOption{
			{Name: "ndots", Value: &one},
			{Name: "timeout", Value: &timeout},
			{Name: "attempts", Value: &attempts},
		},
	}
}

// The resolver options of every pod that runs customer code (resolv.conf's timeout and
// attempts; see dnsConfig).
const (
	DNSTimeout  = "1"
	DNSAttempts = "5"
)

// size turns a manifest size into requests and limits with the same figures; a dimension the
// manifest does not name is in neither map.
func size(r *manifest.Resources) corev1.ResourceRequirements {
	if r == nil {
		return corev1.ResourceRequirements{}
	}
	list := corev1.ResourceList{}
	if r.CPU != "" {
		list[corev1.ResourceCPU] = resource.MustParse(string(r.CPU))
	}
	if r.Memory != "" {
		list[corev1.ResourceMemory] = resource.MustParse(string(r.Memory))
	}
	if len(list) == 0 {
		return corev1.ResourceRequirements{}
	}
	return corev1.ResourceRequirements{Requests: list, Limits: list.DeepCopy()}
}

// gate is the trusted init container: the engine image, never the application's, with the
// application's size so the pod keeps its QoS class.
func (e *env) gate(res corev1.ResourceRequirements, hold string) corev1.Container {
	yes, no := true, false
	user := int64(engineUser)
	c := corev1.Container{
		Name:            GateContainer,
		Image:           e.EngineImage,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Args:            []string{"gate"},
		Env:             e.gateEnv(hold),
		Resources:       res,
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot: &yes, RunAsUser: &user, RunAsGroup: &user,
			ReadOnlyRootFilesystem:   &yes,
			AllowPrivilegeEscalation: &no,
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
	if e.negativeControl != "" {
		// Tests only (Options.negativeControl): no containment check, only the hold.
		c.Image, c.Command = e.negativeControl, []string{"sh", "-c",
			`echo 'negative control: no containment check'; [ -z "$AF_GATE_HOLD" ] || until aftool connect -timeout 1s "$AF_GATE_HOLD" >/dev/null 2>&1; do sleep 0.1; done`}
		c.Args = nil
	}
	return c
}

func (e *env) gateEnv(hold string) []corev1.EnvVar {
	vars := []corev1.EnvVar{{Name: "AF_SIDECAR", Value: e.sidecarProxy()}}
	if hold != "" {
		vars = append(vars, corev1.EnvVar{Name: "AF_GATE_HOLD", Value: hold})
	}
	keys := make([]string, 0, len(e.GateEnv))
	for k := range e.GateEnv {
		if k != "AF_GATE_NODE" && k != "AF_SIDECAR" && k != "AF_GATE_HOLD" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		vars = append(vars, corev1.EnvVar{Name: k, Value: e.GateEnv[k]})
	}
	// The node routes: the node's own addresses (one per family on a dual-stack node), from
	// the downward API. Not configurable from af's environment: it is wherever the pod runs.
	vars = append(vars, corev1.EnvVar{Name: "AF_GATE_NODE", ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIPs"},
	}})
	return vars
}

// podSpec is the spec every customer-code pod gets: no token, DNS only through the sidecar,
// the proxy variables, the gate first, held by the hold named (when the workload has one).
func (e *env) podSpec(name string, s *manifest.Service, argv []string, restart corev1.RestartPolicy, hold string) corev1.PodSpec {
	no := false
	res := size(s.Resources)
	c := corev1.Container{
		Name:            name,
		Image:           e.Images[name],
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         argv,
		Env:             e.serviceEnv(s),
		Resources:       res,
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: &no,
			// Raw sockets are not needed by services and only help to forge packets.
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"NET_RAW"}},
		},
	}
	if s.Port > 0 {
		c.Ports = []corev1.ContainerPort{{Name: "service", ContainerPort: int32(s.Port), Protocol: corev1.ProtocolTCP}}
	}
	return corev1.PodSpec{
		AutomountServiceAccountToken: &no,
		EnableServiceLinks:           &no,
		ImagePullSecrets:             e.pullSecrets(),
		RestartPolicy:                restart,
		DNSPolicy:                    corev1.DNSNone,
		DNSConfig:                    e.dnsConfig(),
		SecurityContext: &corev1.PodSecurityContext{
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			// The gate (group 65532, no capabilities) may open an unprivileged ICMP socket to
			// send its all-nodes echo over IPv6: a namespaced, "safe" sysctl, for that group
			// only.
			Sysctls: []corev1.Sysctl{{Name: "net.ipv4.ping_group_range", Value: pingGroup}},
		},
		InitContainers: []corev1.Container{e.gate(res, e.holdAddr(hold))},
		Containers:     []corev1.Container{c},
	}
}

// holdAddr is the address of the hold named ("" for none). The probe's pod, written while
// the holds are (writeWorkloads runs beside it), names none and so never reads them.
func (e *env) holdAddr(hold string) string {
	if hold == "" {
		return ""
	}
	return e.Holds[hold]
}

// proxyVars are the variables af sets; the manifest cannot set them.
var proxyVars = []string{"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"}

func (e *env) serviceEnv(s *manifest.Service) []corev1.EnvVar {
	var vars []corev1.EnvVar
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		vars = append(vars, corev1.EnvVar{Name: k, Value: s.Env[k]})
	}
	if e.HasDatabase {
		vars = append(vars, corev1.EnvVar{Name: e.Manifest.Database.EnvName, ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: DatabaseSecret}, Key: "url"},
		}})
	}
	proxy, noProxy := e.proxyURL(), e.noProxy()
	for _, k := range proxyVars {
		v := proxy
		if strings.EqualFold(k, "NO_PROXY") {
			v = noProxy
		}
		vars = append(vars, corev1.EnvVar{Name: k, Value: v})
	}
	vars = append(vars, corev1.EnvVar{Name: "AF_ENVIRONMENT", Value: e.ID})
	return vars
}

// migrationJob runs a service's migrate command once, gated, never retried.
func (e *env) migrationJob(name string, s *manifest.Service) *batchv1.Job {
	zero := int32(0)
	spec := e.podSpec(name, s, s.Migrate.Argv(), corev1.RestartPolicyNever, migrationHold(name))
	labels := e.labels(RoleService, name)
	labels[LabelWorkload] = WorkloadMigration
	h := specHash(spec)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: jobName(name, h), Namespace: e.Namespace, Labels: labels,
			Annotations: map[string]string{AnnotationSpecHash: h},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit: &zero,
			Template:     corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
}

func jobName(service, hash string) string {
	n := service + "-migrate-" + hash[:8]
	if len(n) > 63 {
		n = n[len(n)-63:]
		n = strings.TrimLeft(n, "-")
	}
	return n
}

// deployment runs a service's instances.
func (e *env) deployment(name string, s *manifest.Service) *appsv1.Deployment {
	replicas := int32(max(s.Replicas, 1))
	labels := e.labels(RoleService, name)
	labels["dev.antifailure.kind"] = manifest.KindOf(s)
	labels[LabelWorkload] = WorkloadService
	spec := e.podSpec(name, s, s.Command.Argv(), corev1.RestartPolicyAlways, serviceHold(name))
	c := &spec.Containers[0]
	switch {
	case s.Port > 0 && s.HealthPath != "":
		c.ReadinessProbe = &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: s.HealthPath, Port: intstr.FromInt32(int32(s.Port))}},
			PeriodSeconds: 1, FailureThreshold: 3, TimeoutSeconds: 1,
		}
	case s.Port > 0:
		c.ReadinessProbe = &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(int32(s.Port))}},
			PeriodSeconds: 1, FailureThreshold: 3, TimeoutSeconds: 1,
		}
	}
	return &appsv1.Deployment{
		ObjectMeta: meta(name, e.Namespace, labels),
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: instanceSelector(name)},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
}

// service is a service's in-environment address, when it listens.
func (e *env) service(name string, s *manifest.Service) *corev1.Service {
	if s.Port == 0 {
		return nil
	}
	return &corev1.Service{
		ObjectMeta: meta(name, e.Namespace, e.labels(RoleService, name)),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: instanceSelector(name),
			Ports:    []corev1.ServicePort{{Name: "service", Port: int32(s.Port), TargetPort: intstr.FromInt32(int32(s.Port)), Protocol: corev1.ProtocolTCP}},
		},
	}
}

// instanceSelector selects a service's instances, and not its migration or the probe.
func instanceSelector(name string) map[string]string {
	return map[string]string{LabelRole: RoleService, LabelService: name, LabelWorkload: WorkloadService}
}

// databaseSecret writes the database URL (read from af's environment, database.url_from) as
// the Secret af-database, which every workload's DATABASE_URL refers to; nothing without one.
func (r *Runtime) databaseSecret(ctx context.Context, t *target, e *env, dbURL string) error {
	if dbURL == "" {
		return nil
	}
	db := &corev1.Secret{
		ObjectMeta: meta(DatabaseSecret, t.ns, e.labels("database", "")),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"url": []byte(dbURL)},
	}
	_, err := apply(ctx, t.c, t.c.cs.CoreV1().Secrets(t.ns), "v1", "Secret", db.Name, db)
	return err
}
