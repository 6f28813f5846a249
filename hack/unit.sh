#!/usr/bin/env bash
# The unit phase, defined once: go test -race over af and over the example app, each through
# internal/testrun (counted, timed, failed on a failed test or nothing run). make unit runs it
# alone; make test runs it after lint (hack/test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=hack/lib.sh
. hack/lib.sh
CGO_ENABLED=1 bin/testrun go -phase unit -- -race -count=1 ./...
CGO_ENABLED=1 bin/testrun go -phase unit-example -C examples/shop -- -race -count=1 ./...
