#!/usr/bin/env bash
# The demo: what `make demo` runs. A real local cluster (testcluster/), the example app
# (examples/shop) brought up by af with its probe verdict and status printed, its web service
# asked through a port-forward (it answers and reaches the worker), then af down and the
# cluster taken down again. Nothing is faked; nothing leaves this machine.
#
# The probe's and the gates' routes point at the test cluster's fake internet (network
# namespaces beside the cluster), never at a real public address: AF_GATE_* below.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
af=$PWD/bin/af
manifest=examples/shop/af.yaml
work=$(mktemp -d)
# shellcheck source=hack/lib.sh
. hack/lib.sh # afcluster
keep=${AF_DEMO_KEEP:-}
cleanup() {
  status=$?
  if [ -n "${pf:-}" ]; then kill "$pf" 2>/dev/null || true; fi
  if [ -z "$keep" ]; then
    echo "== cleaning up: af down and the cluster down"
    "$af" down -f "$manifest" --env shop-demo -q 2>/dev/null || true
    afcluster down >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
  exit $status
}
trap cleanup EXIT

echo "== af demo: $($af version)"
echo
echo "== 1. A local Kubernetes cluster with an enforcing CNI (kube-router)"
./hack/deps.sh test >/dev/null
afcluster ensure -enforcer kube-router
eval "$(afcluster env)"

echo
echo "== 2. Images: the engine (sidecar, gate, probe) and the example's two services"
. hack/shop-images.sh

echo
echo "== 3. af up"
start=$(date +%s%N)
"$af" up -f "$manifest" --env shop-demo \
  --image "web=$web_image" --image "worker=$worker_image"
echo "(af up took $(( ($(date +%s%N) - start) / 1000000 )) ms)"

echo
echo "== 4. af status"
"$af" status -f "$manifest" --env shop-demo

echo
echo "== 5. The web service at its preview URL, through the cluster's ingress controller"
url=$("$af" status -f "$manifest" --env shop-demo -o json -q | python3 -c 'import json,sys; print([s["url"] for s in json.load(sys.stdin)["services"] if s.get("url")][0])')
host=${url#http://}; host=${host%/}
echo "GET $url (reached at $AF_INGRESS_ADDRESS) ->"
curl -fsS --connect-to "$host:80:$AF_INGRESS_ADDRESS" "$url"
echo
echo
echo "== 6. The same service through a port-forward: it answers and reaches the worker"
kubectl -n af-env-shop-demo port-forward svc/web 18099:8080 >"$work/pf.log" 2>&1 &
pf=$!
for _ in $(seq 50); do curl -fsS -o /dev/null http://127.0.0.1:18099/healthz 2>/dev/null && break; sleep 0.2; done
echo "GET http://127.0.0.1:18099/ ->"
curl -fsS http://127.0.0.1:18099/
echo

echo
echo "== 7. What left the environment: a blocked call and a captured mail"
echo "GET http://127.0.0.1:18099/track (a host no rule allows) ->"
curl -fsS http://127.0.0.1:18099/track
echo "POST http://127.0.0.1:18099/order (mails orders@shop.mail.test, which the manifest captures) ->"
curl -fsS -X POST http://127.0.0.1:18099/order
kill "$pf"; pf=
echo
echo "af net log --blocked ->"
"$af" net log -f "$manifest" --env shop-demo --blocked
# Read whole, then searched: grep -q would stop reading at the match and af, writing on,
# would die of SIGPIPE (exit 141 under pipefail).
blocked=$("$af" net log -f "$manifest" --env shop-demo --blocked -o json -q)
grep -q '"host":"blocked-api.af.test"' <<<"$blocked"
echo
echo "af inbox wait --to orders@shop.mail.test ->"
"$af" inbox wait -f "$manifest" --env shop-demo --to orders@shop.mail.test --timeout 30s

echo
echo "== 8. af down"
"$af" down -f "$manifest" --env shop-demo
echo
echo "== demo passed"
