#!/usr/bin/env bash
# make bench-publish: a cold publish of the engine image (every layer uploaded, a new
# repository each time) to the local test cluster's registry by af's registry publisher, next
# to `crane push` of the same docker archive (go-containerregistry's own CLI, same version).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
# shellcheck source=hack/lib.sh
. hack/lib.sh # afcluster
afcluster ensure -enforcer kube-router >/dev/null
make -s engine-image >/dev/null
archive=$PWD/bin/engine-image.tar
echo "archive: $(du -h "$archive" | cut -f1)"
AF_BENCH_ARCHIVE=$archive AF_BENCH_REGISTRY=127.0.0.1:5000/af-bench go test -run '^$' -bench BenchmarkPublishCold -benchtime 5x ./images/ | grep Benchmark
crane=$(mktemp -d)/crane
GOBIN=$(dirname "$crane") go install github.com/google/go-containerregistry/cmd/crane@v0.22.1
for i in 1 2 3 4 5; do
  start=$(date +%s%N)
  "$crane" push --insecure "$archive" "127.0.0.1:5000/crane-bench-$$-$i/engine:1" >/dev/null 2>&1
  echo "crane push $i: $(( ($(date +%s%N) - start) / 1000000 )) ms"
done
rm -rf "$(dirname "$crane")"
