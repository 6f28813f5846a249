package main

// make test's plan, as one table: every phase, in order, with what runs beside what and why.
// `testrun test` runs it (hack/test.sh builds it and calls it); `-stage` runs one
// stage of it (make unit, make integration); `-n` prints it. What must stay shell stays in
// hack/: the apt packages (deps.sh), the private container daemon (dockerd.sh), the
// conformance run that make conformance also is (conformance.sh).
//
// The integration stage is the real test cluster (testcluster/), brought up, used, and always
// taken down again, even when a phase fails or the run is interrupted:
//
//  1. kube-router enforcing, holes closed: the testcluster suite, the gate behind 20 pod
//     starts (five at a time), the engine image in containerd, the build tests and af up from
//     the command line beside af up publishing archives and the startup window's measurement,
//     deploy/ applied as written (the CI identity's admission policies, the App), the
//     Kubernetes runtime (four tests at a time), the GitHub Action under nektos/act beside
//     conformance, which the verdict reader must accept with 0 skipped, and the GitHub App
//     (last: it restarts the API server).
//  2. the same cluster with its two holes open (IPv6 in pods, kube-router's NodePort
//     exemption), read off the machine by each negative control before it claims anything;
//     together: af up refuses naming the link-local and node routes, and the conformance
//     negative control, whose reader requires exactly those two behaviours to fail by an
//     escape and everything else to pass.
//     2b. dual-stack, kube-router with IPv6 and the link-local rule: the IPv6 routes answer a
//     pod without policies and default-deny closes each; af up of the example is contained
//     with every IPv6 route denied; 2c. then with kube-router IPv4-only (its IPv6 hole), af up
//     refuses naming the IPv6 routes.
//  3. kube-network-policies, hardened (IPv6 off in pods, pods' connections to the node queued
//     to it): the testcluster suite's enforcement tests, the gate behind 20 pod starts and the
//     watch; 3b. then with its holes open, one after the other: af up refuses naming the
//     link-local, node and API server routes, and the conformance negative control requires
//     exactly those behaviours to fail by an escape; 3c. the holes closed by deploy/harden as
//     on kind: af up of the example, and conformance, which the verdict reader must accept
//     with 0 skipped. 3d. Cilium: the controls, the gate, af up of the example, af check and
//     deploy/harden, and conformance.
//  4. no enforcer, together: default-deny blocks nothing; af up refuses with AF-RUN-043 naming
//     the routes and runs no service image; so does the action under act, failing its check;
//     and the conformance negative control, every behaviour that tries a route failing by an
//     escape and every other behaviour passing.
//  5. down, and nothing is left.
//
// Phases of one cluster state that each must refuse run together: load cannot make a refusal
// pass, only slow it.

import (
	"context"
	"io"
	"strings"
)

// Stages of the plan.
const (
	stageDeps        = "deps"
	stageLint        = "lint"
	stageUnit        = "unit"
	stageIntegration = "integration"
)

// entry is one line of the plan: a heading, a phase, phases run together, or an action.
type entry struct {
	stage string
	// say is printed as a heading ("== 1. cluster with kube-router").
	say string
	// phase is run through the reader and recorded.
	phase *phase
	// together runs its lanes at once, each lane's phases one after another; each lane's
	// output is held and printed whole when all have ended, and the entry fails when any did.
	together []lane
	// do is an action of the plan that is no phase (the container daemon, the environment).
	do     func(ctx context.Context, r *runner) error
	doName string
}

// lane is phases run one after another beside other lanes.
type lane struct {
	name   string
	phases []phase
}

// phase is one phase: go test through the reader, or a command (step).
type phase struct {
	name string
	kind string // "go" or "step"
	dir  string // go test -C
	// verbose prints every test's output (the cluster phases, whose logs are the diagnosis).
	verbose  bool
	args     []string
	env      []string
	report   string
	negative bool
}

// clusterGo is a go test phase of the cluster: every test's output, the race detector (the
// cluster tests' waits, teardowns and probes run goroutines of their own), 40 minutes at most.
func clusterGo(name string, args ...string) phase {
	return phase{name: name, kind: "go", verbose: true, args: append([]string{"-race", "-count=1", "-timeout", "40m"}, args...)}
}

// unitGo is a unit phase: go test -race over a module.
func unitGo(name, dir string) phase {
	return phase{name: name, kind: "go", dir: dir, args: []string{"-race", "-count=1", "./..."}}
}

func command(name string, args ...string) phase {
	return phase{name: name, kind: "step", args: args}
}

// conformance is make conformance as a phase, its report counted: a negative control's
// (--expect-refusal) is judged by the verdict reader, which hack/conformance.sh runs.
func conformance(name, report string, env []string, args ...string) phase {
	p := phase{name: name, kind: "step", report: report, args: append([]string{"./hack/conformance.sh"}, args...),
		env: append([]string{"AF_CONFORMANCE_REPORT=" + report}, env...)}
	p.negative = len(args) > 0 && args[0] == "--expect-refusal"
	return p
}

func run1(p phase) entry { return entry{stage: stageIntegration, phase: &p} }

func say(s string) entry { return entry{stage: stageIntegration, say: s} }

func together(lanes ...lane) entry { return entry{stage: stageIntegration, together: lanes} }

func one(name string, p phase) lane { return lane{name: name, phases: []phase{p}} }

// only is a -run or -skip pattern naming exactly these tests.
func only(names ...string) string { return "^(" + strings.Join(names, "|") + ")$" }

// plan is make test.
func plan() []entry {
	const (
		kr  = "./runtime/kubernetes/"
		tc  = "./testcluster/"
		act = "./action/"
	)
	afcluster := func(name string, args ...string) phase {
		return command(name, append([]string{"bin/afcluster"}, args...)...)
	}
	return []entry{
		{stage: stageDeps, phase: ptr(command("deps", "./hack/deps.sh", "test"))},
		{stage: stageDeps, doName: "the modules of af and of the example", do: func(ctx context.Context, r *runner) error {
			if err := r.command(ctx, io.Discard, nil, "go", "mod", "download"); err != nil {
				return err
			}
			return r.command(ctx, io.Discard, nil, "go", "-C", "examples/shop", "mod", "download")
		}},
		{stage: stageLint, phase: ptr(command("lint", "make", "-s", "lint"))},
		{stage: stageUnit, phase: ptr(unitGo("unit", ""))},
		{stage: stageUnit, phase: ptr(unitGo("unit-example", "examples/shop"))},

		{stage: stageIntegration, doName: "AF_TESTCLUSTER=1 and a private container daemon for the build tests (no iptables, no masquerade, no bridge)", do: func(ctx context.Context, r *runner) error {
			r.env = append(r.env, "AF_TESTCLUSTER=1")
			return r.dockerd(ctx)
		}},
		say("1. cluster with kube-router"),
		run1(afcluster("cluster-up-kube-router", "ensure", "-enforcer", "kube-router")),
		run1(clusterGo("testcluster", "-skip", only("TestNegativeControl", "TestNothingLeftAfterDown", "TestEnforcerAway", "TestLinkLocalRule", "TestStartupWindow"), "./testcluster/...")),
		// Alone: it counts every packet that arrives at the fake internet's public address, and
		// the testcluster suite's pods send there. Its control pod, in a namespace without
		// policies, must see the routes open; beside other pods' churn its gate once said
		// contained: the bridge took the lowest MAC of its ports, so a deleted pod changed the
		// pods' gateway for a moment (the bridge's MAC is fixed now, docs/gate.md).
		run1(clusterGo("gate-on-cluster", "-run", only("TestGatedPodsOnTheCluster"), "./gate/")),
		// Side by side, each in its own process: the engine image, the publishers and af up from
		// the command line; af up publishing archives with credentials from DOCKER_CONFIG
		// (t.Setenv: no other test of its process may run beside it); the startup window's ten
		// pods, measured one after another (it asserts no bound: the gate closes that window);
		// and what an operator applies, applied as written: deploy/ci's identity tried against
		// the admission policies, and the App from deploy/app with its image made by its name.
		together(
			lane{name: "images", phases: []phase{
				clusterGo("engine-image-in-containerd", "-run", only("TestEngineImageRunsInContainerd"), "./images/engine/"),
				clusterGo("images", "./images/"),
				clusterGo("af-up-cli", "-run", only("TestUpBuildsPublishesAndRuns"), "./cmd/af/internal/cmd/root/"),
			}},
			one("archives", clusterGo("runtime-archives", "-run", only("TestUpPublishesArchives"), kr)),
			one("window", clusterGo("startup-window", "-run", only("TestStartupWindow"), tc)),
			one("deploy", clusterGo("deploy-as-written", "-skip", only("TestHardenOnTheShape", "TestHardenKeepsItsRules", "TestHardenLeavesCiliumAlone"), "./deploy/")),
		),
		// Four at a time: tests that touch only their own environments run beside each other
		// (those that stop the enforcer, add a node or take most of its CPU run alone first:
		// besideOthers).
		run1(clusterGo("runtime", "-parallel", "4", "-skip", only("TestConformance", "TestImmediateStartupCannotBypassContainment", "TestUpRefusedWithoutEnforcer", "TestUpRefusedWithHoles", "TestUpPublishesArchives"), "./runtime/...")),
		// The GitHub Action under nektos/act (its own image in the private daemon, the GitHub
		// stand-in, this cluster: opened, synchronize, closed) beside conformance, which counts
		// only its own environments (their prefix) when it checks that it left nothing behind.
		together(
			one("action", clusterGo("action-under-act", "-run", "^TestActionUnderAct(Stock|ForkPath|Documented)?$", act)),
			one("conformance", conformance("conformance", "bin/conformance-report.jsonl", nil)),
		),
		// The GitHub App: closed deliveries, the reaper (lost webhook, expired TTL), namespaces
		// that are not its own left untouched, and a teardown that outlives an API server
		// restart (last: the API server is stopped and started again; alone: its reaper would
		// sweep others' environments).
		run1(clusterGo("app-on-cluster", "-run", only("TestAppOnTheCluster", "TestAppFailover"), "./app/")),
		// The build tests are done; nothing of the daemon may be left for the after-down check.
		{stage: stageIntegration, doName: "the container daemon stopped", do: func(ctx context.Context, r *runner) error { return r.dockerdStop(ctx) }},

		say("2. the same cluster with IPv6 left on in pods and kube-router's NodePort exemption open (holes)"),
		run1(afcluster("holes-open", "holes", "open")),
		// The link-local rule alone closes the IPv6 hole, where a CNI has no tuning plugin (k3s):
		// what make k8s-conformance does in k3d's node, reproduced with the same enforcer and a
		// bridge CNI.
		run1(clusterGo("holes-link-local-rule", "-run", only("TestLinkLocalRule"), tc)),
		together(
			one("holes_up", clusterGo("holes-af-up-refused", "-run", only("TestUpRefusedWithHoles"), kr)),
			one("holes_conformance", conformance("holes-conformance-negative", "bin/conformance-holes.jsonl", nil,
				"--expect-refusal", "--escape", "egress/no-bypass-by-ipv6-link-local", "--escape", "egress/no-node-access")),
		),
		// The k3s shape hardened as an operator would: af check as af-ci names the holes with
		// their fix, deploy/harden applied as written closes them (af check contained); af up
		// on it; then its rules kept, left when it is deleted, and removed by its uninstall.
		say("2a. the same holes closed by deploy/harden (af's node agent), as on stock k3s"),
		run1(clusterGo("k3s-shape-harden", "-run", only("TestHardenOnTheShape"), "./deploy/")),
		// Side by side (kube-router decides in the kernel; each counts only its own
		// environments): af up of the example, and conformance. AF-NODEPORT refuses every pod's
		// connection to the host listener in the range, a plain pod's too:
		// egress/no-node-access's control comes from the node's own network there.
		together(
			one("k3s_example", clusterGo("k3s-shape-hardened-example", "-run", only("TestUpTheExample"), kr)),
			one("k3s_conformance", conformance("k3s-shape-hardened-conformance", "bin/conformance-k3s-hardened.jsonl", []string{"AF_CONFORMANCE_AS_IS=1"})),
		),
		run1(clusterGo("k3s-shape-harden-keeps", "-run", only("TestHardenKeepsItsRules"), "./deploy/")),

		say("2b. the cluster again, dual-stack (IPv4 and IPv6 pods, Services, node, fake internet and resolver), kube-router governing both"),
		run1(afcluster("cluster-up-dual-stack", "up", "-dual-stack", "-enforcer", "kube-router")),
		// Side by side: the controls (every IPv6 route answers a pod without policies, and
		// default-deny closes each), and af up of the example: contained, the probe's IPv6 routes
		// (public TCP, DNS, metadata, the link-local segment, the node at its IPv6 address) each
		// denied.
		together(
			one("ds_enforce", clusterGo("dual-stack-enforce", "-run", only("TestEnforce", "TestGuardCountersZero"), tc)),
			one("ds_example", clusterGo("dual-stack-example", "-run", only("TestUpTheExample"), kr)),
		),
		say("2c. the same cluster with an IPv4-only enforcer (kube-router without IPv6, no link-local rule)"),
		run1(afcluster("dual-stack-ipv4-only-enforcer", "holes", "open", "ipv6")),
		run1(clusterGo("dual-stack-af-up-refused", "-run", only("TestUpRefusedWithHoles"), kr)),

		say("3. the cluster again with kube-network-policies (an enforcer that decides each new connection in userspace, through NFQUEUE)"),
		run1(afcluster("cluster-up-kube-network-policies", "up", "-enforcer", "kube-network-policies")),
		run1(clusterGo("knp-testcluster", "-run", only("TestEnforce", "TestGuardCountersZero", "TestEnforcerAway"), tc)),
		// One after the other: this enforcer decides every new connection in userspace, and
		// beside the gate test's pods (five at a time, each gate trying its routes every 50 ms)
		// the sidecar's own connection to an allowed host waited 4.9 s and af up of the
		// example's transparent request failed (502); the gate test alone takes under two
		// minutes.
		run1(clusterGo("knp-gate-on-cluster", "-run", only("TestGatedPodsOnTheCluster"), "./gate/")),
		// Alone: the watch after the start, on this enforcer; it stops and starts it (SIGINT,
		// SIGTERM).
		run1(clusterGo("knp-watch", "-run", only("TestWatch"), kr)),
		// af up of the example and conformance on this enforcer run once, in 3c: on the same
		// enforcer with the same rules (package harden's), put in place by deploy/harden
		// instead of afcluster, so the product's agent is what they prove.

		say("3b. the same cluster with IPv6 left on in pods and pods' connections to the node not queued (its holes)"),
		run1(afcluster("knp-holes-open", "holes", "open")),
		// One after the other, unlike kube-router's holes: the negative control requires every
		// behaviour but the named escapes to pass, and this enforcer decides each new connection
		// in userspace; beside af up's probe (2026-12-05, CI) two more behaviours failed than
		// the escapes named.
		run1(clusterGo("knp-holes-af-up-refused", "-run", only("TestUpRefusedWithHoles"), kr)),
		run1(conformance("knp-holes-conformance-negative", "bin/conformance-knp-holes.jsonl", nil,
			"--expect-refusal", "--escape", "egress/no-bypass-by-ipv6-link-local", "--escape", "egress/no-node-access", "--escape", "egress/no-api-server")),
		say("3c. the same holes closed by deploy/harden, as on kind (kindnet enforces through kube-network-policies' library)"),
		run1(clusterGo("kind-shape-harden", "-run", only("TestHardenOnTheShape"), "./deploy/")),
		// af up of the example (contained; the resolver's first answer for a service's full
		// name) and conformance, accepted with 0 skipped, on kube-network-policies hardened by
		// the product's agent. One after the other: this enforcer decides each new connection
		// in userspace. Tried side by side by hand (2026-12-07): both passed, no attempt needed
		// its second try, but the queue's reader dropped 3,001 first packets (user_dropped) in
		// those 4 minutes: the margin is the retries'.
		run1(clusterGo("kind-shape-hardened-example", "-run", only("TestUpTheExample"), kr)),
		run1(conformance("kind-shape-hardened-conformance", "bin/conformance-kind-hardened.jsonl", []string{"AF_CONFORMANCE_AS_IS=1"})),
		run1(clusterGo("kind-shape-harden-keeps", "-run", only("TestHardenKeepsItsRules"), "./deploy/")),

		say("3d. the cluster again with Cilium (cilium-agent's eBPF datapath, without its operator): a third kind of enforcer"),
		run1(afcluster("cluster-up-cilium", "up", "-enforcer", "cilium")),
		// Then side by side (decided in the kernel; each uses only its own namespaces and counts
		// only its own environments): af up of the example, af check and deploy/harden, and
		// conformance.
		// Alone first: the agent stopped and killed (TestEnforcerAway: its datapath stays, the
		// policies hold, new pods wait for it) would hold up every other lane's pods.
		run1(clusterGo("cilium-testcluster", "-run", only("TestEnforce", "TestGuardCountersZero", "TestEnforcerAway"), tc)),
		// Alone, as on the other enforcers: it counts every packet that arrives at the fake
		// internet's public address, and conformance's controls send there (beside it, 6 did:
		// 2026-12-07, by hand).
		run1(clusterGo("cilium-gate-on-cluster", "-run", only("TestGatedPodsOnTheCluster"), "./gate/")),
		together(
			// af check as af-ci (contained, exit 0) before and after deploy/harden, which reads
			// Cilium off the node, adds nothing and says why; then its uninstall.
			lane{name: "cilium_example", phases: []phase{
				clusterGo("cilium-example", "-run", only("TestUpTheExample"), kr),
				clusterGo("cilium-af-check-harden", "-run", only("TestHardenLeavesCiliumAlone"), "./deploy/"),
			}},
			one("cilium_conformance", conformance("cilium-conformance", "bin/conformance-cilium.jsonl", []string{"ENFORCER=cilium"})),
		),

		say("4. the same cluster without an enforcer (negative controls)"),
		run1(afcluster("cluster-up-no-enforcer", "up", "-enforcer", "none")),
		{stage: stageIntegration, doName: "the container daemon again (the action under act)", do: func(ctx context.Context, r *runner) error { return r.dockerd(ctx) }},
		together(
			one("none_testcluster", clusterGo("none-testcluster", "-run", only("TestSmoke", "TestNegativeControl", "TestGuardCountersZero"), tc)),
			one("none_up", clusterGo("none-af-up-refused", "-run", only("TestUpRefusedWithoutEnforcer"), kr)),
			one("none_action", clusterGo("none-action-refused", "-run", only("TestActionUnderActNotContained"), act)),
			one("none_conformance", conformance("none-conformance-negative", "bin/conformance-no-enforcer.jsonl", nil, "--expect-refusal")),
			one("none_check", clusterGo("none-af-check-refused", "-run", only("TestCheckAsCI"), "./deploy/")),
		),
		{stage: stageIntegration, doName: "the container daemon stopped", do: func(ctx context.Context, r *runner) error { return r.dockerdStop(ctx) }},

		say("5. down, and nothing left"),
		run1(afcluster("cluster-down", "down")),
		run1(func() phase {
			p := clusterGo("nothing-left", "-run", only("TestNothingLeftAfterDown"), tc)
			p.env = []string{"AF_TESTCLUSTER_DOWN=1"}
			return p
		}()),
	}
}

func ptr(p phase) *phase { return &p }
