// Package manifest reads, defaults and validates af.yaml, the user's contract with af.
//
// Parse turns bytes into a Manifest and a list of every problem found, each naming the path of
// the field at fault (services.web.port) and an AF code. Unknown fields are problems, not
// silently ignored. Schema renders the JSON Schema editors use, generated from the types in
// this file: the struct tags are the single source of names, defaults, enums and documentation.
//
// Struct tags read by this package, besides json:
//
//	doc:"..."        the field's documentation (schema description)
//	enum:"a|b"       the allowed values of a string
//	default:"..."    the default applied when the field is absent (schema default)
//	required:"true"  the field must be present
//	min:"N" max:"N"  bounds of an integer
package manifest

// Manifest is af.yaml.
type Manifest struct {
	Name     string              `json:"name" required:"true" doc:"The application's name: a DNS label (lower-case letters, digits and '-', at most 40 characters). Used in labels and as the environment name for manual runs."`
	Runtime  Runtime             `json:"runtime" required:"true" doc:"Where environments run."`
	Services map[string]*Service `json:"services" required:"true" doc:"The services of one environment, by name. A name is a DNS label of at most 40 characters that does not start with 'af-'; it is also the name other services reach it by."`
	Database *Database           `json:"database,omitempty" doc:"The database the environment uses, if any."`
	Egress   Egress              `json:"egress,omitempty" doc:"What the environment may reach outside itself. Every outbound connection goes through the environment's sidecar, which decides by these rules."`
	GitHub   GitHub              `json:"github,omitempty" doc:"What af reports on a pull request, and how it treats pull requests from forks."`
	Limits   Limits              `json:"limits,omitempty" doc:"The ceilings a pull request's environment is held to. Read from the default branch's af.yaml only: a pull request's own limits are ignored."`
}

// Limits are the ceilings a pull request's services are held to: a service that asks for more
// gets the ceiling, and the pull request's comment says so. The action reads them from the base
// branch's af.yaml only; af up on a developer's machine does not apply them.
type Limits struct {
	Replicas int      `json:"replicas,omitempty" default:"3" min:"1" max:"20" doc:"The most instances of one service a pull request's environment runs."`
	CPU      Quantity `json:"cpu,omitempty" default:"1" doc:"The most CPU one instance of a pull request's service may have (a Kubernetes quantity: 500m, 2). From 1m to 64."`
	Memory   Quantity `json:"memory,omitempty" default:"1Gi" doc:"The most memory one instance of a pull request's service may have (a Kubernetes quantity: 512Mi, 2Gi). From 16Mi (af's gate runs first in each pod, within its size) to 256Gi."`
}

// Runtime says where and how environments run.
type Runtime struct {
	Provider          string   `json:"provider" required:"true" enum:"kubernetes|local" doc:"The runtime. 'kubernetes' places each environment in its own namespace. 'local' (containers on this machine) is accepted by the schema but not yet available: af up refuses it with AF-RUN-001."`
	KubeconfigContext string   `json:"kubeconfig_context,omitempty" doc:"The kubeconfig context to use. When empty, af uses --context, else the kubeconfig's current context."`
	NamespacePrefix   string   `json:"namespace_prefix,omitempty" default:"af-env-" doc:"Prefix of every environment's namespace: lower-case letters, digits and '-', starting with a letter, at most 20 characters."`
	Domain            string   `json:"domain,omitempty" doc:"DNS domain under which web services get preview URLs, <env>-<service>.<domain>. Without it no Ingress is created and no URL is printed."`
	IngressClass      string   `json:"ingress_class,omitempty" doc:"IngressClass of the preview Ingresses. Only read when domain is set; empty uses the cluster's default class."`
	Registry          string   `json:"registry,omitempty" doc:"Repository prefix images are pushed to for clusters that pull (e.g. ghcr.io/acme/previews). Images are deployed by digest."`
	TTL               Duration `json:"ttl,omitempty" default:"72h" doc:"How long an environment may live before the reaper removes it: a duration such as 72h, 90m or 3d, from 10m to 90d."`
}

// Service is one service of the environment.
type Service struct {
	Kind       string            `json:"kind,omitempty" enum:"web|worker|cron" doc:"web: serves HTTP on port and gets a preview URL. worker: runs continuously, may listen on port for other services. cron: runs on schedule. Default: web when port is set, else worker."`
	Image      string            `json:"image,omitempty" doc:"A prebuilt image reference. Exactly one of image and build is required."`
	Build      *Build            `json:"build,omitempty" doc:"How to build the service's image. Exactly one of image and build is required."`
	Command    Command           `json:"command,omitzero" doc:"What to run instead of the image's default. A list is run as it is (exec form); a string is run by /bin/sh -c, so the image needs a shell."`
	Port       int               `json:"port,omitempty" min:"1" max:"65535" doc:"The TCP port the service listens on. Required for web services."`
	HealthPath string            `json:"health_path,omitempty" doc:"An HTTP path, starting with '/', that answers 2xx or 3xx when the service is ready. Requires port. Without it a service is ready when its port accepts a connection."`
	Migrate    Command           `json:"migrate,omitzero" doc:"A command run once, to completion, before the service starts (a Job on Kubernetes, never retried). Same forms as command."`
	Replicas   int               `json:"replicas,omitempty" default:"1" min:"1" max:"20" doc:"How many instances run. All must be ready for the service to be ready."`
	Resources  *Resources        `json:"resources,omitempty" doc:"The size of one instance: requested and limited to the same figures. A dimension not named is neither requested nor limited."`
	Schedule   string            `json:"schedule,omitempty" doc:"Cron services only, and required for them: five fields (minute hour day-of-month month day-of-week) or @hourly, @daily, @weekly, @monthly, @yearly."`
	Env        map[string]string `json:"env,omitempty" doc:"Environment variables, name to value. Values are strings: quote numbers and booleans. The proxy variables are set by af and cannot be set here."`
	DependsOn  []string          `json:"depends_on,omitempty" doc:"Services that must be ready before this one starts."`
	// MigrateAfter is read by the runtime's start order (deps) and by validation.
	MigrateAfter []string `json:"migrate_after,omitempty" doc:"Services that must be ready before this service's migration runs. Requires migrate. Without it the migration runs as soon as the probe has passed, beside the services this one depends on: it needs only the database."`
}

// Build says how to build a service's image.
type Build struct {
	Context    string            `json:"context" required:"true" doc:"The build context: a directory relative to the manifest, inside the repository."`
	Dockerfile string            `json:"dockerfile,omitempty" default:"Dockerfile" doc:"The Dockerfile, relative to the context."`
	Target     string            `json:"target,omitempty" doc:"The build stage to build, for multi-stage Dockerfiles."`
	Args       map[string]string `json:"args,omitempty" doc:"Build arguments, name to value. Values are strings."`
}

// Resources is the size of one instance.
type Resources struct {
	CPU    Quantity `json:"cpu,omitempty" doc:"CPU as a Kubernetes quantity: 250m, 0.5, 2. From 1m to 64."`
	Memory Quantity `json:"memory,omitempty" doc:"Memory as a Kubernetes quantity: 128Mi, 1Gi. From 16Mi (af's gate runs first in each pod, within its size) to 256Gi."`
}

// Database is the environment's database.
type Database struct {
	Provider string `json:"provider" required:"true" enum:"container|url" doc:"container: each environment gets a database branch in a container on the machine that runs af (local runtime only; the kubernetes runtime refuses it with AF-RUN-044). url: a database the environment can already reach."`
	Engine   string `json:"engine,omitempty" enum:"postgres|mysql" doc:"container only: the database engine. Default postgres."`
	Version  string `json:"version,omitempty" doc:"container only: the engine's major version, e.g. 16."`
	URLFrom  string `json:"url_from,omitempty" doc:"url only, and required for it: the name of the environment variable, in af's own environment (e.g. a CI secret), that holds the database URL."`
	EnvName  string `json:"env_name,omitempty" default:"DATABASE_URL" doc:"The variable services receive the database URL in."`
}

// Egress is what the environment may reach outside itself.
type Egress struct {
	Default string       `json:"default,omitempty" default:"block" enum:"block|allow|capture" doc:"The decision for a host no rule matches. capture answers locally and keeps the request for af inbox."`
	Rules   []EgressRule `json:"rules,omitempty" doc:"Per-host decisions. The most specific matching rule wins: an exact host over any wildcard, then the pattern with more literal labels, then a rule that names ports over one that does not; among equals, the first listed. A cidr rule decides for connections to an address; among cidr rules the longest prefix wins."`
}

// EgressRule decides for the hosts its pattern matches, or for the addresses its range holds.
type EgressRule struct {
	Host  string `json:"host,omitempty" doc:"A host name (api.stripe.com), '*.' followed by a domain (one or more labels before it: *.stripe.com matches a.stripe.com and a.b.stripe.com, not stripe.com), or a name with '*' as whole labels elsewhere (each '*' exactly one label: api.*.example.org). Exactly one of host and cidr."`
	CIDR  string `json:"cidr,omitempty" doc:"An address range (10.20.0.0/16) instead of a host: the rule decides for connections to addresses in it, and with mode allow it lets the sidecar connect to those addresses even though they are private, for a database the environment must reach. Never link-local or loopback, at most a /8 (IPv6: /32). Exactly one of host and cidr."`
	Ports []int  `json:"ports,omitempty" doc:"The destination ports the rule applies to. Empty: every port."`
	Mode  string `json:"mode,omitempty" default:"allow" enum:"allow|block|capture" doc:"allow lets the connection through; block refuses it; capture answers it locally and keeps it for af inbox (plain HTTP and SMTP; a TLS connection to a captured host is refused, because the sidecar does not terminate TLS)."`
}

// GitHub says what af reports on a pull request.
type GitHub struct {
	Comment    *bool  `json:"comment,omitempty" default:"true" doc:"Post one sticky comment with the preview URLs, the probe's verdicts and each service's state."`
	Check      *bool  `json:"check,omitempty" default:"true" doc:"Create a check run with the same facts and a real conclusion."`
	Deployment *bool  `json:"deployment,omitempty" default:"true" doc:"Create a deployment and its status with the environment URL."`
	ForkPolicy string `json:"fork_policy,omitempty" default:"label" enum:"label|never|always" doc:"Pull requests from forks, read from the default branch only: label runs a fork's commit once a maintainer approved that very commit (a '/af approve <full sha>' comment; under pull_request_target, the label); never runs none; always runs every one, unapproved."`
	Label      string `json:"label,omitempty" default:"af-preview" doc:"The label that approves widening egress, and a fork's pull request under pull_request_target (fork_policy label). Read from the default branch only."`
}
