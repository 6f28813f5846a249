#!/usr/bin/env bash
# make conformance: the conformance roster and the startup proof against a Kubernetes cluster,
# as one go test -json report, read by the verdict reader (af conformance verify).
#
#   hack/conformance.sh                   the local test cluster (ENFORCER: kube-router (default), kube-network-policies or cilium;
#                                         the running one if it has that enforcer); started when it is
#                                         not running, and then taken down again at the end. The
#                                         reader must accept, with no behaviour skipped.
#   hack/conformance.sh --expect-refusal [--escape BEHAVIOUR]...
#                                         a negative control, on a cluster already running with
#                                         known holes: af's own probe and gates are off
#                                         (AF_CONFORMANCE_NEGATIVE=1), so the suite's attempts
#                                         alone meet the holes. The reader must find each named
#                                         behaviour (default: every one that tries a route, and
#                                         the startup proof) failed by an escape, and every other
#                                         behaviour passed: a cluster broken another way is refused.
#
# Environment:
#   AF_CONFORMANCE_REPORT   where the report goes (default bin/conformance-report.jsonl)
#   DUAL_STACK              set (to anything): the local test cluster dual-stack (afcluster -dual-stack)
#   AF_CONFORMANCE_AS_IS=1  the running test cluster as it is, not ensured (a shape deploy/harden
#                           hardened: ensure would bring it up anew)
#   AF_CONFORMANCE_TIMEOUT  go test's timeout for the run (default 30m; go's own default is 10m)
#   AF_CONFORMANCE_EXTERNAL=1  do not touch the test cluster: the tests read
#                           AF_CONFORMANCE_KUBECONFIG and friends (make k8s-conformance)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=hack/lib.sh
. hack/lib.sh

expect=accept
verify=(--no-skip)
if [ "${1:-}" = "--expect-refusal" ]; then
	expect=refuse
	verify=("$@")
	export AF_CONFORMANCE_NEGATIVE=1
fi
report=${AF_CONFORMANCE_REPORT:-bin/conformance-report.jsonl}
timeout=${AF_CONFORMANCE_TIMEOUT:-30m}
mkdir -p "$(dirname "$report")"

started=""
if [ "${AF_CONFORMANCE_EXTERNAL:-}" != 1 ]; then
	export AF_TESTCLUSTER=1
	if [ "$expect" = accept ] && [ "${AF_CONFORMANCE_AS_IS:-}" = 1 ]; then
		# The running cluster as it is (a shape hardened by deploy/harden, which afcluster's
		# record does not know): no ensure, which would bring it up anew.
		afcluster env >/dev/null || { echo "AF_CONFORMANCE_AS_IS=1: no test cluster is running" >&2; exit 1; }
	elif [ "$expect" = accept ]; then
		if ! afcluster env >/dev/null 2>&1; then started=1; fi
		if [ -n "$started" ]; then trap 'echo "== taking the test cluster down"; afcluster down || true' EXIT; fi
		afcluster ensure -enforcer "${ENFORCER:-kube-router}" ${DUAL_STACK:+-dual-stack}
	fi
fi

build_af
echo "== conformance ($expect): the roster ($(bin/af conformance roster | wc -l) behaviours, $(bin/af conformance roster --containment | wc -l) of them containment) and the startup proof -> $report"
start=$(date +%s)
set +e
CGO_ENABLED=1 go test -race -count=1 -json -timeout "$timeout" -run '^(TestConformance|TestImmediateStartupCannotBypassContainment)$' ./runtime/kubernetes/ >"$report"
rc=$?
set -e
wall=$(($(date +%s) - start))
# The outcome of each behaviour, one line each, for the log.
grep -o '"Action":"\(pass\|fail\|skip\)","Package":"[^"]*","Test":"[^"]*"' "$report" |
	sed 's/"Action":"\([a-z]*\)","Package":"[^"]*","Test":"\([^"]*\)"/  \1 \2/' || true
echo "== go test exited $rc after ${wall}s; the verdict (af conformance verify ${verify[*]}):"
set +e
bin/af conformance verify "${verify[@]}" "$report"
vrc=$?
set -e
echo "== conformance wall time: ${wall}s (go test), verdict exit $vrc"
if [ "$expect" = refuse ] && [ "$rc" = 0 ]; then
	echo "NEGATIVE CONTROL FAILED: the suite passed on a cluster with holes" >&2
	exit 1
fi
exit "$vrc"
