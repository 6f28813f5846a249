#!/usr/bin/env bash
# The integration phase of `make test`: the real test cluster (testcluster/), brought up, used,
# and always taken down again, even when a test fails.
#   1. kube-router enforcing: the testcluster suite, the gate behind 20 pod starts, the engine
#      image in containerd, the Kubernetes runtime (af up/down/status of the example and more),
#      the GitHub Action run by nektos/act against the GitHub stand-in, the GitHub App (teardown,
#      reaper, an API server restart),
#      then conformance (the roster and the startup proof; the verdict reader must accept);
#   1c. the same cluster with its two holes open (IPv6 in pods, kube-router's NodePort
#      exemption): af up refuses naming the link-local and node routes, and the reader refuses
#      the conformance report naming every containment behaviour, the two new ones among them;
#   2. no enforcer: the negative controls (default-deny blocks nothing; af up refuses with
#      AF-RUN-043 and runs no service image, and so does the action under act, failing its check; conformance fails and the reader refuses, naming
#      every containment behaviour);
#   3. down, and nothing is left.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
afcluster() { go run ./testcluster/cmd/afcluster "$@"; }
# The cluster tests run under the race detector too: the runtime waits, tears down and probes
# with goroutines of its own.
gotest() { CGO_ENABLED=1 go test -race -count=1 -v -timeout 40m "$@"; }

trap 'echo "== taking the test cluster down"; afcluster down || true; ./hack/dockerd.sh stop || true' EXIT

echo "== 0. a private container daemon for the build tests (no iptables, no masquerade, no bridge)"
export AF_DOCKER_HOST
AF_DOCKER_HOST=$(./hack/dockerd.sh start)

echo "== 1. cluster with kube-router"
afcluster ensure -enforcer kube-router
AF_TESTCLUSTER=1 gotest ./testcluster/...
AF_TESTCLUSTER=1 gotest -run 'TestGatedPodsOnTheCluster' ./gate/
AF_TESTCLUSTER=1 gotest -run 'TestEngineImageRunsInContainerd' ./images/engine/
AF_TESTCLUSTER=1 gotest ./images/
AF_TESTCLUSTER=1 gotest -run 'TestUpBuildsPublishesAndRuns' ./cmd/af/internal/cmd/root/
AF_TESTCLUSTER=1 gotest -skip '^(TestConformance|TestImmediateStartupCannotBypassContainment)$' ./runtime/...
# The GitHub Action under nektos/act: its own image in the private daemon, the GitHub stand-in,
# this cluster (opened, synchronize, closed).
AF_TESTCLUSTER=1 gotest -run 'TestActionUnderAct$' ./action/
# The GitHub App: closed deliveries, the reaper (lost webhook, expired TTL), namespaces that are
# not its own left untouched, and a teardown that outlives an API server restart (last: the
# API server is stopped and started again).
AF_TESTCLUSTER=1 gotest -run 'TestAppOnTheCluster' ./app/

./hack/dockerd.sh stop # the build tests are done; nothing of it may be left for the after-down check

echo "== 1b. conformance on the enforcing cluster (make conformance)"
AF_CONFORMANCE_REPORT=bin/conformance-report.jsonl ./hack/conformance.sh

echo "== 1c. the same cluster with IPv6 left on in pods and kube-router's NodePort exemption open (holes)"
afcluster holes open
AF_TESTCLUSTER=1 gotest -run 'TestUpRefusedWithHoles' ./runtime/kubernetes/
AF_TESTCLUSTER=1 AF_CONFORMANCE_REPORT=bin/conformance-holes.jsonl ./hack/conformance.sh --expect-refusal

echo "== 2. the same cluster without an enforcer (negative control)"
afcluster up -enforcer none
AF_TESTCLUSTER=1 gotest -run 'TestSmoke|TestNegativeControl|TestGuardCountersZero' ./testcluster/
AF_TESTCLUSTER=1 gotest -run 'TestUpRefusedWithoutEnforcer' ./runtime/kubernetes/
AF_DOCKER_HOST=$(./hack/dockerd.sh start)
AF_TESTCLUSTER=1 gotest -run 'TestActionUnderActNotContained' ./action/
./hack/dockerd.sh stop
AF_TESTCLUSTER=1 AF_CONFORMANCE_REPORT=bin/conformance-no-enforcer.jsonl ./hack/conformance.sh --expect-refusal

echo "== 3. down, and nothing left"
afcluster down
AF_TESTCLUSTER_DOWN=1 gotest -run TestNothingLeftAfterDown ./testcluster/
