// Package settings is af's environment: one table of every variable af reads (its name, what it
// means, its default), and the functions that turn them into runtime and build options. The
// CLI, the GitHub Action and the App read their settings here and nowhere else; docs/settings.md
// is generated from the table (make generate).
package settings

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/antifailure/af/app/clusterstore"
	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/github/api"
	"github.com/antifailure/af/images"
	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/runtime/kubernetes"
	"github.com/antifailure/af/version"
)

// Var is one variable af reads.
type Var struct {
	Name    string
	Meaning string
	Default string
	// Gate variables are passed on to every gate and probe of an environment.
	Gate bool
}

// Vars is every variable, in the order the docs list them.
var Vars = []Var{
	{Name: "KUBECONFIG", Meaning: "the kubeconfig path list", Default: "~/.kube/config"},
	{Name: version.EngineImageVar, Meaning: "the engine image run as the sidecar, the gate and the probe", Default: "this build's own: the released " + version.EngineRepository + ":<source digest>, pulled by the cluster; with a registry, af publishes its own binary as it where the service images go"},
	{Name: version.EngineImageVarAlias, Meaning: "the old name of " + version.EngineImageVar + ", read when it is not set", Default: ""},
	{Name: "AF_REGISTRY_USERNAME", Meaning: "the user for runtime.registry (pushes and the pods' pull secret); with AF_REGISTRY_PASSWORD", Default: "the docker config and platform keychains"},
	{Name: "AF_REGISTRY_PASSWORD", Meaning: "the password or token for runtime.registry; with AF_REGISTRY_USERNAME", Default: ""},
	{Name: "AF_CONTAINERD_ADDRESS", Meaning: "the socket of the containerd of the node af runs on: images are imported there (ctr images import), whatever the context", Default: "none: a registry, or kind/k3d import"},
	{Name: "DOCKER_HOST", Meaning: "the container daemon that builds build: services", Default: "the docker CLI's default"},
	{Name: "AF_GITHUB_RATE_WAIT", Meaning: "the longest the action and the App wait out GitHub's rate limits in all, before giving up with AF-GH-004", Default: "5m"},
	{Name: "AF_GITHUB_API_URL", Meaning: "the GitHub REST API the App and af reap talk to (https://HOST/api/v3 for GitHub Enterprise Server); GITHUB_API_URL is read when it is not set", Default: "https://api.github.com"},
	{Name: "AF_GITHUB_TOKEN", Meaning: "the token af reap asks GitHub with when no App is configured (GITHUB_TOKEN is read when it is not set)", Default: ""},
	{Name: "AF_APP_ID", Meaning: "the GitHub App's id (af app serve, af reap)", Default: ""},
	{Name: "AF_APP_PRIVATE_KEY_FILE", Meaning: "the GitHub App's private key, the .pem file GitHub issued", Default: ""},
	{Name: "AF_APP_WEBHOOK_SECRET", Meaning: "the App's webhook secret; af app serve refuses to start without one", Default: ""},
	{Name: "AF_APP_WEBHOOK_SECRET_FILE", Meaning: "a file holding the webhook secret (a mounted Secret), read when AF_APP_WEBHOOK_SECRET is not set", Default: ""},
	{Name: "AF_APP_LISTEN", Meaning: "host:port af app serve takes GitHub's deliveries on (POST /webhook only): the port to expose", Default: ":8080"},
	{Name: "AF_APP_MANAGE_LISTEN", Meaning: "host:port af app serve answers /healthz, /readyz and /metrics on (probes and Prometheus): not to be exposed", Default: ":8081"},
	{Name: "AF_APP_MAX_IN_FLIGHT", Meaning: "webhook requests the App reads at once, from 1 to 64: each body may be 25 MB, so this bounds its memory; a request that finds none free for 10s gets 503", Default: "4"},
	{Name: "AF_APP_WORKERS", Meaning: "teardowns the App runs at once", Default: "4"},
	{Name: "AF_APP_NAMESPACE", Meaning: "the namespace the App keeps its teardown journal in (ConfigMaps af-record-teardown-*), so a teardown cut short by a restart is resumed; deploy/app sets it to the pod's own namespace. Unset: the journal is kept in memory only", Default: "—"},
	{Name: "AF_APP_REAP_INTERVAL", Meaning: "the time between the App's reaper sweeps: the most a lost webhook costs", Default: "10m"},
	{Name: "AF_APP_COMMENT_AUTHORS", Meaning: "comma-separated logins besides the App's own whose af comment the App rewrites (the action's)", Default: api.ActionsBot},
	{Name: "AF_BUILD_TIMEOUT", Meaning: "the longest one build may take", Default: "15m"},
	{Name: "AF_URL_SCHEME", Meaning: "the scheme of preview URLs: http or https", Default: "https"},
	{Name: "AF_INGRESS_ADDRESS", Meaning: "host:port where the ingress controller is reached when preview hosts do not resolve from where af runs", Default: "the preview host's own address"},
	{Name: "AF_INGRESS_CONTROLLER", Meaning: "NAMESPACE/LABEL=VALUE,... of the ingress controller's pods, let in to web services", Default: "found on the cluster: the preview IngressClass's controller (Traefik, k3s's Traefik, ingress-nginx) by its pods' labels; af up fails at once with AF-RUN-048 when runtime.domain is set and none is found"},
	{Name: "AF_CLUSTER_RESOLVER", Meaning: "namespace/name of the cluster resolver's Service", Default: "kube-system/kube-dns"},
	{Name: "AF_WATCH_INTERVAL", Meaning: "how often each environment's probe checks every route again after af up, for as long as the environment runs (af status and the App's metrics show its last verdict); 0 turns the watch off and the probe pod is removed after its first verdict", Default: "1m"},
	{Name: "AF_REGISTRY_PULL_USERNAME", Meaning: "with AF_REGISTRY_PULL_PASSWORD: a pull-only credential for runtime.registry, written into each environment as the pods' image pull secret instead of the push credentials", Default: "—"},
	{Name: "AF_REGISTRY_PULL_PASSWORD", Meaning: "see AF_REGISTRY_PULL_USERNAME", Default: "—"},
	{Name: "AF_REGISTRY_PUSH_ONLY", Meaning: "1: the credentials af pushes with are never written into the cluster; without a pull credential no pull secret is written (the action sets it: its push credential may be the job's token)", Default: "unset"},
	{Name: "AF_WRITER_WAIT", Meaning: "how long af up waits for another af up of the same environment to finish (it holds the environment's writer lease) before refusing with AF-RUN-057; 0 refuses at once", Default: "10m"},
	{Name: "AF_REQUIRE_BOUNDED_CREDENTIAL", Meaning: "1: af up refuses (AF-RUN-056) a credential the API server would let create a namespace without af's label or pods in kube-system; unset: it warns and goes on", Default: "unset (warn)"},
	{Name: "AF_CLUSTER_CIDRS", Meaning: "comma-separated ranges of the cluster (pods, Services, nodes) added to those af discovers; the sidecar never reaches them", Default: "discovered"},
	{Name: "GITHUB_REPOSITORY", Meaning: "OWNER/NAME, the repository environments are named and labelled for (with --pr)", Default: ""},
	{Name: "AF_GATE_PUBLIC_TCP", Meaning: "the probe's and the gates' public TCP target", Default: "the production one (docs/gate.md)", Gate: true},
	{Name: "AF_GATE_PUBLIC_DNS", Meaning: "the public resolver the probe and the gates query over UDP", Default: "the production one", Gate: true},
	{Name: "AF_GATE_METADATA", Meaning: "the metadata endpoint the probe and the gates try", Default: "the production one", Gate: true},
	{Name: "AF_GATE_APISERVER", Meaning: "the API server the probe and the gates try", Default: "the pod's KUBERNETES_SERVICE_HOST:PORT", Gate: true},
	{Name: "AF_GATE_PUBLIC_TCP6", Meaning: "the IPv6 public TCP target", Default: "the production one", Gate: true},
	{Name: "AF_GATE_PUBLIC_DNS6", Meaning: "the IPv6 public resolver", Default: "the production one", Gate: true},
	{Name: "AF_GATE_METADATA6", Meaning: "the IPv6 metadata endpoint", Default: "the production one", Gate: true},
	{Name: "AF_GATE_IPV6", Meaning: "auto, on or off: the public IPv6 routes (the link-local route is always tried)", Default: "auto", Gate: true},
	{Name: "AF_GATE_LINK_LOCAL_PORTS", Meaning: "TCP ports tried on every IPv6 neighbour", Default: "53,3128,9901,10250,80,443,8080", Gate: true},
	{Name: "AF_GATE_NODE_PORTS", Meaning: "PORT[/tcp|/udp],... the node route tries at the node's address: name one in the NodePort range a host-network listener answers", Default: "10250/tcp", Gate: true},
	{Name: "AF_GATE_NODE_SAMPLE_PORTS", Meaning: "TCP ports inside the NodePort range where nothing should listen: the node's own reset there, against a rejection at the control port, finds an exempt range and the listeners nobody named", Default: "30000,32765", Gate: true},
	{Name: "AF_GATE_NODE_CONTROL_PORT", Meaning: "a TCP port outside the NodePort range where nothing listens, asked beside the sample ports", Default: "29999", Gate: true},
	{Name: "AF_GATE_ROUNDS", Meaning: "consecutive all-denied rounds the probe and the gates need", Default: "3", Gate: true},
	{Name: "AF_GATE_TIMEOUT", Meaning: "the time for each attempt", Default: "1s", Gate: true},
	{Name: "AF_GATE_INTERVAL", Meaning: "the pause between rounds", Default: "200ms", Gate: true},
	{Name: "AF_GATE_DEADLINE", Meaning: "the time for the whole check", Default: "60s", Gate: true},
}

// GateEnv returns the gate variables set in getenv's environment, to pass to every gate and
// probe. (AF_GATE_NODE is never among them: the runtime gives each pod its own node.)
func GateEnv(getenv func(string) string) map[string]string {
	out := map[string]string{}
	for _, v := range Vars {
		if v.Gate {
			if s := getenv(v.Name); s != "" {
				out[v.Name] = s
			}
		}
	}
	return out
}

// Kubernetes returns the Kubernetes runtime's options from af's environment; context is
// --context, progress where the runtime says what it does.
// Runtime is the one construction of a runtime for a manifest, with the options af's
// environment gives: af up and its sibling commands, the action, the App and af reap all get
// theirs here. provider is the manifest's runtime.provider ("" for the App and af reap, which
// act on environments of any manifest: the kubernetes runtime).
func Runtime(getenv func(string) string, provider, context string, progress afruntime.Progress) (afruntime.Runtime, error) {
	switch provider {
	case kubernetes.Name, "":
	case "local":
		return nil, failure.Newf(failure.Unavailable, "runtime.provider local is not available in this version: only the kubernetes runtime has landed")
	default:
		return nil, failure.Newf(failure.RuntimeCannot, "unknown runtime.provider %q", provider)
	}
	return newKubernetes(getenv, context, progress)
}

// newKubernetes is Runtime's kubernetes runtime.
func newKubernetes(getenv func(string) string, context string, progress afruntime.Progress) (*kubernetes.Runtime, error) {
	o, err := Kubernetes(getenv, context, progress)
	if err != nil {
		return nil, err
	}
	return kubernetes.New(o), nil
}

// AppRuntime is the runtime the App acts through (the kubernetes one) and the API of the same
// cluster, on which the App keeps its journal and its leadership lease (app/clusterstore).
func AppRuntime(getenv func(string) string, context string, progress afruntime.Progress) (afruntime.Runtime, clusterstore.API, error) {
	rt, err := newKubernetes(getenv, context, progress)
	if err != nil {
		return nil, nil, err
	}
	return rt, rt, nil
}

// Kubernetes reads the kubernetes runtime's options from af's environment.
func Kubernetes(getenv func(string) string, context string, progress afruntime.Progress) (kubernetes.Options, error) {
	info := version.Get(getenv)
	o := kubernetes.Options{
		Kubeconfig:  getenv("KUBECONFIG"),
		Context:     context,
		EngineImage: info.EngineImage,
		GateEnv:     GateEnv(getenv),
		Progress:    progress,
	}
	// af's own binary becomes the engine image wherever the service images go, unless the
	// environment names one: the action's container is exactly that static binary.
	if named, _ := version.EngineImageFrom(getenv); named == "" && goruntime.GOOS == "linux" {
		if exe, err := os.Executable(); err == nil && filepath.Base(exe) == "af" {
			o.PublishEngine = exe
		}
	}
	if strings.ContainsAny(o.Kubeconfig, "\n\r") || len(o.Kubeconfig) > 4096 {
		// A kubeconfig's content where its path goes (a CI secret exported as is): never echoed,
		// since it holds the credential.
		return o, failure.Newf(failure.UsageInvalid, "KUBECONFIG holds %d bytes over several lines, not a list of kubeconfig files: write the kubeconfig to a file and set KUBECONFIG to its path (its content is not shown here: it holds a credential)", len(o.Kubeconfig))
	}
	if u, pw := getenv("AF_REGISTRY_USERNAME"), getenv("AF_REGISTRY_PASSWORD"); u != "" || pw != "" {
		if u == "" || pw == "" {
			return o, failure.Newf(failure.UsageInvalid, "AF_REGISTRY_USERNAME and AF_REGISTRY_PASSWORD go together: set both, or neither to use the docker config")
		}
		o.RegistryAuth = &authn.Basic{Username: u, Password: pw}
	}
	if u, pw := getenv("AF_REGISTRY_PULL_USERNAME"), getenv("AF_REGISTRY_PULL_PASSWORD"); u != "" || pw != "" {
		if u == "" || pw == "" {
			return o, failure.Newf(failure.UsageInvalid, "AF_REGISTRY_PULL_USERNAME and AF_REGISTRY_PULL_PASSWORD go together: set both, or neither")
		}
		o.PullAuth = &authn.Basic{Username: u, Password: pw}
	}
	switch v := getenv("AF_REGISTRY_PUSH_ONLY"); v {
	case "", "0":
	case "1":
		o.PushOnly = true
	default:
		return o, failure.Newf(failure.UsageInvalid, "AF_REGISTRY_PUSH_ONLY=%q: 1 to keep the push credentials out of the cluster, or unset", v)
	}
	o.URLScheme = getenv("AF_URL_SCHEME")
	if o.URLScheme != "" && o.URLScheme != "http" && o.URLScheme != "https" {
		return o, failure.Newf(failure.UsageInvalid, "AF_URL_SCHEME=%q: http or https", o.URLScheme)
	}
	o.IngressAddress = getenv("AF_INGRESS_ADDRESS")
	o.Containerd = getenv("AF_CONTAINERD_ADDRESS")
	if v := getenv("AF_CLUSTER_CIDRS"); v != "" {
		for _, s := range strings.Split(v, ",") {
			p, err := netip.ParsePrefix(strings.TrimSpace(s))
			if err != nil {
				return o, failure.Newf(failure.UsageInvalid, "AF_CLUSTER_CIDRS=%q: %q is not an address range like 10.244.0.0/16", v, s)
			}
			o.ClusterCIDRs = append(o.ClusterCIDRs, p.Masked())
		}
	}
	if v := getenv("AF_WATCH_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if v == "0" {
			d, err = 0, nil
		}
		switch {
		case err != nil || d < 0 || d > 0 && d < 5*time.Second:
			return o, failure.Newf(failure.UsageInvalid, "AF_WATCH_INTERVAL=%q: a duration of at least 5s like 1m, or 0 to turn the watch off", v)
		case d == 0:
			o.Watch = -1
		default:
			o.Watch = d
		}
	}
	if v := getenv("AF_WRITER_WAIT"); v != "" {
		d, err := time.ParseDuration(v)
		if v == "0" {
			d, err = 0, nil
		}
		if err != nil || d < 0 {
			return o, failure.Newf(failure.UsageInvalid, "AF_WRITER_WAIT=%q: a duration like 10m, or 0 to refuse at once while another af up holds the environment", v)
		}
		o.WriterWait = d
		if d == 0 {
			o.WriterWait = -1 // the runtime's zero is its default
		}
	}
	switch v := getenv("AF_REQUIRE_BOUNDED_CREDENTIAL"); v {
	case "", "0":
	case "1":
		o.RequireBoundedCredential = true
	default:
		return o, failure.Newf(failure.UsageInvalid, "AF_REQUIRE_BOUNDED_CREDENTIAL=%q: 1 to refuse a credential that reaches past af's namespaces, or unset to be warned", v)
	}
	if v := getenv("AF_CLUSTER_RESOLVER"); v != "" {
		o.Resolver = v
	}
	if v := getenv("AF_INGRESS_CONTROLLER"); v != "" {
		ic, err := ParseIngressController(v)
		if err != nil {
			return o, err
		}
		o.IngressController = ic
	}
	return o, nil
}

// ParseIngressController reads NAMESPACE/LABEL=VALUE[,LABEL=VALUE...].
func ParseIngressController(v string) (*kubernetes.IngressController, error) {
	ns, sel, ok := strings.Cut(v, "/")
	ic := &kubernetes.IngressController{Namespace: ns, Labels: map[string]string{}}
	for _, kv := range strings.Split(sel, ",") {
		k, val, okKV := strings.Cut(kv, "=")
		if !okKV || k == "" {
			ok = false
			break
		}
		ic.Labels[k] = val
	}
	if !ok || ns == "" || len(ic.Labels) == 0 {
		return nil, failure.Newf(failure.UsageInvalid, "AF_INGRESS_CONTROLLER=%q: write NAMESPACE/LABEL=VALUE[,LABEL=VALUE...], e.g. ingress-nginx/app.kubernetes.io/name=ingress-nginx", v)
	}
	return ic, nil
}

// Docker returns the container daemon that builds build: services.
func Docker(getenv func(string) string, progress afruntime.Progress) (*images.Docker, error) {
	d := &images.Docker{Host: getenv("DOCKER_HOST"), Progress: progress}
	if v := getenv("AF_BUILD_TIMEOUT"); v != "" {
		t, err := time.ParseDuration(v)
		if err != nil || t <= 0 {
			return nil, failure.Newf(failure.UsageInvalid, "AF_BUILD_TIMEOUT=%q is not a duration such as 15m", v)
		}
		d.Timeout = t
	}
	return d, nil
}

// Markdown is docs/settings.md: the table of every variable.
func Markdown() []byte {
	var b strings.Builder
	b.WriteString("# Settings\n\n<!-- Generated by make generate (internal/gen) from settings.Vars; do not edit. -->\n\n")
	b.WriteString("Every environment variable af reads. The gate variables (`AF_GATE_*`) set where `af up` runs are\npassed to every gate and to the probe of the environment; tests point every route at their own\nhosts with them.\n\n")
	b.WriteString("| variable | what it means | default |\n|---|---|---|\n")
	vars := append([]Var(nil), Vars...)
	sort.SliceStable(vars, func(i, j int) bool { return !vars[i].Gate && vars[j].Gate })
	for _, v := range vars {
		def := v.Default
		if def == "" {
			def = "—"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", v.Name, strings.ReplaceAll(v.Meaning, "|", "\\|"), strings.ReplaceAll(def, "|", "\\|"))
	}
	return []byte(b.String())
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// AppSettings are the App's and the reaper's settings from af's environment.
type AppSettings struct {
	APIURL         string
	Token          string
	AppID          int64
	PrivateKey     []byte
	PrivateKeyFile string
	WebhookSecret  []byte
	Listen         string
	ManageListen   string
	MaxInFlight    int
	Workers        int
	ReapInterval   time.Duration
	RateWait       time.Duration
	Authors        []string
	// Namespace holds the teardown journal (empty: in memory).
	Namespace string
}

// App reads the App's settings. Values that do not parse are AF-GH-007, naming the variable;
// files are read here, so a missing one is reported before anything starts.
func App(getenv func(string) string) (AppSettings, error) {
	a := AppSettings{APIURL: getenv("AF_GITHUB_API_URL"), Token: getenv("AF_GITHUB_TOKEN"), Listen: getenv("AF_APP_LISTEN"),
		ManageListen: getenv("AF_APP_MANAGE_LISTEN"), MaxInFlight: 4, Workers: 4, ReapInterval: 10 * time.Minute, RateWait: 5 * time.Minute, Authors: []string{api.ActionsBot}}
	bad := func(name, why string) error {
		return failure.Newf(failure.AppConfigInvalid, "%s=%q: %s", name, getenv(name), why)
	}
	if a.APIURL == "" {
		a.APIURL = getenv("GITHUB_API_URL")
	}
	if a.Token == "" {
		a.Token = getenv("GITHUB_TOKEN")
	}
	if a.Listen == "" {
		a.Listen = ":8080"
	}
	if a.ManageListen == "" {
		a.ManageListen = ":8081"
	}
	if v := getenv("AF_APP_MAX_IN_FLIGHT"); v != "" {
		if _, err := fmt.Sscan(v, &a.MaxInFlight); err != nil || a.MaxInFlight < 1 || a.MaxInFlight > 64 {
			return a, bad("AF_APP_MAX_IN_FLIGHT", "not a number of requests from 1 to 64")
		}
	}
	if v := getenv("AF_APP_ID"); v != "" {
		var err error
		if _, err = fmt.Sscan(v, &a.AppID); err != nil || a.AppID <= 0 {
			return a, bad("AF_APP_ID", "not an App id (the number on the App's settings page)")
		}
	}
	if a.PrivateKeyFile = getenv("AF_APP_PRIVATE_KEY_FILE"); a.PrivateKeyFile != "" {
		b, err := os.ReadFile(a.PrivateKeyFile)
		if err != nil {
			return a, failure.New(failure.AppConfigInvalid, "reading the App's private key (AF_APP_PRIVATE_KEY_FILE): "+err.Error(), err)
		}
		a.PrivateKey = b
	}
	a.WebhookSecret = []byte(getenv("AF_APP_WEBHOOK_SECRET"))
	if f := getenv("AF_APP_WEBHOOK_SECRET_FILE"); len(a.WebhookSecret) == 0 && f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return a, failure.New(failure.AppConfigInvalid, "reading the webhook secret (AF_APP_WEBHOOK_SECRET_FILE): "+err.Error(), err)
		}
		a.WebhookSecret = []byte(strings.TrimRight(string(b), "\r\n"))
	}
	if v := getenv("AF_APP_WORKERS"); v != "" {
		if _, err := fmt.Sscan(v, &a.Workers); err != nil || a.Workers < 1 || a.Workers > 64 {
			return a, bad("AF_APP_WORKERS", "not a number of workers from 1 to 64")
		}
	}
	if a.Namespace = getenv("AF_APP_NAMESPACE"); a.Namespace != "" && (len(a.Namespace) > 63 || !dnsLabel.MatchString(a.Namespace)) {
		return a, bad("AF_APP_NAMESPACE", "not a namespace name (lower-case letters, digits and '-', at most 63)")
	}
	if v := getenv("AF_APP_REAP_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 10*time.Second {
			return a, bad("AF_APP_REAP_INTERVAL", "not a duration of at least 10s (e.g. 10m)")
		}
		a.ReapInterval = d
	}
	if v := getenv("AF_GITHUB_RATE_WAIT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return a, bad("AF_GITHUB_RATE_WAIT", "not a duration (e.g. 5m)")
		}
		a.RateWait = d
	}
	if v := getenv("AF_APP_COMMENT_AUTHORS"); v != "" {
		a.Authors = nil
		for _, l := range strings.Split(v, ",") {
			if l = strings.TrimSpace(l); l != "" {
				a.Authors = append(a.Authors, l)
			}
		}
	}
	return a, nil
}
