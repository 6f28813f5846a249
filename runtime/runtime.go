// Package runtime is the seam between af's commands and the places environments run: the
// Runtime interface every runtime implements (Kubernetes now, a local one perhaps later), the
// Spec an environment is brought up from, the Status and inventory a runtime reports, and the
// progress events it emits while it waits.
//
// The consumers (the CLI, the GitHub action, the App, the conformance suite) hold a Runtime and
// never know which one it is; what a runtime can and cannot do is in its Capabilities, and
// what it offers beyond Up, Down and Status (finding environments by their labels, reading an
// environment's containment watch, observing what an environment saw) it hands out as the
// Lister, Watcher, Observer and Checker declared here, or nil: nobody asserts a runtime's type.
package runtime

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/antifailure/af/gate"
	"github.com/antifailure/af/harden"
	"github.com/antifailure/af/manifest"
)

// Runtime places environments somewhere and removes them again.
type Runtime interface {
	// Name is the runtime's name as the manifest writes it ("kubernetes").
	Name() string
	// Capabilities says what this runtime provides.
	Capabilities() Capabilities
	// Up brings the environment to the state the spec describes, creating what is missing.
	// It is idempotent: a second Up with the same spec converges and creates no duplicates.
	Up(ctx context.Context, spec Spec) (*Result, error)
	// Down removes the environment and waits until it is gone. Down of an environment that
	// does not exist succeeds.
	Down(ctx context.Context, env Ref) error
	// Status reports the environment as it is running now.
	Status(ctx context.Context, env Ref) (*Status, error)
	// Inventory lists every resource this runtime created that still exists, attributed to
	// its environment.
	Inventory(ctx context.Context) ([]Resource, error)
	// Reachable says whether the place environments run answers with the credentials af has
	// (the App's readiness).
	Reachable(ctx context.Context) error

	// Lister is how this runtime finds environments by what af recorded on them; nil when
	// environments cannot be found after the run that made them.
	Lister() Lister
	// Watcher is how this runtime reads an environment's containment watch; nil when it has
	// no watch.
	Watcher() Watcher
	// Observer is how this runtime reaches what an environment saw; nil unless
	// Capabilities.NetLog.
	Observer() Observer
	// Checker is how this runtime tries its place for containment with no application (af
	// check); nil when it cannot.
	Checker() Checker
}

// Lister finds environments by what af recorded on them (repository, pull request): the
// runtimes that keep environments findable after the run that made them (kubernetes).
type Lister interface {
	Environments(ctx context.Context, f Filter) ([]Environment, error)
}

// Watcher reads an environment's containment as its probe sees it now, checking again while
// the environment runs; it changes nothing.
type Watcher interface {
	Watch(ctx context.Context, env Ref) (*Watch, error)
}

// Capabilities says what a runtime provides. Consumers check it instead of the runtime's name.
type Capabilities struct {
	// Ingress: web services get a preview URL when the manifest sets a domain.
	Ingress bool
	// Replicas: a service can run several instances.
	Replicas bool
	// Resources: requests and limits are applied to each instance.
	Resources bool
	// Migrations: a service's migrate command runs once before it starts.
	Migrations bool
	// NetLog: af net log, af inbox and af webhook trigger can reach the sidecar.
	NetLog bool
}

// Ref names an environment.
type Ref struct {
	// ID is the environment id (envid).
	ID string
	// Manifest supplies the runtime settings (namespace prefix, context).
	Manifest *manifest.Manifest
	// Repository (OWNER/NAME), when known: an environment of another repository with the same
	// id is refused, never reused or removed.
	Repository string
	// Namespace, when set, is the environment's namespace as found by its labels (the App and
	// the reaper); it replaces the one the manifest's prefix and ID make, and Manifest may then
	// be nil. The namespace's own labels are still checked before anything is touched.
	Namespace string
}

// Filter narrows a listing of environments. Zero fields match everything.
type Filter struct {
	// Repository (OWNER/NAME) keeps the environments recorded for it, compared without case.
	Repository string
	// PullRequest keeps the environments of one pull request.
	PullRequest int
}

// Environment is one environment found on a runtime by af's labels.
type Environment struct {
	ID         string `json:"id"`
	Namespace  string `json:"namespace"`
	Repository string `json:"repository,omitempty"` // OWNER/NAME as recorded, exact case
	// PullRequest is the pull request number, 0 for a manual environment.
	PullRequest int `json:"pull_request,omitempty"`
	// Expires is when the environment's TTL runs out; zero when it has none.
	Expires time.Time `json:"expires,omitzero"`
	// Terminating is true while the runtime is already removing it.
	Terminating bool `json:"terminating,omitempty"`
	// Created is when the environment's namespace was made (zero when unknown).
	Created time.Time `json:"created,omitzero"`
}

// ErrOtherRepository is the cause of a NamespaceNotOurs failure whose namespace holds an
// environment of another repository: the caller may name its environment otherwise
// (envid.ForPullRequestOfOwner) and try again.
var ErrOtherRepository = errors.New("the namespace holds another repository's environment")

// Spec is everything Up needs.
type Spec struct {
	Ref
	// PullRequest is the pull request number, 0 for a manual run.
	PullRequest int
	// Images maps each service to the image reference the runtime can run. Services with
	// image: in the manifest default to it.
	Images map[string]string
	// Archives maps services to docker archives (docker save) the runtime publishes where the
	// cluster can pull them (a registry, or the nodes of a kind or k3d cluster) before any pod
	// asks; the published reference then overrides Images.
	Archives map[string]string
	// Getenv is af's own environment (os.Getenv), read for database.url_from.
	Getenv func(string) string
	// Holder says who runs this up (a workflow run and its commit; empty: this process on this
	// machine): a second up of the same environment waits for it, naming it.
	Holder string
}

// Result is what Up did.
type Result struct {
	Environment string `json:"environment"`
	Namespace   string `json:"namespace"`
	Context     string `json:"context,omitempty"`
	// Probe is the containment verdict of the environment's probe pod.
	Probe *gate.Result `json:"probe"`
	// Services, in start order.
	Services []ServiceStatus `json:"services"`
	// URLs maps web services to their preview URL (only with ingress and a domain).
	URLs map[string]string `json:"urls,omitempty"`
	// Phases records how long each phase of Up took.
	Phases []Phase `json:"phases"`
}

// Phase is one timed step of Up.
type Phase struct {
	Name string `json:"name"`
	// Start is when the phase began, from the start of af up: phases that overlap (the
	// sidecar and the probe, services with no order between them) show it.
	Start   time.Duration `json:"start_ns"`
	Elapsed time.Duration `json:"elapsed_ns"`
}

// Status is an environment as it runs now.
type Status struct {
	Environment string          `json:"environment"`
	Namespace   string          `json:"namespace"`
	Exists      bool            `json:"exists"`
	Repository  string          `json:"repository,omitempty"`
	ExpiresAt   *time.Time      `json:"expires_at,omitempty"`
	Probe       *gate.Result    `json:"probe,omitempty"`
	Services    []ServiceStatus `json:"services"`
	// Quota is what the environment's pods hold against its quota, when it has one.
	Quota *Quota `json:"quota,omitempty"`
	// Watch is containment as the environment's probe sees it now, checking again while the
	// environment runs; Probe is the verdict af up read before any service started.
	Watch *Watch `json:"watch,omitempty"`
}

// Watch is the environment's containment while it runs: the last verdict of its probe, which
// checks every route again on a schedule after af up.
type Watch struct {
	// State is the last check's verdict (contained, escaped, no-answer), or why there is none
	// to trust: stale (no check for longer than two intervals and a check's deadline),
	// stopped (the probe's pod ended), absent (no probe pod: the watch is off or was removed),
	// starting (the first check is under way).
	State string `json:"state"`
	// EverySeconds is how often the probe checks.
	EverySeconds float64 `json:"every_s,omitempty"`
	// At is when the last check ended.
	At *time.Time `json:"at,omitempty"`
	// Last is the last check's result: its routes and, escaped, the routes that got out.
	Last *gate.Result `json:"last,omitempty"`
	// Detail says what the state means, in a sentence.
	Detail string `json:"detail"`
}

// Watch states besides the verdicts (gate.Contained, gate.Escape, gate.CannotAnswer).
const (
	WatchStale    = "stale"
	WatchStopped  = "stopped"
	WatchAbsent   = "absent"
	WatchStarting = "starting"
)

// Quota is the environment's resource quota as the cluster counts it: what its pods hold now
// (used) against the ceiling (hard), as quantities (5, 1300m, 1536Mi).
type Quota struct {
	Pods   QuotaFigure `json:"pods"`
	CPU    QuotaFigure `json:"cpu"`    // the sum of the pods' CPU limits
	Memory QuotaFigure `json:"memory"` // the sum of the pods' memory limits
}

// QuotaFigure is one resource of a quota.
type QuotaFigure struct {
	Used string `json:"used"`
	Hard string `json:"hard"`
}

// ServiceStatus is one service's state.
type ServiceStatus struct {
	Name    string `json:"name"`
	Ready   int    `json:"ready"`
	Desired int    `json:"desired"`
	// CPU and Memory are the size read off the running instances (empty: not limited).
	CPU    string `json:"cpu,omitempty"`
	Memory string `json:"memory,omitempty"`
	// State is running, starting, failed or absent.
	State string `json:"state"`
	// ExitCode is the last exit code of the service's process, when it has exited.
	ExitCode *int   `json:"exit_code,omitempty"`
	Reason   string `json:"reason,omitempty"`
	URL      string `json:"url,omitempty"`
}

// Service states.
const (
	StateRunning  = "running"
	StateStarting = "starting"
	StateFailed   = "failed"
	StateAbsent   = "absent"
)

// Resource is one thing a runtime created.
type Resource struct {
	Kind        string `json:"kind"`
	Namespace   string `json:"namespace,omitempty"`
	Name        string `json:"name"`
	Environment string `json:"environment"`
}

// Progress receives what a runtime is doing, one line at a time, for the people watching. It
// is never parsed; machine-readable results are the return values. A runtime calls it from
// several goroutines at once (a wait beside the probe), so it must be safe for concurrent use.
type Progress func(format string, args ...any)

type progressKey struct{}

// WithProgress returns ctx carrying p: a runtime reports what it does during a call there,
// rather than where it was made to report, so a caller running several calls at once (the
// App's teardowns) can tell whose line is whose.
func WithProgress(ctx context.Context, p Progress) context.Context {
	return context.WithValue(ctx, progressKey{}, p)
}

// ProgressFrom returns the Progress ctx carries, else fallback.
func ProgressFrom(ctx context.Context, fallback Progress) Progress {
	if p, ok := ctx.Value(progressKey{}).(Progress); ok && p != nil {
		return p
	}
	return fallback
}

// Printf reports through p, which may be nil.
func (p Progress) Printf(format string, args ...any) {
	if p != nil {
		p(format, args...)
	}
}

// Observer is what a runtime with Capabilities.NetLog offers for reading what an environment
// saw: a way to its sidecar's control API (the decision log, the inbox). A runtime without it
// refuses these commands with AF-RUN-044, naming itself.
type Observer interface {
	// Sidecar opens a way to the environment's sidecar control API. The caller closes it.
	Sidecar(ctx context.Context, env Ref) (*Link, error)
	// Service opens a way to port of one ready instance of a service (0: the manifest's port),
	// for af webhook trigger. The caller closes it.
	Service(ctx context.Context, env Ref, service string, port int) (*Link, error)
	// Logs writes a service's log lines to w, each prefixed with the instance that wrote it,
	// until they end (or, with Follow, until ctx ends).
	Logs(ctx context.Context, env Ref, o LogOptions, w io.Writer) error
	// Instances lists the environment's instances that have an address, the runtime's own
	// (probe, sidecar) among them, so a decision's client address can be named.
	Instances(ctx context.Context, env Ref) ([]Instance, error)
}

// Instance is one running unit of an environment and its addresses.
type Instance struct {
	// Name is the runtime's name for it (on Kubernetes the pod).
	Name string `json:"name"`
	// Service is the manifest's service it belongs to; "" for the runtime's own (Workload
	// then says which: probe, sidecar).
	Service string `json:"service,omitempty"`
	// Workload is service, migration, probe or sidecar.
	Workload  string   `json:"workload"`
	Addresses []string `json:"addresses"`
}

// Named is who a service and instance (as Who returns them) or, when no instance has it, an
// address is: "web/shop-web-5c9d-x2", "10.244.0.9", or "" when nothing is known.
func Named(service, instance, addr string) string {
	if instance != "" {
		return service + "/" + instance
	}
	return addr
}

// Who names the instance an address belongs to ("" when none does): "web/shop-web-7d9c-x2",
// "web (migration)/…", or "probe/…" for the runtime's own.
func Who(instances []Instance, addr string) (service, name string) {
	for _, in := range instances {
		for _, a := range in.Addresses {
			if a == addr {
				who := in.Service
				switch {
				case who == "":
					who = in.Workload
				case in.Workload == "migration":
					who += " (migration)"
				}
				return who, in.Name
			}
		}
	}
	return "", ""
}

// LogOptions choose what Logs reads.
type LogOptions struct {
	Service string
	// Migration reads the service's migration instead of its instances.
	Migration bool
	// Gate reads the startup gate's lines instead of the service's own.
	Gate bool
	// Previous reads the instance's previous container: the one that crashed.
	Previous bool
	Follow   bool
	// Since keeps lines newer than this (0: all); Tail keeps the last lines (0: all).
	Since time.Duration
	Tail  int64
}

// Link is an open way into an environment: Addr is a loopback host:port. Close ends it and
// waits until its listener and streams are gone.
type Link struct {
	Addr string
	// Via says how it goes (for messages): "port-forward to pod af-sidecar-…".
	Via   string
	close func() error
}

// NewLink returns a Link that close ends.
func NewLink(addr, via string, close func() error) *Link {
	return &Link{Addr: addr, Via: via, close: close}
}

// Close ends the link. It is safe to call more than once.
func (l *Link) Close() error {
	if l == nil || l.close == nil {
		return nil
	}
	c := l.close
	l.close = nil
	return c()
}

// Namer names the instance behind a client address, asking the runtime for the environment's
// instances once, and again (at most every RefreshEvery) when an address it does not know
// turns up: a replacement pod while a command follows. Not safe for concurrent use.
type Namer struct {
	obs       Observer
	ref       Ref
	instances []Instance
	asked     time.Time
	// Err is the runtime's last refusal to list the instances (then names stay empty).
	Err error
	now func() time.Time
}

// RefreshEvery bounds how often an unknown client address makes a Namer ask again.
const RefreshEvery = 2 * time.Second

// NewNamer returns a Namer for env; with a runtime that observes nothing it names nothing.
func NewNamer(rt Runtime, env Ref) *Namer {
	return &Namer{obs: rt.Observer(), ref: env, now: time.Now}
}

// Name returns the service and instance that have addr ("", "" when none does or it is unknown).
func (n *Namer) Name(ctx context.Context, addr string) (service, instance string) {
	if n == nil || n.obs == nil || addr == "" {
		return "", ""
	}
	service, instance = Who(n.instances, addr)
	if instance == "" && (n.asked.IsZero() || n.now().Sub(n.asked) >= RefreshEvery) {
		n.asked = n.now()
		ins, err := n.obs.Instances(ctx, n.ref)
		if err != nil {
			n.Err = err
			return "", ""
		}
		n.instances = ins
		service, instance = Who(n.instances, addr)
	}
	return service, instance
}

// Checker tries whether the runtime's place contains an environment, with no application: in
// a throwaway environment it removes, af up's own steps up to the probe's verdict, and what it
// can read of the place.
type Checker interface {
	Check(ctx context.Context, o CheckOptions) (*Check, error)
}

// CheckOptions says where a check runs.
type CheckOptions struct {
	// Manifest supplies the runtime settings (context, namespace prefix); nil: the defaults.
	Manifest *manifest.Manifest
}

// Check is what a check found.
type Check struct {
	Context   string `json:"context"`
	Server    string `json:"server,omitempty"`
	Namespace string `json:"namespace"`
	// Removed is true once the throwaway namespace is gone.
	Removed bool `json:"removed"`
	// Probe is the probe's verdict (nil when it gave none: Error says why).
	Probe *gate.Result `json:"probe,omitempty"`
	// Error is why the check could not reach a verdict ("" when it did); Err is that failure.
	Error string `json:"error,omitempty"`
	Err   error  `json:"-"`
	// Cluster is what the check read of the place, each with where it read it.
	Cluster []Fact `json:"cluster"`
	// Hardening is each node's report of af's node agent (deploy/harden), when it runs.
	Hardening []harden.Report `json:"hardening,omitempty"`
	// Advice is, for each hole the open routes show, how to close it.
	Advice []harden.Advice `json:"advice,omitempty"`
	Phases []Phase         `json:"phases"`
}

// Fact is one thing a check read.
type Fact struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	From  string `json:"from"`
}

// Contained is true when the probe's verdict is contained.
func (c *Check) Contained() bool { return c.Probe != nil && c.Probe.Verdict == gate.Contained }
