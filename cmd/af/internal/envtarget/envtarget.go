// Package envtarget is what af up, af down and af status share: the flags that name an
// environment (--env, or --pr with --repo) and the runtime the manifest asks for, built with
// the options af's own environment gives (engine image, gate targets).
package envtarget

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/spf13/cobra"

	"github.com/antifailure/af/cmd/af/internal/factory"
	"github.com/antifailure/af/cmd/af/internal/iostreams"
	"github.com/antifailure/af/envid"
	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/manifest"
	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/runtime/kubernetes"
	"github.com/antifailure/af/version"
)

// Flags name the environment.
type Flags struct {
	Env  string
	PR   int
	Repo string
}

// Add registers the flags on cmd.
func (fl *Flags) Add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&fl.Env, "env", "", "the environment id (default: <repo>-pr-<n> with --pr, else the manifest's name)")
	cmd.Flags().IntVar(&fl.PR, "pr", 0, "the pull request number; the id is <repo name>-pr-<n>")
	cmd.Flags().StringVar(&fl.Repo, "repo", "", "the repository, OWNER/NAME (default: GITHUB_REPOSITORY)")
}

// Ref resolves the flags against the manifest into an environment reference.
func (fl *Flags) Ref(f *factory.Factory, m *manifest.Manifest) (afruntime.Ref, error) {
	repo := fl.Repo
	if repo == "" {
		repo = f.Getenv("GITHUB_REPOSITORY")
	}
	ref := afruntime.Ref{Manifest: m, Repository: repo}
	var err error
	switch {
	case fl.Env != "" && fl.PR != 0:
		return ref, failure.Newf(failure.UsageInvalid, "--env and --pr name the environment twice: give one")
	case fl.Env != "":
		ref.ID, err = envid.ForName(fl.Env)
		if err == nil && ref.ID != fl.Env {
			return ref, failure.Newf(failure.NameInvalid, "--env %q is not an environment id (a DNS label); %q would be", fl.Env, ref.ID)
		}
	case fl.PR != 0:
		if repo == "" {
			return ref, failure.Newf(failure.UsageInvalid, "--pr needs the repository: --repo OWNER/NAME or GITHUB_REPOSITORY")
		}
		ref.ID, err = envid.ForPullRequest(repo, fl.PR)
	default:
		ref.ID, err = envid.ForName(m.Name)
	}
	return ref, err
}

// Resolve reads the manifest, names the environment from the flags and builds the runtime the
// manifest asks for: what af up, af down and af status each do first.
func (fl *Flags) Resolve(f *factory.Factory) (afruntime.Runtime, afruntime.Ref, error) {
	m, err := f.ValidManifest()
	if err != nil {
		return nil, afruntime.Ref{}, err
	}
	ref, err := fl.Ref(f, m)
	if err != nil {
		return nil, ref, err
	}
	rt, err := Runtime(f, m)
	return rt, ref, err
}

// gateVars are the variables that point the gate's and the probe's routes elsewhere; af up
// passes the ones set in its own environment to every gate and probe.
// AF_GATE_NODE is not among them: the runtime gives each pod its node's address.
var gateVars = []string{
	"AF_GATE_PUBLIC_TCP", "AF_GATE_PUBLIC_DNS", "AF_GATE_METADATA", "AF_GATE_APISERVER",
	"AF_GATE_PUBLIC_TCP6", "AF_GATE_PUBLIC_DNS6", "AF_GATE_METADATA6", "AF_GATE_IPV6",
	"AF_GATE_LINK_LOCAL_PORTS", "AF_GATE_NODE_PORTS",
	"AF_GATE_ROUNDS", "AF_GATE_TIMEOUT", "AF_GATE_INTERVAL", "AF_GATE_DEADLINE",
}

// Runtime returns the runtime the manifest asks for.
func Runtime(f *factory.Factory, m *manifest.Manifest) (afruntime.Runtime, error) {
	switch m.Runtime.Provider {
	case kubernetes.Name:
	case "local":
		return nil, failure.Newf(failure.Unavailable, "runtime.provider local is not available in this version: only the kubernetes runtime has landed")
	default:
		return nil, failure.Newf(failure.RuntimeCannot, "unknown runtime.provider %q", m.Runtime.Provider)
	}
	info := version.Get(f.Getenv)
	gateEnv := map[string]string{}
	for _, k := range gateVars {
		if v := f.Getenv(k); v != "" {
			gateEnv[k] = v
		}
	}
	o := kubernetes.Options{
		Kubeconfig:  f.Getenv("KUBECONFIG"),
		Context:     f.Options.Context,
		EngineImage: info.EngineImage,
		GateEnv:     gateEnv,
		Progress:    Progress(f),
	}
	// af's own binary becomes the engine image wherever the service images go, unless
	// AF_ENGINE_IMAGE (or AF_PROXY_IMAGE) names one: the action's container is exactly that
	// static binary.
	if named, _ := version.EngineImageFrom(f.Getenv); named == "" && goruntime.GOOS == "linux" {
		if exe, err := os.Executable(); err == nil && filepath.Base(exe) == "af" {
			o.PublishEngine = exe
		}
	}
	if u, pw := f.Getenv("AF_REGISTRY_USERNAME"), f.Getenv("AF_REGISTRY_PASSWORD"); u != "" || pw != "" {
		if u == "" || pw == "" {
			return nil, failure.Newf(failure.UsageInvalid, "AF_REGISTRY_USERNAME and AF_REGISTRY_PASSWORD go together: set both, or neither to use the docker config")
		}
		o.RegistryAuth = &authn.Basic{Username: u, Password: pw}
	}
	o.URLScheme = f.Getenv("AF_URL_SCHEME")
	if o.URLScheme != "" && o.URLScheme != "http" && o.URLScheme != "https" {
		return nil, failure.Newf(failure.UsageInvalid, "AF_URL_SCHEME=%q: http or https", o.URLScheme)
	}
	o.IngressAddress = f.Getenv("AF_INGRESS_ADDRESS")
	if v := f.Getenv("AF_CLUSTER_CIDRS"); v != "" {
		for _, s := range strings.Split(v, ",") {
			p, err := netip.ParsePrefix(strings.TrimSpace(s))
			if err != nil {
				return nil, failure.Newf(failure.UsageInvalid, "AF_CLUSTER_CIDRS=%q: %q is not an address range like 10.244.0.0/16", v, s)
			}
			o.ClusterCIDRs = append(o.ClusterCIDRs, p.Masked())
		}
	}
	if v := f.Getenv("AF_CLUSTER_RESOLVER"); v != "" {
		o.Resolver = v
	}
	if v := f.Getenv("AF_INGRESS_CONTROLLER"); v != "" {
		ic, err := parseIngressController(v)
		if err != nil {
			return nil, err
		}
		o.IngressController = ic
	} else if m.Runtime.Domain != "" {
		o.Progress.Printf("runtime.domain is set but AF_INGRESS_CONTROLLER (NAMESPACE/LABEL=VALUE,...) is not: no policy lets an ingress controller reach the web services")
	}
	return kubernetes.New(o), nil
}

// EngineImage says which engine image af deploys and where that choice came from.
func EngineImage(f *factory.Factory) string {
	if img, from := version.EngineImageFrom(f.Getenv); img != "" {
		return img + ", from " + from
	}
	info := version.Get(f.Getenv)
	return info.EngineImage + ", this build's own (the cluster must have it: make engine-image builds it)"
}

// parseIngressController reads NAMESPACE/LABEL=VALUE[,LABEL=VALUE...].
func parseIngressController(v string) (*kubernetes.IngressController, error) {
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

// Progress writes the runtime's progress to the error stream, also with -o json (standard
// output stays the result alone), and not at all with -q.
func Progress(f *factory.Factory) afruntime.Progress {
	return func(format string, args ...any) {
		if f.IO.Quiet() {
			return
		}
		fmt.Fprintf(f.IO.ErrOut, "%s %s\n", f.IO.Color(iostreams.Cyan, "af:"), strings.TrimRight(fmt.Sprintf(format, args...), "\n"))
	}
}
