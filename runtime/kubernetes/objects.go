package kubernetes

// What every object of an environment is made from (env), and the labels, annotations and
// names af writes on them. The objects themselves are made beside what writes them: the
// policies (policies.go), the sidecar (sidecar.go), the workloads (workloads.go), the probe
// (probe.go), the Ingresses (ingress.go).

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	// AnnotationWatch, on the probe pod, is how often it checks again (a Go duration) once
	// its first verdict was contained: it stays, and is the environment's watch.
	AnnotationWatch      = "dev.antifailure/watch"
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
	// Ceilings are the manifest's limits: the quota, the limit range and the sidecar's CPU
	// limit are made from them (quota.go).
	Ceilings ceilings
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

// specHash is a digest of an object's JSON form: equal specs, equal hashes.
func specHash(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("hashing a spec: %v", err)) // af's own types always marshal
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
