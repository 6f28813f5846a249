package kubernetes

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/antifailure/af/manifest"
)

// Labels and annotations af writes. The managed label is the one af trusts: a namespace
// without it was not made by af and is never used or deleted.
const (
	LabelManaged     = "dev.antifailure.managed"
	LabelEnvironment = "dev.antifailure.environment"
	LabelRepository  = "dev.antifailure.repository"
	LabelPullRequest = "dev.antifailure.pull-request"
	LabelExpires     = "dev.antifailure.expires"
	LabelRole        = "dev.antifailure.role"
	LabelService     = "dev.antifailure.service"
	// LabelWorkload tells a service's own pods from its migration's and the probe's, which
	// share its role (and so its policies) but must never be selected as its instances.
	LabelWorkload  = "dev.antifailure.workload"
	LabelManagedBy = "app.kubernetes.io/managed-by"

	AnnotationRepository = "dev.antifailure/repository"
	AnnotationExpiresAt  = "dev.antifailure/expires-at"
	AnnotationProbe      = "dev.antifailure/probe"
	AnnotationConfigHash = "dev.antifailure/config-hash"
	AnnotationSpecHash   = "dev.antifailure/spec-hash"
)

// Pod roles. Services, migrations and the probe share RoleService: they run under exactly the
// same policies.
const (
	RoleService = "service"
	RoleSidecar = "sidecar"
)

// Workloads.
const (
	WorkloadService   = "service"
	WorkloadMigration = "migration"
	WorkloadProbe     = "probe"
)

// Names of af's own objects in an environment's namespace. Service names cannot start with
// "af-" (the manifest refuses it), so these never clash with a service.
const (
	SidecarName       = "af-sidecar"
	SidecarConfigName = "af-sidecar-config"
	DatabaseSecret    = "af-database"
	RegistrySecret    = "af-registry"
	ProbeName         = "af-probe"
	GateContainer     = "af-gate"
	PolicyDenyAll     = "af-deny-all"
	PolicyServices    = "af-services"
	PolicySidecarIn   = "af-sidecar-ingress"
	PolicySidecarOut  = "af-sidecar-egress"
	PolicyIngressCtl  = "af-ingress-controller"
	sidecarConfigFile = "sidecar.yaml"
	sidecarConfigDir  = "/etc/af"
	engineUser        = 65532
	pingGroup         = "65532 65532"
)

// SidecarPort is one port the sidecar serves to the environment's pods.
type SidecarPort struct {
	Name     string
	Port     int32
	Protocol corev1.Protocol
}

// SidecarPorts are every port services may reach the sidecar on: the explicit proxy, DNS over
// UDP and TCP, the transparent HTTP and TLS ports external names resolve to, and SMTP capture.
// A port missing here makes a client hang instead of fail, so the policies, the Service and
// the sidecar's configuration are all made from this one list. The control port (9901) is not
// in it: services cannot reach it.
var SidecarPorts = []SidecarPort{
	{"proxy", 3128, corev1.ProtocolTCP},
	{"dns", 53, corev1.ProtocolUDP},
	{"dns-tcp", 53, corev1.ProtocolTCP},
	{"http", 80, corev1.ProtocolTCP},
	{"https", 443, corev1.ProtocolTCP},
	{"smtp", 25, corev1.ProtocolTCP},
	{"submission", 587, corev1.ProtocolTCP},
}

const sidecarControlPort = 9901

// privateV4 are the ranges the sidecar's egress policy excludes besides link-local.
var privateV4 = []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"}

// privateV6: unique local, link-local, and the IPv4-mapped range.
var privateV6 = []string{"fc00::/7", "fe80::/10", "::ffff:0:0/96"}

// env is what the objects of one environment are made from.
type env struct {
	ID          string
	Namespace   string
	Manifest    *manifest.Manifest
	Images      map[string]string
	EngineImage string
	SidecarIP   string // the sidecar Service's ClusterIP
	GateEnv     map[string]string
	Domain      string // cluster DNS domain, cluster.local
	IPv6        bool
	Resolver    resolverRef
	IngressFrom *IngressController
	HasDatabase bool
	// Cluster are the cluster's own ranges: the sidecar's egress never reaches them.
	Cluster []netip.Prefix
	// PullSecret names the image pull secret every pod gets, when the registry needs one.
	PullSecret string
	// Holds are the hold addresses (ClusterIP:port) of the workloads that have one, by
	// holdName; a pod of a workload with none starts once its gate passes.
	Holds map[string]string
	// timeline records af up's phases (nil outside af up).
	timeline *timeline
	// negativeControl: Options.negativeControl (tests only).
	negativeControl string
}

// pullSecrets is the pods' image pull secret list.
func (e *env) pullSecrets() []corev1.LocalObjectReference {
	if e.PullSecret == "" {
		return nil
	}
	return []corev1.LocalObjectReference{{Name: e.PullSecret}}
}

// resolverRef is the cluster resolver the sidecar may ask: its Service address and the pods
// behind it, for the sidecar's egress policy.
type resolverRef struct {
	Addr      string // host:port
	Namespace string
	Selector  map[string]string
}

func (e *env) labels(role, service string) map[string]string {
	l := map[string]string{
		LabelManagedBy:   "af",
		LabelEnvironment: e.ID,
		LabelRole:        role,
	}
	if service != "" {
		l[LabelService] = service
	}
	return l
}

func meta(name, ns string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}
}

func roleSelector(role string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{LabelRole: role}}
}

// policies returns the environment's NetworkPolicies, deny-all first.
func (e *env) policies() []*networkingv1.NetworkPolicy {
	both := []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
	var sidecarPorts []networkingv1.NetworkPolicyPort
	for _, p := range SidecarPorts {
		sidecarPorts = append(sidecarPorts, npPort(p.Protocol, p.Port))
	}
	services := metav1.LabelSelector{MatchLabels: map[string]string{LabelRole: RoleService}}
	sidecar := metav1.LabelSelector{MatchLabels: map[string]string{LabelRole: RoleSidecar}}

	out := []*networkingv1.NetworkPolicy{
		{
			ObjectMeta: meta(PolicyDenyAll, e.Namespace, e.labels("policy", "")),
			Spec:       networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{}, PolicyTypes: both},
		},
		{
			// Services reach the sidecar on its ports, and each other; they accept only from
			// each other. Pod selectors only: a namespace selector would open the environment
			// to other namespaces.
			ObjectMeta: meta(PolicyServices, e.Namespace, e.labels("policy", "")),
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: services,
				PolicyTypes: both,
				Egress: []networkingv1.NetworkPolicyEgressRule{
					{To: []networkingv1.NetworkPolicyPeer{{PodSelector: &sidecar}}, Ports: sidecarPorts},
					{To: []networkingv1.NetworkPolicyPeer{{PodSelector: &services}}},
				},
				Ingress: []networkingv1.NetworkPolicyIngressRule{
					{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &services}}},
				},
			},
		},
		{
			ObjectMeta: meta(PolicySidecarIn, e.Namespace, e.labels("policy", "")),
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: sidecar,
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress: []networkingv1.NetworkPolicyIngressRule{
					{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &services}}, Ports: sidecarPorts},
				},
			},
		},
		e.sidecarEgress(),
	}
	if e.IngressFrom != nil {
		var ports []networkingv1.NetworkPolicyPort
		for _, name := range sortedKeys(e.Manifest.Services) {
			s := e.Manifest.Services[name]
			if manifest.KindOf(s) == "web" && s.Port > 0 {
				ports = append(ports, npPort(corev1.ProtocolTCP, int32(s.Port)))
			}
		}
		out = append(out, &networkingv1.NetworkPolicy{
			ObjectMeta: meta(PolicyIngressCtl, e.Namespace, e.labels("policy", "")),
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelRole: RoleService, "dev.antifailure.kind": "web"}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From: []networkingv1.NetworkPolicyPeer{{
						NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": e.IngressFrom.Namespace}},
						PodSelector:       &metav1.LabelSelector{MatchLabels: e.IngressFrom.Labels},
					}},
					Ports: ports,
				}},
			},
		})
	}
	return out
}

// sidecarEgress lets the sidecar out to public addresses, to the cluster resolver on 53, and
// to the private ranges the manifest's cidr allow rules name (a database the environment must
// reach), and nowhere else: never link-local (metadata), never the other private ranges.
func (e *env) sidecarEgress() *networkingv1.NetworkPolicy {
	rules := []networkingv1.NetworkPolicyEgressRule{
		{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: append(append([]string(nil), privateV4...), outsidePrivate(e.Cluster, privateV4, true)...)}}}},
	}
	if e.IPv6 {
		rules = append(rules, networkingv1.NetworkPolicyEgressRule{
			To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "::/0", Except: append(append([]string(nil), privateV6...), outsidePrivate(e.Cluster, privateV6, false)...)}}},
		})
	}
	rules = append(rules, networkingv1.NetworkPolicyEgressRule{
		To: []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": e.Resolver.Namespace}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: e.Resolver.Selector},
		}},
		Ports: []networkingv1.NetworkPolicyPort{npPort(corev1.ProtocolUDP, 53), npPort(corev1.ProtocolTCP, 53)},
	})
	for _, r := range e.Manifest.Egress.Rules {
		if r.CIDR == "" || r.Mode != "allow" {
			continue
		}
		// The rule's range less the cluster's own: a cidr rule never opens the cluster.
		cidr, except, ok := ruleBlock(r.CIDR, e.Cluster)
		if !ok {
			continue
		}
		rule := networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: cidr, Except: except}}}}
		for _, p := range r.Ports {
			rule.Ports = append(rule.Ports, npPort(corev1.ProtocolTCP, int32(p)))
		}
		rules = append(rules, rule)
	}
	types := []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	return &networkingv1.NetworkPolicy{
		ObjectMeta: meta(PolicySidecarOut, e.Namespace, e.labels("policy", "")),
		Spec:       networkingv1.NetworkPolicySpec{PodSelector: *roleSelector(RoleSidecar), PolicyTypes: types, Egress: rules},
	}
}

func npPort(proto corev1.Protocol, port int32) networkingv1.NetworkPolicyPort {
	p := intstr.FromInt32(port)
	return networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &p}
}

// sidecarService is the sidecar's Service: its ClusterIP is every pod's resolver and proxy,
// and the address every external name resolves to.
func (e *env) sidecarService() *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: meta(SidecarName, e.Namespace, e.labels(RoleSidecar, "")),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{LabelRole: RoleSidecar, LabelEnvironment: e.ID},
		},
	}
	for _, p := range SidecarPorts {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: p.Name, Port: p.Port, Protocol: p.Protocol, TargetPort: intstr.FromInt32(p.Port)})
	}
	return svc
}

// sidecarDeployment runs exactly one sidecar, whatever the services ask, replaced (never
// doubled) when its configuration changes.
func (e *env) sidecarDeployment(configHash string) *appsv1.Deployment {
	one := int32(1)
	labels := e.labels(RoleSidecar, "")
	yes, no := true, false
	user := int64(engineUser)
	pod := corev1.PodSpec{
		AutomountServiceAccountToken: &no,
		EnableServiceLinks:           &no,
		ImagePullSecrets:             e.pullSecrets(),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot: &yes, RunAsUser: &user, RunAsGroup: &user,
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			// The sidecar serves DNS, HTTP, TLS and SMTP on their own ports as a non-root
			// user: a namespaced, "safe" sysctl lets it bind them.
			Sysctls: []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"}},
		},
		Containers: []corev1.Container{{
			Name:            "sidecar",
			Image:           e.EngineImage,
			ImagePullPolicy: corev1.PullIfNotPresent,
			Args:            []string{"sidecar", "--config", sidecarConfigDir + "/" + sidecarConfigFile},
			SecurityContext: &corev1.SecurityContext{
				RunAsNonRoot:             &yes,
				ReadOnlyRootFilesystem:   &yes,
				AllowPrivilegeEscalation: &no,
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_BIND_SERVICE"}},
			},
			VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: sidecarConfigDir, ReadOnly: true}},
			ReadinessProbe: &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(sidecarControlPort)}},
				PeriodSeconds: 1, FailureThreshold: 3,
			},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
			},
		}},
		Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: SidecarConfigName}}}},
	}
	for _, p := range SidecarPorts {
		pod.Containers[0].Ports = append(pod.Containers[0].Ports, corev1.ContainerPort{Name: p.Name, ContainerPort: p.Port, Protocol: p.Protocol})
	}
	return &appsv1.Deployment{
		ObjectMeta: meta(SidecarName, e.Namespace, labels),
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelRole: RoleSidecar, LabelEnvironment: e.ID}},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{AnnotationConfigHash: configHash}},
				Spec:       pod,
			},
		},
	}
}

// proxyURL is the explicit proxy every service is told about.
func (e *env) proxyURL() string { return "http://" + e.sidecarProxy() }

// sidecarProxy is the sidecar's proxy address, host:port.
func (e *env) sidecarProxy() string { return net.JoinHostPort(e.SidecarIP, "3128") }

// noProxy lists what clients reach directly: the environment's own services, by every name
// they may be called.
func (e *env) noProxy() string {
	names := []string{"localhost", "127.0.0.1", "::1"}
	for _, s := range sortedKeys(e.Manifest.Services) {
		names = append(names, s)
	}
	names = append(names, "."+e.Namespace, "."+e.Namespace+".svc", "."+e.Namespace+".svc."+e.Domain)
	return strings.Join(names, ",")
}

// dnsConfig sends every query to the sidecar, with the namespace's search list and ndots 1, so
// a name with a dot is asked as it is first (no cluster suffix tried before an external name).
func (e *env) dnsConfig() *corev1.PodDNSConfig {
	one := "1"
	return &corev1.PodDNSConfig{
		Nameservers: []string{e.SidecarIP},
		Searches:    []string{e.Namespace + ".svc." + e.Domain, "svc." + e.Domain, e.Domain},
		Options:     []corev1.PodDNSConfigOption{{Name: "ndots", Value: &one}},
	}
}

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
	// The node route: the node's own address, from the downward API. Not configurable from
	// af's environment: it is wherever the pod runs.
	vars = append(vars, corev1.EnvVar{Name: "AF_GATE_NODE", ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIP"},
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
	for _, k := range sortedKeys(s.Env) {
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

// probePod runs `af probe` under exactly the labels and policies a service gets.
func (e *env) probePod() *corev1.Pod {
	s := &manifest.Service{}
	spec := e.podSpec(ProbeName, s, nil, corev1.RestartPolicyNever, "")
	// The probe is the gate's check run as the pod's only container: no application image,
	// and no hold.
	probe := e.gate(corev1.ResourceRequirements{}, "")
	probe.Name = "probe"
	probe.Args = []string{"probe"}
	spec.InitContainers = nil
	spec.Containers = []corev1.Container{probe}
	grace := int64(1)
	spec.TerminationGracePeriodSeconds = &grace
	labels := e.labels(RoleService, ProbeName)
	labels[LabelWorkload] = WorkloadProbe
	return &corev1.Pod{
		ObjectMeta: meta(ProbeName, e.Namespace, labels),
		Spec:       spec,
	}
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

// specHash is a digest of an object's JSON form: equal specs, equal hashes.
// ingress publishes a web service at its preview host.
func (e *env) ingress(name string, s *manifest.Service, host string) *networkingv1.Ingress {
	prefix := networkingv1.PathTypePrefix
	ing := &networkingv1.Ingress{
		ObjectMeta: meta(name, e.Namespace, e.labels(RoleService, name)),
		Spec: networkingv1.IngressSpec{
			Rules: []networkingv1.IngressRule{{
				Host: host,
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{{
						Path: "/", PathType: &prefix,
						Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
							Name: name, Port: networkingv1.ServiceBackendPort{Number: int32(s.Port)},
						}},
					}},
				}},
			}},
		},
	}
	if c := e.Manifest.Runtime.IngressClass; c != "" {
		ing.Spec.IngressClassName = &c
	}
	return ing
}

// instanceSelector selects a service's instances, and not its migration or the probe.
func instanceSelector(name string) map[string]string {
	return map[string]string{LabelRole: RoleService, LabelService: name, LabelWorkload: WorkloadService}
}

func specHash(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("hashing a spec: %v", err)) // af's own types always marshal
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
