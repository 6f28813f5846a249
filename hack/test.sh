#!/usr/bin/env bash
# make test: everything CI runs, each phase through internal/testrun, which prints the usual
# output and the phase's counts and time, and fails the phase on a failed test, on nothing run
# and on a -run alternative that matched no test. Under make test a skip is a failure unless
# the test is in hack/expected-skips.txt with its reason, or it was skipped where the cluster
# or the container daemon is absent and passed in a phase that has them (AF_TEST_STRICT=1 makes
# missing tools and root failures, package internal/testreq). The last lines are the totals.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=hack/lib.sh
. hack/lib.sh
export AF_TEST_STRICT=1
bin/testrun reset
summary() {
	local rc=$?
	trap - EXIT
	set +e
	bin/testrun summary -expected hack/expected-skips.txt -status "$rc"
	local src=$?
	[ "$rc" != 0 ] && exit "$rc"
	exit "$src"
}
trap summary EXIT

step deps ./hack/deps.sh test
# The modules of af and of the example are fetched while lint runs (no CPU to speak of).
(go mod download && cd examples/shop && go mod download) >/dev/null 2>&1 &
step lint make -s lint
wait
./hack/unit.sh
./hack/test-integration.sh
