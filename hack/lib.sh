# shellcheck shell=bash
# Shared by the hack/ scripts: sourced, never run. The test cluster's command and make test's
# phase reader are each built once per script (go build is cached), not `go run` each call.
export PATH=/usr/local/go/bin:$PATH
mkdir -p bin
go build -trimpath -o bin/afcluster ./testcluster/cmd/afcluster
go build -trimpath -o bin/testrun ./internal/testrun

afcluster() { bin/afcluster "$@"; }

# build_af: bin/af as make build makes it (static, -trimpath, the version stamped), the one way
# the scripts build af.
build_af() { make -s build >/dev/null; }
