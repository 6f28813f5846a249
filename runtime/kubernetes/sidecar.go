package kubernetes

// The environment's sidecar: its ports, its Service, its configuration Secret and its
// Deployment. af up's step that starts it beside the probe is probestep.go's.

import (
	"context"
	"fmt"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/antifailure/af/failure"
	sidecarconfig "github.com/antifailure/af/sidecar/config"
)

// applySidecar writes the sidecar's Service, configuration and Deployment.
func (r *Runtime) applySidecar(ctx context.Context, t *target, e *env) error {
	svc, err := apply(ctx, t.c, t.c.cs.CoreV1().Services(t.ns), "v1", "Service", SidecarName, e.sidecarService())
	if err != nil {
		return err
	}
	e.SidecarIP = svc.Spec.ClusterIP
	cfg := sidecarconfig.Config{
		Environment:     t.id,
		Namespace:       t.ns,
		ClusterDomain:   r.opts.ClusterDomain,
		Services:        slices.Sorted(maps.Keys(t.m.Services)),
		ClusterResolver: e.Resolver.Addr,
		AdvertiseIPv4:   e.SidecarIP,
		ClusterCIDRs:    clusterStrings(e.Cluster),
		Egress:          t.m.Egress,
	}
	if _, err := cfg.Resolve(); err != nil {
		return failure.New(failure.SidecarConfigInvalid, err.Error(), err)
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("encoding the sidecar configuration: %w", err)
	}
	secret := &corev1.Secret{
		ObjectMeta: meta(SidecarConfigName, t.ns, e.labels(RoleSidecar, "")),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{sidecarConfigFile: data},
	}
	if _, err := apply(ctx, t.c, t.c.cs.CoreV1().Secrets(t.ns), "v1", "Secret", secret.Name, secret); err != nil {
		return err
	}
	d := e.sidecarDeployment(specHash(data))
	if _, err := apply(ctx, t.c, t.c.cs.AppsV1().Deployments(t.ns), "apps/v1", "Deployment", d.Name, d); err != nil {
		return err
	}
	r.progress(ctx).Printf("sidecar %s at %s (image %s): waiting until it is ready; the probe starts beside it", SidecarName, e.SidecarIP, e.EngineImage)
	return nil
}

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
			Resources: e.Ceilings.sidecarResources(),
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
