package manifest

import (
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/antifailure/af/failure"
)

// Limits of names and sizes the manifest may ask for.
const (
	MaxNameLength         = 40
	MaxPrefixLength       = 20
	MaxEnvValueLength     = 32 << 10
	minTTL                = 10 * time.Minute
	maxTTL                = 90 * 24 * time.Hour
	ReservedServicePrefix = "af-"
)

var (
	dnsLabel   = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)
	nsPrefix   = regexp.MustCompile(`^[a-z][-a-z0-9]*$`)
	envName    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	stageName  = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]*$`)
	proxyNames = map[string]bool{"HTTP_PROXY": true, "HTTPS_PROXY": true, "NO_PROXY": true, "ALL_PROXY": true}
	minCPU     = resource.MustParse("1m")
	maxCPU     = resource.MustParse("64")
	// minMemory is what af's gate needs: it runs first in every service and migration pod,
	// at the pod's size (docs/runtime.md, "What one environment is"), and a smaller limit kills it.
	minMemory = resource.MustParse("16Mi")
	maxMemory = resource.MustParse("256Gi")
)

// memoryRange says the range of a memory size and why it starts where it does.
var memoryRange = minMemory.String() + " to " + maxMemory.String() + "; af's gate runs first in each pod within the pod's size, and needs " + minMemory.String()

// validator checks what the types cannot say: names, cross-references, forms of strings.
type validator struct {
	lines    map[string]int
	bad      map[string]bool
	problems []Problem
	warnings []Problem
}

func (v *validator) skip(p string) bool {
	for q := p; q != ""; q = parentPath(q) {
		if v.bad[q] {
			return true
		}
	}
	return false
}

func (v *validator) fail(p string, code *failure.Entry, format string, args ...any) {
	if v.skip(p) {
		return
	}
	v.problems = append(v.problems, Problem{Path: p, Line: lineFor(v.lines, p), Message: fmt.Sprintf(format, args...), Code: code.Code})
}

func (v *validator) warn(p, format string, args ...any) {
	v.warnings = append(v.warnings, Problem{Path: p, Line: lineFor(v.lines, p), Message: fmt.Sprintf(format, args...), Code: failure.ManifestInvalid.Code})
}

func (v *validator) invalid(p, format string, args ...any) {
	v.fail(p, failure.ManifestInvalid, format, args...)
}

func (v *validator) manifest(m *Manifest) {
	if m.Name != "" {
		v.label("name", m.Name, MaxNameLength)
	}
	v.runtime(&m.Runtime)
	if m.Services != nil && len(m.Services) == 0 {
		v.invalid("services", "names no service; an environment needs at least one")
	}
	for _, n := range slices.Sorted(maps.Keys(m.Services)) {
		v.service(m, n, m.Services[n])
	}
	v.dependencies(m.Services)
	if m.Database != nil {
		v.database(m)
	}
	v.egress(&m.Egress)
	v.github(&m.GitHub)
	v.quantity("limits.cpu", m.Limits.CPU, minCPU, maxCPU, "1m to 64")
	v.quantity("limits.memory", m.Limits.Memory, minMemory, maxMemory, memoryRange)
}

func (v *validator) label(p, s string, max int) bool {
	switch {
	case len(s) > max:
		v.invalid(p, "%q is %d characters; at most %d", truncate(s, 50), len(s), max)
	case !dnsLabel.MatchString(s):
		v.invalid(p, "%q is not a DNS label: lower-case letters, digits and '-', starting with a letter and not ending with '-'", s)
	default:
		return true
	}
	return false
}

func (v *validator) runtime(r *Runtime) {
	if r.NamespacePrefix != "" {
		switch {
		case len(r.NamespacePrefix) > MaxPrefixLength:
			v.invalid("runtime.namespace_prefix", "%q is %d characters; at most %d", r.NamespacePrefix, len(r.NamespacePrefix), MaxPrefixLength)
		case !nsPrefix.MatchString(r.NamespacePrefix):
			v.invalid("runtime.namespace_prefix", "%q is not a namespace prefix: lower-case letters, digits and '-', starting with a letter", r.NamespacePrefix)
		}
	}
	if r.Domain != "" {
		if errs := validation.IsDNS1123Subdomain(r.Domain); len(errs) > 0 || !strings.Contains(r.Domain, ".") && r.Domain != "localhost" {
			v.invalid("runtime.domain", "%q is not a DNS domain (lower-case labels separated by dots, like preview.example.dev)", r.Domain)
		} else if len(r.Domain) > 253-64 {
			v.invalid("runtime.domain", "%q is too long: preview hosts <env>-<service>.<domain> must fit in 253 characters, so the domain may have at most %d", r.Domain, 253-64)
		}
	}
	if r.IngressClass != "" {
		if errs := validation.IsDNS1123Subdomain(r.IngressClass); len(errs) > 0 {
			v.invalid("runtime.ingress_class", "%q is not an IngressClass name (lower-case letters, digits, '-' and '.')", r.IngressClass)
		} else if r.Domain == "" {
			v.warn("runtime.ingress_class", "is not read without runtime.domain: no Ingress is created")
		}
	}
	if r.Registry != "" {
		if _, err := name.NewRepository(r.Registry); err != nil || !registryHost(r.Registry) {
			v.invalid("runtime.registry", "%q is not a repository prefix like ghcr.io/acme/previews or localhost:5000/af (no tag, no digest, lower case)", r.Registry)
		}
	}
	if r.TTL != "" {
		d, err := r.TTL.Value()
		switch {
		case err != nil:
			v.invalid("runtime.ttl", "%s", err)
		case d < minTTL || d > maxTTL:
			v.invalid("runtime.ttl", "%s is out of range (10m to 90d)", r.TTL)
		}
	}
}

func (v *validator) service(m *Manifest, n string, s *Service) {
	p := joinKey("services", n)
	if len(n) > MaxNameLength || !dnsLabel.MatchString(n) {
		v.invalid(p, "%q is not a service name: a DNS label of at most %d characters (lower-case letters, digits and '-', starting with a letter)", truncate(n, 50), MaxNameLength)
	} else if strings.HasPrefix(n, ReservedServicePrefix) {
		v.invalid(p, "%q starts with %q, which af reserves for its own objects (the sidecar, the probe)", n, ReservedServicePrefix)
	}
	if s == nil {
		return
	}
	kind := s.Kind
	if kind == "" {
		kind = KindOf(s)
	}
	switch {
	case s.Image == "" && s.Build == nil:
		v.invalid(p, "has neither image nor build; give one")
	case s.Image != "" && s.Build != nil:
		v.invalid(p+".image", "is given together with build; give one of them")
	case s.Image != "":
		v.image(p+".image", s.Image)
	default:
		v.build(p+".build", s.Build)
	}
	v.command(p+".command", s.Command)
	v.command(p+".migrate", s.Migrate)
	if kind == KindWeb && s.Port == 0 && !v.bad[p+".port"] {
		v.invalid(p+".port", "is required for a web service")
	}
	if s.HealthPath != "" {
		switch {
		case s.Port == 0 && !v.bad[p+".port"]:
			v.invalid(p+".health_path", "is set but port is not; a health path is checked on the service's port")
		case !strings.HasPrefix(s.HealthPath, "/") || strings.ContainsAny(s.HealthPath, " \t\r\n#") || strings.HasPrefix(s.HealthPath, "//"):
			v.invalid(p+".health_path", "%q is not an HTTP path: it starts with one '/' and has no spaces or '#'", s.HealthPath)
		}
	}
	if kind == KindCron {
		if s.Schedule == "" {
			v.invalid(p+".schedule", "is required for a cron service")
		}
		if s.Replicas > 1 {
			v.invalid(p+".replicas", "is %d; a cron service runs one instance", s.Replicas)
		}
	}
	if s.Schedule != "" {
		if kind != KindCron {
			v.invalid(p+".schedule", "is only read for kind cron; this service is %s", kind)
		} else if err := checkSchedule(s.Schedule); err != nil {
			v.invalid(p+".schedule", "%s", err)
		}
	}
	if s.Resources != nil {
		v.quantity(p+".resources.cpu", s.Resources.CPU, minCPU, maxCPU, "1m to 64")
		v.quantity(p+".resources.memory", s.Resources.Memory, minMemory, maxMemory, memoryRange)
		if s.Resources.CPU != "" {
			if q, err := s.Resources.CPU.Value(); err == nil && q.Cmp(maxCPU) <= 0 && q.Cmp(minCPU) >= 0 && q.MilliValue()*1000000 != q.ScaledValue(resource.Nano) {
				v.invalid(p+".resources.cpu", "%s is finer than 1m (a thousandth of a CPU)", s.Resources.CPU)
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		ep := joinKey(p+".env", k)
		switch {
		case !envName.MatchString(k):
			v.invalid(ep, "%q is not an environment variable name: letters, digits and '_', not starting with a digit", k)
		case proxyNames[strings.ToUpper(k)]:
			v.invalid(ep, "is set by af to route traffic through the environment's sidecar and cannot be set here; use egress rules instead")
		case m.Database != nil && k == databaseEnvName(m.Database):
			v.invalid(ep, "is where af puts the database URL (database.env_name); rename one of them")
		case len(s.Env[k]) > MaxEnvValueLength:
			v.invalid(ep, "is %d bytes; at most %d", len(s.Env[k]), MaxEnvValueLength)
		}
	}
	v.waitsFor(m, n, s)
}

// waitsFor checks what service n waits for: services, itself (depends_on) and through its
// migration (migrate_after).
func (v *validator) waitsFor(m *Manifest, n string, s *Service) {
	p := joinKey("services", n)
	v.serviceList(m, p+".depends_on", s.DependsOn, n, fmt.Sprintf("service %q depends on itself", n))
	if len(s.MigrateAfter) > 0 && s.Migrate.IsZero() {
		v.invalid(p+".migrate_after", "names what the migration waits for, but the service has no migrate")
	}
	v.serviceList(m, p+".migrate_after", s.MigrateAfter, n, fmt.Sprintf("the migration of %q cannot wait for %q itself: the service starts after its migration", n, n))
}

// CheckDependencies checks what the services wait for (depends_on and migrate_after) as Parse
// does, for a manifest that was not parsed (a runtime's caller may build one): no name twice,
// no service waiting for itself, every name a service, no migrate_after without a migrate, no
// cycle. It returns nil, or the failure Result.Err gives for the problems: AF-RUN-041 when
// they are all cycles, AF-RUN-042 when they are all missing services.
func CheckDependencies(services map[string]*Service) error {
	v := &validator{}
	m := &Manifest{Services: services}
	for _, n := range slices.Sorted(maps.Keys(services)) {
		if s := services[n]; s != nil {
			v.waitsFor(m, n, s)
		}
	}
	v.dependencies(services)
	return (&Result{Problems: v.problems}).Err("the manifest")
}

// serviceList checks a list of the manifest's services at p (depends_on, migrate_after) of
// service n: no name twice, not n itself (self says why), every name a service.
func (v *validator) serviceList(m *Manifest, p string, names []string, n, self string) {
	seen := map[string]bool{}
	for i, d := range names {
		dp := fmt.Sprintf("%s[%d]", p, i)
		switch {
		case seen[d]:
			v.invalid(dp, "%q is listed twice", d)
		case d == n:
			v.fail(dp, failure.DependencyCycle, "%s", self)
		case m.Services[d] == nil:
			msg := fmt.Sprintf("%q is not a service of this manifest", d)
			if sg := suggest(d, slices.Sorted(maps.Keys(m.Services))); sg != "" {
				msg += fmt.Sprintf("; did you mean %q?", sg)
			}
			v.fail(dp, failure.DependencyMissing, "%s", msg)
		}
		seen[d] = true
	}
}

func databaseEnvName(d *Database) string {
	if d.EnvName != "" {
		return d.EnvName
	}
	return "DATABASE_URL"
}

func (v *validator) image(p, ref string) {
	r, err := name.ParseReference(ref)
	if err != nil || strings.ToLower(ref) != ref && !strings.Contains(ref, "@") {
		v.invalid(p, "%q is not an image reference (registry/repository:tag or @sha256:digest, repository in lower case)", ref)
		return
	}
	if !hasTagOrDigest(ref) {
		v.warn(p, "%q has no tag, so it means the moving tag latest; af resolves it to a digest when it can, but a version tag or digest (app:1.4.2, app@sha256:...) is safer", ref)
		return
	}
	if t, ok := r.(name.Tag); ok && t.TagStr() == "latest" {
		v.warn(p, "%q uses the moving tag latest; af resolves it to a digest when it can, but a version tag or digest is safer", ref)
	}
}

// hasTagOrDigest reports whether an image reference names a tag or a digest explicitly.
func hasTagOrDigest(ref string) bool {
	if strings.Contains(ref, "@") {
		return true
	}
	last := ref[strings.LastIndex(ref, "/")+1:]
	return strings.Contains(last, ":")
}

// registryHost reports whether the first component of a repository names a registry host.
func registryHost(repo string) bool {
	host, _, found := strings.Cut(repo, "/")
	return found && (strings.ContainsAny(host, ".:") || host == "localhost")
}

func (v *validator) build(p string, b *Build) {
	if b.Context != "" {
		v.relPath(p+".context", b.Context)
	}
	if b.Dockerfile != "" {
		v.relPath(p+".dockerfile", b.Dockerfile)
	}
	if b.Target != "" && !stageName.MatchString(b.Target) {
		v.invalid(p+".target", "%q is not a build stage name", b.Target)
	}
	for _, k := range slices.Sorted(maps.Keys(b.Args)) {
		if k == "" || strings.ContainsAny(k, "= \t\n") {
			v.invalid(joinKey(p+".args", k), "%q is not a build argument name", k)
		}
	}
}

func (v *validator) relPath(p, s string) {
	clean := path.Clean(strings.ReplaceAll(s, `\`, "/"))
	switch {
	case strings.TrimSpace(s) == "":
		v.invalid(p, "is blank")
	case path.IsAbs(clean) || len(s) > 1 && s[1] == ':':
		v.invalid(p, "%q is absolute; write it relative to the manifest", s)
	case clean == ".." || strings.HasPrefix(clean, "../"):
		v.invalid(p, "%q leaves the repository; it must stay inside the directory of the manifest", s)
	case strings.ContainsRune(s, 0):
		v.invalid(p, "contains a NUL byte")
	}
}

func (v *validator) command(p string, c Command) {
	switch {
	case c.Exec != nil && len(c.Exec) == 0:
		v.invalid(p, "is an empty list; leave the field out to use the image's default")
	case c.Exec != nil && c.Exec[0] == "":
		v.invalid(p+"[0]", "is empty; the first element is the program to run")
	case c.Exec == nil && c.Shell != "" && strings.TrimSpace(c.Shell) == "":
		v.invalid(p, "is blank")
	}
}

func (v *validator) quantity(p string, q Quantity, lo, hi resource.Quantity, rng string) {
	if q == "" {
		return
	}
	val, err := q.Value()
	if err != nil {
		v.invalid(p, "%s (examples: 250m, 0.5, 2 for cpu; 128Mi, 1Gi for memory)", err)
		return
	}
	if val.Cmp(lo) < 0 || val.Cmp(hi) > 0 {
		v.invalid(p, "%s is out of range (%s)", q, rng)
	}
}

func (v *validator) database(m *Manifest) {
	d := m.Database
	switch d.Provider {
	case "container":
		if d.URLFrom != "" {
			v.invalid("database.url_from", "is only read with provider url")
		}
	case "url":
		if d.URLFrom == "" {
			v.invalid("database.url_from", "is required with provider url: name the variable in af's environment that holds the URL")
		} else if !envName.MatchString(d.URLFrom) {
			v.invalid("database.url_from", "%q is not an environment variable name", d.URLFrom)
		}
		if d.Engine != "" {
			v.invalid("database.engine", "is only read with provider container")
		}
		if d.Version != "" {
			v.invalid("database.version", "is only read with provider container")
		}
	}
	if d.EnvName != "" {
		if !envName.MatchString(d.EnvName) {
			v.invalid("database.env_name", "%q is not an environment variable name", d.EnvName)
		} else if proxyNames[strings.ToUpper(d.EnvName)] {
			v.invalid("database.env_name", "%q is a proxy variable af sets itself", d.EnvName)
		}
	}
	if d.Version != "" && !regexp.MustCompile(`^[0-9]+(\.[0-9]+)*$`).MatchString(d.Version) {
		v.invalid("database.version", "%q is not a version number like 16 or 8.4", d.Version)
	}
}

func (v *validator) egress(e *Egress) {
	type key struct{ host, ports string }
	seen := map[key]int{}
	for i, r := range e.Rules {
		p := fmt.Sprintf("egress.rules[%d]", i)
		switch {
		case r.Host != "" && r.CIDR != "":
			v.invalid(p+".cidr", "is given together with host; a rule names one of them")
		case r.Host == "" && r.CIDR == "":
			v.invalid(p+".host", "is required (or cidr): a rule names the hosts or addresses it decides for")
		case r.Host != "":
			if _, err := ParseHostPattern(r.Host); err != nil {
				v.invalid(p+".host", "%q %s", r.Host, err)
			}
		default:
			if pr, err := ParseRange(r.CIDR); err != nil {
				v.invalid(p+".cidr", "%q %s", r.CIDR, err)
			} else if c, ok := clusterRangeOverlap(pr); ok {
				v.warn(p+".cidr", "%q overlaps %s, where clusters commonly put their pods, Services and nodes; af never lets the sidecar into the cluster's own ranges (it discovers them), but name only the range of what the environment must reach", r.CIDR, c)
			}
		}
		ports := map[int]bool{}
		for j, port := range r.Ports {
			pp := fmt.Sprintf("%s.ports[%d]", p, j)
			switch {
			case port < 1 || port > 65535:
				v.invalid(pp, "%d is not a port (1-65535)", port)
			case ports[port]:
				v.invalid(pp, "%d is listed twice", port)
			}
			ports[port] = true
		}
		sorted := append([]int(nil), r.Ports...)
		sort.Ints(sorted)
		k := key{strings.ToLower(strings.TrimSuffix(r.Host, ".")) + r.CIDR, fmt.Sprint(sorted)}
		if j, dup := seen[k]; dup && k.host != "" {
			v.invalid(p, "repeats egress.rules[%d] (same host and ports); keep one", j)
		}
		seen[k] = i
	}
}

func (v *validator) github(g *GitHub) {
	if g.Label != "" {
		switch {
		case len(g.Label) > 50:
			v.invalid("github.label", "is %d characters; GitHub labels have at most 50", len(g.Label))
		case strings.TrimSpace(g.Label) != g.Label || strings.ContainsAny(g.Label, "\n\r\t,"):
			v.invalid("github.label", "%q is not a label name (no surrounding spaces, commas or line breaks)", g.Label)
		case g.ForkPolicy != "" && g.ForkPolicy != "label":
			v.warn("github.label", "is only read with fork_policy label; fork_policy is %s", g.ForkPolicy)
		}
	}
}
