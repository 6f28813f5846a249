#!/usr/bin/env bash
# make test: everything CI runs, in the order internal/testrun/plan.go gives (testrun test -n
# prints it): the apt packages, lint, the unit tests, then the integration stage on the real
# test cluster, always taken down at the end. Every phase runs through internal/testrun, which
# prints the usual output and the phase's counts and time, and fails the phase on a failed
# test, on nothing run and on a -run alternative that matched no test. A skip is a failure
# unless the test is in hack/expected-skips.txt with its reason, or it was skipped where the
# cluster or the container daemon is absent and passed in a phase that has them
# (AF_TEST_STRICT=1 makes missing tools and root failures, package internal/testreq). The last
# lines are the totals.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=hack/lib.sh
. hack/lib.sh
exec bin/testrun test -expected hack/expected-skips.txt
