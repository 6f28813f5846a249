package failure

// Exit statuses. 0 is success; these are what a failure ends a command with.
const (
	// ExitFailure is a failure of the operation itself.
	ExitFailure = 1
	// ExitInput is bad input: a manifest, a flag, a name. Nothing was changed.
	ExitInput = 2
	// ExitRefused is a deliberate refusal: af will not do this here, on purpose.
	ExitRefused = 3
)

// The catalogue. Codes are never reused; a retired code stays, marked as retired in its title.
// docs/errors.md is generated from this table (make generate) and a test keeps it current.
var (
	Unavailable = &Entry{
		Code:  "AF-RUN-001",
		Title: "not available in this version",
		Exit:  ExitFailure,
		Means: "The command or feature exists in af's design but this build of af does not implement it yet. " +
			"Nothing was changed.",
		Do: "Run `af version` to see which build you have, and use a build that has the feature. " +
			"Do not work around it: af never pretends to have done what it cannot do.",
	}
	ClusterUnreachable = &Entry{
		Code:  "AF-RUN-002",
		Title: "cluster API unreachable or refused",
		Exit:  ExitFailure,
		Means: "af could not talk to the Kubernetes API server, or the server refused the credentials " +
			"af presented. Nothing was changed by this attempt.",
		Do: "Check the context af says it is using (`--context`, `runtime.kubeconfig_context`, or the " +
			"kubeconfig's current context), that `kubectl --context NAME get ns` works with the same " +
			"kubeconfig, and that the credentials have not expired.",
	}
	UsageInvalid = &Entry{
		Code:  "AF-RUN-003",
		Title: "invalid command line",
		Exit:  ExitInput,
		Means: "A command, flag or argument was not understood. Nothing was run.",
		Do:    "Run the command with `--help` to see what it takes.",
	}
	NotReady = &Entry{
		Code:  "AF-RUN-004",
		Title: "not ready in time",
		Exit:  ExitFailure,
		Means: "Something af started did not become ready before its deadline. The environment exists " +
			"but is not serving.",
		Do: "Read the reason af gives (image pull, scheduling, the gate not passing, a failing readiness " +
			"check), fix it and run `af up` again; `af status` shows each service. `af down` removes " +
			"the environment.",
	}
	ExitedDuringStart = &Entry{
		Code:  "AF-RUN-005",
		Title: "exited during start",
		Exit:  ExitFailure,
		Means: "A service's process exited before it became ready. The environment exists but that " +
			"service is not serving.",
		Do: "Read the exit code and the last log lines af shows, fix the service and run `af up` " +
			"again. `af down` removes the environment.",
	}
	MigrationFailed = &Entry{
		Code:  "AF-RUN-006",
		Title: "migration failed",
		Exit:  ExitFailure,
		Means: "A service's migrate command exited with a failure. It ran once and was not retried; the " +
			"service it belongs to, and the services that depend on it, were not started.",
		Do: "Read the exit code and the last log lines af shows, fix the migration and run `af up` " +
			"again: it runs the migration again. `af down` removes the environment.",
	}
	Interrupted = &Entry{
		Code:  "AF-RUN-007",
		Title: "interrupted",
		Exit:  ExitFailure,
		Means: "af was stopped (Ctrl-C or SIGTERM; the process exits with 130) while it was working. What " +
			"it had created so far stays as it was: nothing is half-written, but the environment may be " +
			"incomplete.",
		Do: "Run the same command again: `af up` converges from where it stopped, `af down` finishes " +
			"the removal.",
	}
	BuildFailed = &Entry{
		Code:  "AF-RUN-008",
		Title: "image could not be built",
		Exit:  ExitFailure,
		Means: "A service's image could not be built: no container daemon answered, the build failed, " +
			"or it ran out of time. Nothing was created in the cluster.",
		Do: "Read the build's last lines af shows and fix the Dockerfile or its context; or start a " +
			"container daemon (DOCKER_HOST names it); or build the image yourself and pass --image or " +
			"--image-archive.",
	}
	ManifestUnreadable = &Entry{
		Code:  "AF-RUN-010",
		Title: "manifest not found or unreadable",
		Exit:  ExitInput,
		Means: "af could not read the manifest file. Nothing was changed.",
		Do: "Run af from the repository root, where af.yaml lives, or name the file with `-f PATH`. " +
			"`-f -` reads the manifest from standard input.",
	}
	ManifestInvalid = &Entry{
		Code:  "AF-RUN-011",
		Title: "manifest is not valid",
		Exit:  ExitInput,
		Means: "The manifest has one or more problems; each is listed with the path of the field at " +
			"fault. Nothing was changed.",
		Do: "Fix every listed problem and run `af validate` until it reports the manifest valid. " +
			"The JSON Schema in manifest/af.schema.json gives editors completion and checks as you type.",
	}
	NameInvalid = &Entry{
		Code:  "AF-RUN-012",
		Title: "environment name cannot be derived",
		Exit:  ExitInput,
		Means: "The repository, pull request number or environment name given to af cannot make an " +
			"environment id. Nothing was changed.",
		Do: "Give a repository as OWNER/NAME, a pull request number of 1 or more, or an environment " +
			"name with at least one letter or digit.",
	}
	TeardownIncomplete = &Entry{
		Code:  "AF-RUN-030",
		Title: "teardown incomplete",
		Exit:  ExitFailure,
		Means: "af asked for the environment to be removed but it was still there when the wait ended; " +
			"usually a finalizer that nothing is clearing.",
		Do: "The message names what is holding it. Fix or remove that finalizer's owner, then run " +
			"`af down` again; it is safe to repeat.",
	}
	StillTerminating = &Entry{
		Code:  "AF-RUN-031",
		Title: "environment is still being removed",
		Exit:  ExitFailure,
		Means: "The environment's namespace is being deleted (an earlier `af down`, the reaper, or a " +
			"person), so nothing can be created in it until it is gone. Nothing was changed.",
		Do: "Wait until the namespace is gone and run `af up` again, or run `af down`, which waits for " +
			"it and names whatever holds it.",
	}
	NotPlaced = &Entry{
		Code:  "AF-RUN-040",
		Title: "could not be placed",
		Exit:  ExitFailure,
		Means: "The cluster's scheduler could not place a pod of the environment on any node.",
		Do: "Read the scheduler's reason af shows (resources, taints, node selectors). Smaller " +
			"`resources` or fewer `replicas` may fit; otherwise the cluster needs more capacity.",
	}
	DependencyCycle = &Entry{
		Code:  "AF-RUN-041",
		Title: "dependency cycle",
		Exit:  ExitInput,
		Means: "Services depend on each other in a circle, so no order can start them. Nothing was changed.",
		Do:    "Remove one `depends_on` entry from the cycle af names.",
	}
	DependencyMissing = &Entry{
		Code:  "AF-RUN-042",
		Title: "missing dependency",
		Exit:  ExitInput,
		Means: "A service's `depends_on` names a service the manifest does not define. Nothing was changed.",
		Do:    "Correct the name, or define that service under `services`.",
	}
	NotContained = &Entry{
		Code:  "AF-RUN-043",
		Title: "cluster does not contain the environment",
		Exit:  ExitRefused,
		Means: "af's probe, running under exactly the rules a service runs under, got out by a route " +
			"the environment's NetworkPolicies deny, or could not answer at all. The cluster's network " +
			"plugin is not enforcing NetworkPolicy for this namespace, so af refused to start any " +
			"application code. The namespace and its policies remain.",
		Do: "Run the environment on a cluster whose CNI enforces NetworkPolicy (Calico, Cilium, " +
			"kube-router, or k3s's embedded controller), then run `af up` again. `af down` removes " +
			"what was created.",
	}
	RuntimeCannot = &Entry{
		Code:  "AF-RUN-044",
		Title: "this runtime cannot do that",
		Exit:  ExitRefused,
		Means: "The manifest or the command asks for something the selected runtime cannot provide. " +
			"Nothing was changed.",
		Do: "Change the manifest as the message says (for example, a database the environment can " +
			"reach instead of a container on this machine), or use a runtime that can.",
	}
	ImagePublish = &Entry{
		Code:  "AF-RUN-046",
		Title: "image could not be published",
		Exit:  ExitFailure,
		Means: "af could not make a service image pullable by the cluster: the registry refused the push " +
			"(credentials, permissions, a name it will not take) or was unreachable, or the node import " +
			"failed. No pod was started with that image.",
		Do: "Read the registry's or the tool's answer af shows. Check the credentials in your docker " +
			"config (or the platform's keychain) for runtime.registry, then run `af up` again.",
	}
	NamespaceNotOurs = &Entry{
		Code:  "AF-RUN-045",
		Title: "namespace not created by af",
		Exit:  ExitRefused,
		Means: "A namespace with the environment's name exists but does not carry the label " +
			"dev.antifailure.managed=true, so af did not create it and will neither use nor delete it. " +
			"It was left untouched.",
		Do: "Choose another `runtime.namespace_prefix` or environment name, or remove that namespace " +
			"yourself if you are sure it is unused.",
	}
	CapacityShort = &Entry{
		Code:  "AF-RUN-047",
		Title: "sizes cannot be placed",
		Exit:  ExitFailure,
		Means: "The sizes the manifest asks for cannot fit the cluster's free capacity in any packing: " +
			"an instance fits no single node, or the total exceeds what is free. Nothing was created.",
		Do: "Lower the named service's `resources` or `replicas`, or free or add capacity; the message " +
			"names the dimension and the shortfall.",
	}
	ClusterLacks = &Entry{
		Code:  "AF-RUN-048",
		Title: "cluster lacks what af needs",
		Exit:  ExitFailure,
		Means: "The cluster does not have something the environment depends on, such as a cluster DNS " +
			"service for the sidecar to ask about the environment's own names. Nothing was started.",
		Do: "Read what af names; install it, or tell af where it is (the message names the option).",
	}
	ConformanceRefused = &Entry{
		Code:  "AF-RUN-049",
		Title: "conformance not proven",
		Exit:  ExitFailure,
		Means: "The conformance report does not prove the runtime conforms: a behaviour failed, was " +
			"skipped where nothing may skip it, never ran, or ran twice; the startup proof is missing; " +
			"or the report is not of this suite. Every reason is listed.",
		Do: "Fix what the reasons name and run the whole suite again (make conformance), without -run " +
			"filters or -count, then verify the new report.",
	}
	SidecarConfigInvalid = &Entry{
		Code:  "AF-RUN-050",
		Title: "sidecar configuration invalid",
		Exit:  ExitInput,
		Means: "The egress sidecar refused its configuration before opening any port; the environment " +
			"has no way out until it starts. Every problem is listed.",
		Do: "The runtime writes this configuration from the manifest: run `af validate`, and if the " +
			"manifest is valid, report the message as a defect in af.",
	}
	SidecarListen = &Entry{
		Code:  "AF-RUN-051",
		Title: "sidecar cannot listen",
		Exit:  ExitFailure,
		Means: "The egress sidecar could not open one of its ports (proxy, transparent HTTP/TLS, DNS, " +
			"SMTP, control), so it did not start.",
		Do: "The message names the address. Another process holds the port, or the sidecar lacks " +
			"NET_BIND_SERVICE for a port below 1024.",
	}
	ClusterRangesUnknown = &Entry{
		Code:  "AF-RUN-052",
		Title: "cluster ranges unknown",
		Exit:  ExitRefused,
		Means: "The manifest has a cidr egress rule, and af could not learn all of the cluster's own " +
			"address ranges (pods, Services, nodes): its identity may not list them, or the network " +
			"plugin keeps them to itself. Without them af cannot keep the rule from opening the " +
			"cluster's inside to the environment, so nothing was started.",
		Do: "Let af list nodes and servicecidrs (networking.k8s.io), or name the ranges in " +
			"AF_CLUSTER_CIDRS (comma-separated), or remove the cidr rule.",
	}
	ForwardRefused = &Entry{
		Code:  "AF-RUN-053",
		Title: "not allowed to reach the environment's pods",
		Exit:  ExitRefused,
		Means: "Reading what the environment saw (its sidecar's decisions and inbox) or sending a " +
			"webhook into it goes through a port-forward to one of its pods, and the cluster refused " +
			"af's identity that (pods/portforward). Nothing else was tried: af never reaches the " +
			"sidecar another way.",
		Do: "Grant the identity `get` and `create` on `pods/portforward` (the WebSocket tunnel is a " +
			"GET, SPDY a POST; deploy/ci's role has both, and its admission policy allows them in " +
			"af's namespaces only), or run the command with a context that has it.",
	}
	NothingArrived = &Entry{
		Code:  "AF-RUN-054",
		Title: "nothing arrived in the inbox",
		Exit:  ExitFailure,
		Means: "af inbox wait waited the whole timeout and the sidecar captured nothing that matched: " +
			"the environment did not send that mail or request, sent it to an address or host the " +
			"filter does not name, or sent it where the manifest's rules do not capture.",
		Do: "Run `af inbox list` to see what did arrive and `af net log --host HOST` to see what " +
			"the sidecar decided about it, then wait again with a longer --timeout if it is slow.",
	}
	WebhookRefused = &Entry{
		Code:  "AF-RUN-055",
		Title: "the service did not accept the webhook",
		Exit:  ExitFailure,
		Means: "af webhook trigger delivered the signed webhook and the service answered with a " +
			"status other than 2xx: its handler refused the signature, the event or the payload, " +
			"or the path is not its webhook endpoint. Its answer is printed above.",
		Do: "Check that --secret-env names the same secret the service verifies with, that --to " +
			"is its webhook path, and `af logs SERVICE` for what the handler said.",
	}
	CredentialUnbounded = &Entry{
		Code:  "AF-RUN-056",
		Title: "the credential reaches past af's namespaces",
		Exit:  ExitRefused,
		Means: "AF_REQUIRE_BOUNDED_CREDENTIAL is set and the API server, asked by server-side dry " +
			"run before anything was created, would let af's credential create a namespace without " +
			"af's label or pods in kube-system: whoever holds it could reach past the previews (a " +
			"privileged pod there is the node). Nothing was created.",
		Do: "Use the CI identity of deploy/ci with its admission policies applied " +
			"(`kubectl apply -f deploy/ci/`, docs/github.md), or unset AF_REQUIRE_BOUNDED_CREDENTIAL " +
			"to be warned instead.",
	}
	EnvironmentBusy = &Entry{
		Code:  "AF-RUN-057",
		Title: "another af up of this environment is running",
		Exit:  ExitFailure,
		Means: "Another run (named in the message) holds the environment while it brings it up, " +
			"and did not finish within the wait (AF_WRITER_WAIT, 10m by default). Nothing of this " +
			"run was applied to the environment; the other run's work is untouched.",
		Do: "Let the other run finish (or cancel it), then run af up again. In CI, give the " +
			"workflow a concurrency group per pull request so that runs queue instead of racing " +
			"(docs/github.md). A run that died stops renewing its hold, and is taken over 30 s later.",
	}
	EnvironmentRemoved = &Entry{
		Code:  "AF-RUN-058",
		Title: "the environment was removed while af up ran",
		Exit:  ExitFailure,
		Means: "The environment's namespace was deleted while af up was bringing it up: af down, " +
			"the pull request's closing (the App) or the reaper. Removal wins: this run stopped, " +
			"made nothing more, and no containment verdict of it counts.",
		Do: "Nothing, if the removal was meant (the pull request was closed). Otherwise run af up " +
			"again once the namespace is gone (`af status` says when).",
	}
	CheckNotContained = &Entry{
		Code:  "AF-RUN-059",
		Title: "af check found the cluster does not contain an environment",
		Exit:  ExitRefused,
		Means: "af check ran af up's own steps up to the probe in a throwaway namespace (removed " +
			"since) and the probe got out by the routes named, or could not answer. af up on this " +
			"cluster would be refused (AF-RUN-043) before any application code ran.",
		Do: "Apply the fix printed under each open route (the enforcer's own, or deploy/harden " +
			"for the holes af knows how to close: docs/runtime.md, \"af harden\"), then run af check " +
			"again. `af check -o json` gives every route's target and outcome.",
	}
	HardenFailed = &Entry{
		Code:  "AF-RUN-060",
		Title: "af harden could not keep its rules on the node",
		Exit:  ExitFailure,
		Means: "af's node agent could not read the node's packet filter or put a rule in place " +
			"(the message names the program and what it said). Rules it put in place earlier stay: " +
			"it never removes them except on an explicit uninstall.",
		Do: "Check that the agent runs as deploy/harden/harden.yaml has it (host network, NET_ADMIN, " +
			"NET_RAW and SYS_CHROOT, the node's root mounted at /host) and that the node has iptables " +
			"(it uses the node's own, so that its backend is the enforcer's).",
	}
	ActionInputInvalid = &Entry{
		Code:  "AF-GH-001",
		Title: "action input invalid",
		Exit:  ExitInput,
		Means: "An input of the af action (a `with:` key of the workflow step) is missing, unknown to " +
			"af or not in the form it takes. Nothing was created and nothing was reported on the pull request.",
		Do: "The message names the input and the form it takes; docs/github.md lists every input. " +
			"GitHub does not enforce `required: true` on action inputs, so af checks them itself.",
	}
	EventUnsupported = &Entry{
		Code:  "AF-GH-002",
		Title: "event not handled",
		Exit:  ExitInput,
		Means: "The workflow ran the af action for an event it does not handle, or the event's payload " +
			"(GITHUB_EVENT_PATH) could not be read. Nothing was created.",
		Do: "Run the action on pull_request (opened, synchronize, reopened, labeled), on " +
			"pull_request_target with fork_policy label, on workflow_run after a fork's pull_request " +
			"build (command up with the artifact input), or on workflow_dispatch with the pr-number or " +
			"environment input; use command: down on pull_request or pull_request_target closed.",
	}
	GitHubRequestFailed = &Entry{
		Code:  "AF-GH-003",
		Title: "GitHub API request failed",
		Exit:  ExitFailure,
		Means: "A request af made to GitHub's API (a comment, a check run, a deployment, a label, a " +
			"file) failed after af's retries. What af reported before it stays; the environment " +
			"itself is not changed by this failure, and the step's exit status still says how the " +
			"environment went.",
		Do: "Read the status and message GitHub gave. 401/403: the token lacks a permission the " +
			"workflow's permissions block must grant (pull-requests, issues, checks, deployments: " +
			"write; contents: read). 404: the repository or pull request is not the token's.",
	}
	RateLimited = &Entry{
		Code:  "AF-GH-004",
		Title: "GitHub rate limit",
		Exit:  ExitFailure,
		Means: "GitHub's API refused af for its rate limits (the primary hourly limit, a secondary " +
			"limit or HTTP 429) for longer than af waits (AF_GITHUB_RATE_WAIT, default 5m).",
		Do: "Wait for the time GitHub names and run the job again; fewer concurrent workflow runs on " +
			"one token (the workflow's concurrency group) keep the secondary limits away.",
	}
	ForkNotApproved = &Entry{
		Code:  "AF-GH-005",
		Title: "fork pull request not approved",
		Exit:  ExitRefused,
		Means: "The pull request comes from a fork and the default branch's github.fork_policy does not " +
			"let this commit run now: never; or label, and no maintainer approved this very commit; " +
			"or the pull request moved on (closed, or a newer head) since the build this run would " +
			"deploy; or this is the fork's own pull_request run, which holds no secrets. Nothing ran " +
			"with this repository's secrets and the check is neutral: the action does not fail the " +
			"step for it.",
		Do: "A maintainer who has read the change comments `/af approve <full head sha>` on the pull " +
			"request (someone with write access; the comment's whole text, the full 40-digit commit " +
			"id, not edited afterwards) and re-runs the deploy " +
			"workflow's run for that commit (docs/github.md, pull requests from forks). A new push " +
			"needs a new approval, naming the new commit.",
	}
	EgressNotApproved = &Entry{
		Code:  "AF-GH-006",
		Title: "egress widening not approved",
		Exit:  ExitRefused,
		Means: "The pull request's af.yaml lets the environment reach more than the base branch's " +
			"af.yaml does (a new allow or capture host, a cidr rule, default: allow). A pull request " +
			"does not write its own egress policy: the environment came up under the base branch's " +
			"egress rules, the rules left out are listed, and the action does not fail the step for it.",
		Do: "A maintainer who agrees with the new rules adds the manifest's github.label to the pull " +
			"request and runs the workflow again; merging the change makes them the base rules.",
	}
	AppConfigInvalid = &Entry{
		Code:  "AF-GH-007",
		Title: "App configuration invalid",
		Exit:  ExitInput,
		Means: "The af GitHub App (af app serve) is missing a setting it cannot run without, or has one " +
			"it cannot read: the webhook secret, the App's id or private key. It did not start, so no " +
			"delivery was accepted.",
		Do: "The message names the setting. The webhook secret and the private key are the ones " +
			"GitHub showed when the App was created (the App's settings page on GitHub).",
	}
	AppLeadershipLost = &Entry{
		Code:  "AF-GH-008",
		Title: "App leadership lost",
		Exit:  ExitFailure,
		Means: "This replica of the af GitHub App led (ran the teardowns and the sweeps, holding the " +
			"Lease af-app in its namespace) and could no longer renew the lease: the API server did " +
			"not answer in time, or another replica took it. It stopped at once so that two replicas " +
			"never work as the leader together; what it was doing stays recorded, and the new " +
			"leader resumes it. Deliveries are not lost: every replica records them.",
		Do: "Nothing, if it is rare: the pod restarts as a follower. If it repeats, look at the API " +
			"server's health and the pod's CPU throttling (the lease is renewed every 10s and lost " +
			"after 15s without a renewal).",
	}
	Internal = &Entry{
		Code:  "AF-RUN-099",
		Title: "unexpected failure",
		Exit:  ExitFailure,
		Means: "af failed in a way its catalogue does not describe. This is a defect in af.",
		Do: "Run again with the same input to see whether it repeats, and report it with the full " +
			"message and `af version` output.",
	}
)

// Catalogue returns every entry, in code order.
func Catalogue() []*Entry {
	return []*Entry{
		ActionInputInvalid, EventUnsupported, GitHubRequestFailed, RateLimited, ForkNotApproved, EgressNotApproved, AppConfigInvalid, AppLeadershipLost,
		Unavailable, ClusterUnreachable, UsageInvalid, NotReady, ExitedDuringStart, MigrationFailed, Interrupted, BuildFailed,
		ManifestUnreadable, ManifestInvalid, NameInvalid,
		TeardownIncomplete, StillTerminating,
		NotPlaced, DependencyCycle, DependencyMissing, NotContained, RuntimeCannot,
		NamespaceNotOurs, ImagePublish, CapacityShort, ClusterLacks, ConformanceRefused,
		SidecarConfigInvalid, SidecarListen, ClusterRangesUnknown, ForwardRefused, NothingArrived, WebhookRefused, CredentialUnbounded,
		EnvironmentBusy, EnvironmentRemoved, CheckNotContained, HardenFailed,
		Internal,
	}
}
