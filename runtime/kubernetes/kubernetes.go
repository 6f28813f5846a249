// Package kubernetes is af's Kubernetes runtime: one namespace per environment, default-deny
// NetworkPolicies, one egress sidecar that is the only way out and the only resolver, a probe
// that proves the cluster enforces the policies before any application image runs, and the
// services behind the gate. Everything goes through client-go, objects by server-side apply
// with field manager "af", and every wait reports progress and honours cancellation.
package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/antifailure/af/envid"
	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/manifest"
	afruntime "github.com/antifailure/af/runtime"
)

// Name is the runtime's name in the manifest.
const Name = "kubernetes"

// InCluster is the context name af reports when it runs in a pod on its service account.
const InCluster = "in-cluster"

// FieldManager is the server-side apply field manager of every object af writes.
const FieldManager = "af"

// Options configure the runtime.
type Options struct {
	// Kubeconfig is the kubeconfig path list (as KUBECONFIG writes it); empty uses
	// ~/.kube/config.
	Kubeconfig string
	// Context is --context: used when the manifest names no runtime.kubeconfig_context.
	Context string
	// EngineImage is the engine image run as the sidecar, the gate and the probe.
	EngineImage string
	// PublishEngine, when set, is a static Linux af binary (af's own executable) published as
	// the engine image wherever the service images go (runtime.registry, or kind/k3d nodes);
	// EngineImage is then the published reference. With no such target EngineImage is used.
	PublishEngine string
	// Containerd, when set, is the socket of the containerd of the node af runs on: images are
	// imported there (a single-node cluster), whatever the context.
	Containerd string
	// RegistryAuth, when set, are the credentials for runtime.registry (pushing, and the pods'
	// pull secret) instead of the docker config and platform keychains.
	RegistryAuth authn.Authenticator
	// PullAuth, when set, is the credential written into each environment as the pods' image
	// pull secret for runtime.registry, instead of the push credentials.
	PullAuth authn.Authenticator
	// PushOnly keeps the push credentials out of the cluster: without PullAuth no pull secret
	// is written (the action: they may be the job's own token).
	PushOnly bool
	// GateEnv is passed to every gate and to the probe: the AF_GATE_* variables that point
	// their routes at other targets (tests point them at a fake internet).
	GateEnv map[string]string
	// ClusterCIDRs are cluster ranges the operator names (AF_CLUSTER_CIDRS) on top of those af
	// discovers: the sidecar never reaches them, whatever the manifest's rules say.
	ClusterCIDRs []netip.Prefix
	// ClusterDomain is the cluster's DNS domain (default cluster.local).
	ClusterDomain string
	// IPv6 adds the IPv6 half of the sidecar's egress policy and the gate's IPv6 routes.
	IPv6 bool
	// RequireBoundedCredential refuses af up (AF-RUN-056) when the credential may act past
	// af's namespaces (checkCredential); without it af up warns and goes on.
	RequireBoundedCredential bool
	// Resolver is the cluster resolver's Service, namespace/name (default kube-system/kube-dns).
	Resolver string
	// IngressController names the ingress controller's pods, let in to web services when the
	// manifest sets a domain.
	IngressController *IngressController
	// URLScheme is the scheme of preview URLs (default https).
	URLScheme string
	// IngressAddress, when set, is where preview URLs are reached (host:port), whatever their
	// host resolves to: the ingress controller's address, for clusters whose preview domain
	// does not resolve from where af runs (the local test cluster: 127.0.0.1:18080).
	IngressAddress string
	// Watch is how often the environment's probe pod checks every route again after its first
	// contained verdict, for as long as the environment runs (continuous containment): af
	// status and the App read its last verdict. Zero is the default (DefaultWatch); negative
	// turns the watch off, and the probe pod is removed after its verdict as before.
	Watch time.Duration
	// Timeouts; zero uses the defaults.
	SidecarTimeout, ProbeTimeout, MigrationTimeout, ReadyTimeout, DownTimeout time.Duration
	// WriterWait is how long af up waits for another af up of the same environment to finish
	// (writer.go); zero is DefaultWriterWait, negative refuses at once.
	WriterWait time.Duration
	// Progress receives what the runtime is doing.
	Progress afruntime.Progress
	// Now is the clock (tests); nil is time.Now.
	Now func() time.Time

	// negativeControl, when set, is an image with a shell and aftool (the test cluster's test
	// image): af's own containment checks are then off, so that the conformance suite's
	// negative controls measure a cluster by the suite's own attempts alone. The probe is not
	// run, and every gate is replaced by a plain wait for its pod's hold (the order of starts
	// is kept). It is unexported: only this package's tests can set it, never the af binary.
	negativeControl string
}

// DefaultWatch is how often an environment's probe checks again while it runs.
const DefaultWatch = time.Minute

// IngressController locates the ingress controller's pods.
type IngressController struct {
	Namespace string
	Labels    map[string]string
}

// Runtime is the Kubernetes runtime.
type Runtime struct {
	opts Options

	mu      sync.Mutex
	clients map[string]*client
}

var (
	_ afruntime.Runtime  = (*Runtime)(nil)
	_ afruntime.Lister   = (*Runtime)(nil)
	_ afruntime.Watcher  = (*Runtime)(nil)
	_ afruntime.Observer = (*Runtime)(nil)
)

type client struct {
	cs      kubernetes.Interface
	cfg     *rest.Config
	context string
	server  string
}

// New returns the runtime. It does not contact the cluster until it is used.
func New(o Options) *Runtime {
	if o.ClusterDomain == "" {
		o.ClusterDomain = "cluster.local"
	}
	if o.Resolver == "" {
		o.Resolver = "kube-system/kube-dns"
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.SidecarTimeout, 3*time.Minute)
	def(&o.ProbeTimeout, 3*time.Minute)
	if o.Watch == 0 {
		o.Watch = DefaultWatch
	}
	def(&o.MigrationTimeout, 10*time.Minute)
	def(&o.ReadyTimeout, 5*time.Minute)
	def(&o.DownTimeout, 3*time.Minute)
	switch { // negative: no wait at all (AF_WRITER_WAIT=0)
	case o.WriterWait == 0:
		o.WriterWait = DefaultWriterWait
	case o.WriterWait < 0:
		o.WriterWait = 0
	}
	if o.URLScheme == "" {
		o.URLScheme = "https"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Runtime{opts: o, clients: map[string]*client{}}
}

// Name returns "kubernetes".
func (r *Runtime) Name() string { return Name }

// Capabilities of the Kubernetes runtime. The sidecar's log and inbox need a port-forward
// that is not built yet.
func (r *Runtime) Capabilities() afruntime.Capabilities {
	return afruntime.Capabilities{Ingress: true, Replicas: true, Resources: true, Migrations: true, NetLog: true}
}

// API is the clientset of the runtime's cluster (the current or --context context) and a
// function that turns that API's errors into af's, naming the context and the server: for the
// stores the App keeps beside the environments (app/clusterstore).
func (r *Runtime) API(ctx context.Context) (kubernetes.Interface, func(doing string, err error) error, error) {
	c, err := r.connect(ctx, nil)
	if err != nil {
		return nil, nil, err
	}
	return c.cs, func(doing string, err error) error { return apiError(c, doing, err) }, nil
}

// Lister: the runtime finds environments by their namespaces' labels.
func (r *Runtime) Lister() afruntime.Lister { return r }

// Watcher: the runtime reads the watch of each environment's probe pod.
func (r *Runtime) Watcher() afruntime.Watcher { return r }

// Observer: the runtime reaches sidecars and services through port-forwards.
func (r *Runtime) Observer() afruntime.Observer { return r }

// Checker is the runtime itself: af check (check.go).
func (r *Runtime) Checker() afruntime.Checker { return r }

// contextFor picks the kubeconfig context: the manifest's, else --context, else current.
func (r *Runtime) contextFor(m *manifest.Manifest) (name, from string) {
	if m != nil && m.Runtime.KubeconfigContext != "" {
		return m.Runtime.KubeconfigContext, "runtime.kubeconfig_context"
	}
	if r.opts.Context != "" {
		return r.opts.Context, "--context"
	}
	return "", "the kubeconfig's current context"
}

// connect returns a client for the manifest's context, saying which context it uses.
func (r *Runtime) connect(ctx context.Context, m *manifest.Manifest) (*client, error) {
	want, from := r.contextFor(m)
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.clients[want]; ok {
		return c, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if r.opts.Kubeconfig != "" {
		rules.Precedence = filepath.SplitList(r.opts.Kubeconfig)
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: want})
	raw, err := cc.RawConfig()
	if err != nil {
		return nil, failure.New(failure.ClusterUnreachable, "reading the kubeconfig: "+err.Error(), err)
	}
	name := want
	if name == "" {
		name = raw.CurrentContext
	}
	var cfg *rest.Config
	if name == "" && len(raw.Contexts) == 0 && os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		// No kubeconfig at all, inside a pod (the App's Deployment): its service account.
		if cfg, err = rest.InClusterConfig(); err != nil {
			return nil, failure.New(failure.ClusterUnreachable, "reading the pod's service account: "+err.Error(), err)
		}
		name, from = InCluster, "the pod's service account"
	}
	if cfg == nil {
		if name == "" {
			return nil, failure.Newf(failure.ClusterUnreachable, "the kubeconfig (%s) has no current context and none was named", kubeconfigPath(rules)).
				WithHint("Name one with --context or runtime.kubeconfig_context.")
		}
		if _, ok := raw.Contexts[name]; !ok {
			return nil, failure.Newf(failure.ClusterUnreachable, "context %q (from %s) is not in the kubeconfig (%s); it has: %s",
				name, from, kubeconfigPath(rules), strings.Join(slices.Sorted(maps.Keys(raw.Contexts)), ", "))
		}
		if cfg, err = cc.ClientConfig(); err != nil {
			return nil, failure.New(failure.ClusterUnreachable, fmt.Sprintf("context %q: %v", name, err), err)
		}
	}
	cfg.UserAgent = "af"
	cfg.QPS, cfg.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, failure.New(failure.ClusterUnreachable, fmt.Sprintf("context %q: %v", name, err), err)
	}
	r.progress(ctx).Printf("using kubeconfig context %q (from %s), API server %s", name, from, cfg.Host)
	c := &client{cs: cs, cfg: cfg, context: name, server: cfg.Host}
	if _, err := cs.Discovery().ServerVersion(); err != nil {
		// A refusal here is of the credentials themselves, not of one permission.
		if apierrors.IsForbidden(err) {
			return nil, credentialsRefused(c, "reaching the API server", err)
		}
		return nil, apiError(c, "reaching the API server", err)
	}
	r.clients[want] = c
	return c, nil
}

func kubeconfigPath(rules *clientcmd.ClientConfigLoadingRules) string {
	if rules.ExplicitPath != "" {
		return rules.ExplicitPath
	}
	return strings.Join(rules.Precedence, ":")
}

// apiError turns a failed API call into the catalogue's words: unreachable or refused
// credentials are AF-RUN-002; anything else is wrapped with what af was doing.
func apiError(c *client, doing string, err error) error {
	if err == nil {
		return nil
	}
	if failure.As(err) != nil {
		return err
	}
	var uerr *url.Error
	var nerr net.Error
	switch {
	case apierrors.IsUnauthorized(err):
		return credentialsRefused(c, doing, err)
	case errors.As(err, &uerr), errors.As(err, &nerr):
		return failure.New(failure.ClusterUnreachable, fmt.Sprintf("%s (context %q, %s): %v", doing, c.context, c.server, err), err)
	case apierrors.IsForbidden(err):
		return failure.New(failure.ClusterUnreachable, fmt.Sprintf("%s: the identity of context %q may not do this: %v", doing, c.context, err), err).
			WithHint("af needs to create namespaces and, inside them, NetworkPolicies, Secrets, Services, Deployments, Jobs and Pods, and to read pod logs.")
	}
	return fmt.Errorf("%s: %w", doing, err)
}

func credentialsRefused(c *client, doing string, err error) error {
	return failure.New(failure.ClusterUnreachable, fmt.Sprintf("%s (context %q, %s): the server refused the credentials: %v", doing, c.context, c.server, err), err)
}

// interrupted turns a cancelled context into AF-RUN-007 naming what was being done.
func interrupted(ctx context.Context, doing string, err error) error {
	if err != nil && ctx.Err() != nil {
		e := failure.New(failure.Interrupted, "interrupted while "+doing, err)
		e.Status = 130 // the shell's convention for a process ended by SIGINT
		return e
	}
	return err
}

// target is an environment resolved to its namespace.
type target struct {
	id, ns string
	m      *manifest.Manifest
	c      *client
}

func (r *Runtime) resolve(ctx context.Context, ref afruntime.Ref) (*target, error) {
	if ref.ID == "" {
		return nil, failure.Newf(failure.NameInvalid, "no environment id given")
	}
	if ref.Manifest == nil && ref.Namespace != "" {
		ref.Manifest = &manifest.Manifest{} // found by its labels: the default context is enough
	}
	if ref.Manifest == nil {
		return nil, failure.Newf(failure.UsageInvalid, "no manifest given for environment %q", ref.ID)
	}
	if p := ref.Manifest.Runtime.Provider; p != "" && p != Name {
		return nil, failure.Newf(failure.RuntimeCannot, "the manifest asks for the %q runtime, this is the %s runtime", p, Name)
	}
	ns := ref.Namespace
	if ns == "" {
		var err error
		if ns, err = envid.Namespace(ref.Manifest.Runtime.NamespacePrefix, ref.ID); err != nil {
			return nil, err
		}
	} else if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return nil, failure.Newf(failure.NameInvalid, "namespace %q: %s", ns, strings.Join(errs, "; "))
	}
	c, err := r.connect(ctx, ref.Manifest)
	if err != nil {
		return nil, err
	}
	return &target{id: ref.ID, ns: ns, m: ref.Manifest, c: c}, nil
}

// owned reports whether the namespace is af's and this repository's, as an error when not.
// ownNamespace fails unless t's namespace exists and is the environment's own: made by af
// (the managed label) for ref's repository.
func ownNamespace(ctx context.Context, t *target, ref afruntime.Ref) error {
	ns, err := t.c.cs.CoreV1().Namespaces().Get(ctx, t.ns, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return failure.Newf(failure.NotPlaced, "environment %s is not up: namespace %s does not exist", ref.ID, t.ns).
			WithHint("Bring it up with `af up` first.")
	}
	if err != nil {
		return apiError(t.c, "reading namespace "+t.ns, err)
	}
	return owned(&ns.ObjectMeta, ref.Repository)
}

func owned(ns *metav1.ObjectMeta, repository string) error {
	if ns.Labels[LabelManaged] != "true" {
		return failure.Newf(failure.NamespaceNotOurs, "namespace %q exists without the label %s=true; af did not create it and left it untouched", ns.Name, LabelManaged)
	}
	if have := ns.Annotations[AnnotationRepository]; repository != "" && have != "" && !strings.EqualFold(have, repository) {
		return failure.New(failure.NamespaceNotOurs, fmt.Sprintf("namespace %q belongs to an environment of repository %s, not %s; af left it untouched", ns.Name, have, repository), afruntime.ErrOtherRepository).
			WithHint("Two repositories with the same name share environment ids under one namespace prefix: the action names a pull request's environment with its owner then (<owner>-<name>-pr-<n>); with af up, name it (--env) or give one of them another runtime.namespace_prefix.")
	}
	return nil
}

// repoLabel makes OWNER/NAME into a label value (the exact form is in an annotation).
func repoLabel(repo string) string {
	v := strings.ToLower(strings.NewReplacer("/", ".").Replace(repo))
	var b strings.Builder
	for _, r := range v {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_' {
			b.WriteRune(r)
		}
	}
	v = b.String()
	if len(v) > 63 {
		v = v[:63]
	}
	return strings.Trim(v, "-._")
}

// progress is where this call reports: the Progress its context carries
// (afruntime.WithProgress), else Options.Progress.
func (r *Runtime) progress(ctx context.Context) afruntime.Progress {
	return afruntime.ProgressFrom(ctx, r.opts.Progress)
}

func joinSorted(s []string) string {
	sort.Strings(s)
	return strings.Join(s, ", ")
}
