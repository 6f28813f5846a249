#!/usr/bin/env bash
# make bench-up: af up and af down of the example on the local test cluster, next to kubectl
# apply + kubectl wait of the same Deployments and Services without policies, sidecar, probe,
# gate or migration (the floor af's containment is added to). Warm images; RUNS rounds each.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
af=$PWD/bin/af
manifest=examples/shop/af.yaml
runs=${RUNS:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
afcluster() { go run ./testcluster/cmd/afcluster "$@"; }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

afcluster ensure -enforcer kube-router >/dev/null
eval "$(afcluster env)"
. hack/shop-images.sh >/dev/null

plain() {
  cat <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: worker, namespace: $1}
spec:
  replicas: 2
  selector: {matchLabels: {app: worker}}
  template:
    metadata: {labels: {app: worker}}
    spec:
      automountServiceAccountToken: false
      containers:
      - name: worker
        image: $worker_image
        ports: [{containerPort: 8080}]
        readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 2}
        resources: {requests: {cpu: 100m, memory: 64Mi}, limits: {cpu: 100m, memory: 64Mi}}
---
apiVersion: v1
kind: Service
metadata: {name: worker, namespace: $1}
spec: {selector: {app: worker}, ports: [{port: 8080}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: $1}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      automountServiceAccountToken: false
      containers:
      - name: web
        image: $web_image
        env: [{name: WORKER_URL, value: "http://worker:8080"}]
        ports: [{containerPort: 8080}]
        readinessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 2}
        resources: {requests: {cpu: 100m, memory: 64Mi}, limits: {cpu: 100m, memory: 64Mi}}
YAML
}

printf '%-4s %-8s %-9s %-8s %-9s %-9s | %-13s %-13s\n' run "af up" sidecar probe services "af down" "kubectl up" "kubectl down"
for i in $(seq "$runs"); do
  t=$(date +%s%N)
  "$af" up -f "$manifest" --env bench -q -o json --image "web=$web_image" --image "worker=$worker_image" >"$work/up.json"
  up=$(ms "$t")
  phases=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); p={x["name"]:x["elapsed_ns"]//1000000 for x in d["phases"]}; print(p["sidecar"], p["probe"], p["services"])' "$work/up.json")
  t=$(date +%s%N)
  "$af" down -f "$manifest" --env bench -q
  down=$(ms "$t")

  ns="af-bench-plain"
  t=$(date +%s%N)
  kubectl create namespace "$ns" >/dev/null
  plain "$ns" | kubectl apply -f - >/dev/null
  kubectl -n "$ns" wait --for=condition=Available deploy/worker deploy/web --timeout=300s >/dev/null
  kup=$(ms "$t")
  t=$(date +%s%N)
  kubectl delete namespace "$ns" --wait=true >/dev/null
  kdown=$(ms "$t")
  read -r sc pr sv <<<"$phases"
  printf '%-4s %-8s %-9s %-8s %-9s %-9s | %-13s %-13s\n' "$i" "${up}ms" "${sc}ms" "${pr}ms" "${sv}ms" "${down}ms" "${kup}ms" "${kdown}ms"
done
