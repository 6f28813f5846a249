#!/usr/bin/env bash
# make conformance: the conformance roster and the startup proof against a Kubernetes cluster,
# as one go test -json report, read by the verdict reader (af conformance verify).
#
#   hack/conformance.sh                   the local test cluster (kube-router); started when it is
#                                         not running, and then taken down again at the end
#   hack/conformance.sh --expect-refusal  the negative control, on a cluster already running
#                                         without an enforcer: the suite must fail, and the reader
#                                         must refuse, naming every containment behaviour
#
# Environment:
#   AF_CONFORMANCE_REPORT   where the report goes (default bin/conformance-report.jsonl)
#   AF_CONFORMANCE_TIMEOUT  go test's timeout for the run (default 30m; go's own default is 10m)
#   AF_CONFORMANCE_EXTERNAL=1  do not touch the test cluster: the tests read
#                           AF_CONFORMANCE_KUBECONFIG and friends (make k8s-conformance)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

expect=accept
if [ "${1:-}" = "--expect-refusal" ]; then expect=refuse; fi
report=${AF_CONFORMANCE_REPORT:-bin/conformance-report.jsonl}
timeout=${AF_CONFORMANCE_TIMEOUT:-30m}
mkdir -p "$(dirname "$report")"
afcluster() { go run ./testcluster/cmd/afcluster "$@"; }

started=""
if [ "${AF_CONFORMANCE_EXTERNAL:-}" != 1 ]; then
	export AF_TESTCLUSTER=1
	if [ "$expect" = accept ]; then
		if ! afcluster env >/dev/null 2>&1; then started=1; fi
		if [ -n "$started" ]; then trap 'echo "== taking the test cluster down"; afcluster down || true' EXIT; fi
		afcluster ensure -enforcer kube-router
	fi
fi

go build -o bin/af ./cmd/af
echo "== conformance: the roster ($(bin/af conformance roster | wc -l) behaviours, $(bin/af conformance roster --containment | wc -l) of them containment) and the startup proof -> $report"
start=$(date +%s)
set +e
CGO_ENABLED=1 go test -race -count=1 -json -timeout "$timeout" -run '^(TestConformance|TestImmediateStartupCannotBypassContainment)$' ./runtime/kubernetes/ >"$report"
rc=$?
set -e
wall=$(($(date +%s) - start))
# The outcome of each behaviour, one line each, for the log.
grep -o '"Action":"\(pass\|fail\|skip\)","Package":"[^"]*","Test":"[^"]*"' "$report" |
	sed 's/"Action":"\([a-z]*\)","Package":"[^"]*","Test":"\([^"]*\)"/  \1 \2/' || true
echo "== go test exited $rc after ${wall}s; the verdict:"

set +e
verdict=$(bin/af conformance verify "$report" 2>&1)
vrc=$?
set -e
echo "$verdict"
echo "== conformance wall time: ${wall}s (go test), verdict exit $vrc"

if [ "$expect" = accept ]; then
	exit "$vrc"
fi
# The negative control: the run must fail, the reader must refuse and name every containment
# behaviour as failed.
if [ "$rc" = 0 ] || [ "$vrc" = 0 ]; then
	echo "NEGATIVE CONTROL FAILED: without an enforcer the suite passed (go test $rc) or the reader accepted (verify $vrc)" >&2
	exit 1
fi
missing=0
while read -r name; do
	if ! grep -qF "containment behaviour $name failed" <<<"$verdict"; then
		echo "NEGATIVE CONTROL FAILED: the refusal does not name containment behaviour $name" >&2
		missing=1
	fi
done < <(bin/af conformance roster --containment)
if ! grep -qF "the startup proof $(grep -o 'TestImmediate[A-Za-z]*' conformance/verdict/roster.go | head -1) did not pass" <<<"$verdict"; then
	echo "NEGATIVE CONTROL FAILED: the refusal does not say the startup proof did not pass" >&2
	missing=1
fi
[ "$missing" = 0 ] && echo "== negative control holds: the suite failed and the reader refused, naming all $(bin/af conformance roster --containment | wc -l) containment behaviours and the startup proof"
exit "$missing"
