// Package verdict is the conformance suite's roster (every behaviour, which are containment,
// what each requires) and the reader that turns a `go test -json` report of the suite into a
// claim, or refuses to. It has no test code in it, so the af binary can read reports and list
// the roster without linking the suite (package conformance) or the testing package.
package verdict

// Requirement is a capability a behaviour needs from the runtime under test. A behaviour
// whose requirement the runtime does not declare is skipped by name, with the reason;
// containment behaviours have none and cannot be skipped by anything.
type Requirement string

// Requirements, each one field of runtime.Capabilities.
const (
	Always     Requirement = ""
	Ingress    Requirement = "ingress"
	Replicas   Requirement = "replicas"
	Resources  Requirement = "resources"
	Migrations Requirement = "migrations"
	// NetLog: the runtime reaches what an environment saw (its sidecar's decisions and inbox,
	// its services' logs) and delivers into it (runtime.Observer).
	NetLog Requirement = "netlog"
)

// Behaviour is one named, described check of a runtime.
type Behaviour struct {
	Name        string
	Description string
	Requires    Requirement
	// Containment behaviours must run and pass on every runtime: no capability, knob or
	// -run filter may skip them.
	Containment bool
	// Slow behaviours start instances of their own; Options.SkipSlow skips them, unless they
	// are containment behaviours, which nothing skips.
	Slow bool
	// Route: the behaviour tries a route out by address, which only the cluster's enforcement
	// of the environment's NetworkPolicies closes, so a cluster without an enforcer fails it by
	// an escape (the negative controls require exactly that). The other containment behaviours
	// are held by af's own sidecar (a name it does not resolve: egress/unlisted-host-refused,
	// egress/proxy-ignoring-client) or check a property (a token absent, an allowed host
	// reached).
	Route bool
}

// RootTest is the name of the suite's root test; every behaviour is a subtest of it.
const RootTest = "TestConformance"

// StartupProof is the name of the immediate-startup proof's test.
const StartupProof = "TestImmediateStartupCannotBypassContainment"

// Roster is every behaviour, in the order the suite runs them. Later behaviours use what
// earlier ones brought up (the environments are made once, when first needed), and the down
// behaviours come last.
var Roster = []Behaviour{
	{Name: "capabilities/identity", Description: "the runtime names itself as the manifest does"},
	{Name: "up/refuses-no-environment-id", Description: "up without an environment id is refused before anything is created"},
	{Name: "up/starts-a-service", Description: "up starts a service and reports it running"},
	{Name: "up/reachable-url", Description: "a web service gets a preview URL that answers", Requires: Ingress},
	{Name: "up/idempotent", Description: "a second up converges and creates no duplicates"},
	{Name: "up/dependencies-first", Description: "a service starts only after the services it depends on are ready"},
	{Name: "up/cycle-reported", Description: "a dependency cycle is reported, not waited on"},
	{Name: "up/missing-dependency-reported", Description: "a dependency the manifest does not define is reported"},
	{Name: "up/failed-migration-blocks-service", Description: "a service whose migration failed never starts", Requires: Migrations, Slow: true},
	{Name: "up/failed-service-findable", Description: "a service that failed stays findable, with its reason", Slow: true},
	{Name: "up/instances-asked", Description: "replicas become that many running instances", Requires: Replicas},
	{Name: "up/size-applied", Description: "the size asked is the size the instances run with", Requires: Resources},
	{Name: "capabilities/declared-match-implemented", Description: "the capabilities a runtime declares are the ones it implements, and what it does not declare it refuses"},
	{Name: "status/running-services", Description: "status reports the running services and their instances"},
	{Name: "status/exit-code", Description: "status reports the exit code of a service that exited", Slow: true},
	{Name: "status/unknown-environment-empty", Description: "status of an environment that does not exist is empty"},
	{Name: "inventory/lists-and-attributes", Description: "the inventory lists live resources and attributes them to environments"},
	{Name: "egress/no-policy-nothing-out", Description: "with no egress rules nothing gets out", Containment: true, Route: true, Slow: true},
	{Name: "egress/allowed-host-reached", Description: "a host an allow rule names is reached", Containment: true, Slow: true},
	{Name: "egress/unlisted-host-refused", Description: "a host no rule names is refused", Containment: true, Slow: true},
	{Name: "egress/proxy-ignoring-client", Description: "a client that ignores the proxy variables is contained too", Containment: true, Slow: true},
	{Name: "egress/no-bypass-by-address", Description: "connecting to an address instead of a name does not get out", Containment: true, Route: true, Slow: true},
	{Name: "egress/no-metadata", Description: "the metadata endpoint cannot be reached", Containment: true, Route: true, Slow: true},
	{Name: "egress/no-bypass-by-udp", Description: "UDP to a public resolver does not get out", Containment: true, Route: true, Slow: true},
	{Name: "egress/names-do-not-cross", Description: "one environment's names do not resolve or connect from another", Containment: true, Route: true, Slow: true},
	{Name: "egress/no-api-server", Description: "the cluster API server cannot be reached", Containment: true, Route: true, Slow: true},
	{Name: "egress/no-token", Description: "no instance has a service-account token", Containment: true, Slow: true},
	{Name: "egress/no-bypass-by-ipv6-link-local", Description: "nothing on the instance's IPv6 segment (another environment's instance, the cluster resolver, the node) answers it over link-local", Containment: true, Route: true, Slow: true},
	{Name: "egress/no-node-access", Description: "the node the instance runs on cannot be reached at its own address, NodePort range included", Containment: true, Route: true, Slow: true},
	{Name: "observe/blocked-host-logged", Description: "a refused request is in the sidecar's decision log, with its host, the rule that refused it and the address of the instance that made it", Requires: NetLog, Slow: true},
	{Name: "observe/allowed-host-logged", Description: "an allowed request is in the sidecar's decision log, with its host and the rule that allowed it", Requires: NetLog, Slow: true},
	{Name: "observe/capture-in-inbox", Description: "a mail and an HTTP request to captured hosts arrive in the inbox, a credential header redacted", Requires: NetLog, Slow: true},
	{Name: "observe/logs-of-a-service", Description: "a service's own log lines are read through the runtime, by instance", Requires: NetLog},
	{Name: "observe/logs-of-a-crashed-service", Description: "the last lines of a crashed service's previous container are read", Requires: NetLog, Slow: true},
	{Name: "observe/webhook-reaches-service", Description: "a signed webhook delivered through the runtime reaches a service, which verifies it; a wrongly signed one is refused", Requires: NetLog, Slow: true},
	{Name: "down/removes-everything", Description: "down removes everything up created"},
	{Name: "down/never-up-succeeds", Description: "down of an environment never brought up succeeds"},
	{Name: "down/idempotent", Description: "a second down succeeds and changes nothing"},
	{Name: "down/only-its-own", Description: "down leaves another environment and an unmanaged namespace untouched"},
}

// NegativeControlMarker is logged by a conformance run whose runtime has its own containment
// checks off, so that a negative control measures the cluster by the suite's attempts alone.
// The reader refuses such a report as a claim, and requires it of a negative control.
const NegativeControlMarker = "AF-CONFORMANCE-NEGATIVE-CONTROL"

// Escape and Broken start the suite's failure lines: Escape where a route got out, Broken
// where the suite could not measure (a control that did not answer, an environment that did
// not come up, an attempt that could not run, something that should have worked and did not).
const (
	Escape = "ESCAPED:"
	Broken = "BROKEN:"
)
