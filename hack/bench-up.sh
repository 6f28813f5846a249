#!/usr/bin/env bash
# make bench-up: af up and af down of the example on the local test cluster, next to kubectl
# apply + kubectl wait of the same Deployments and Services without policies, sidecar, probe,
# gate or migration (all at once: the floor), and of the same objects with the migration Job,
# applied in af's dependency order (worker and the migration together, then web, each waited
# for): the honest baseline. Warm images; RUNS rounds each. It ends with one line per ratio of
# medians: af up less its probe phase (the containment proof the baseline has no part of) over
# the same-order baseline, and af down over a bare namespace delete.
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

# The migration Job of the example, plain.
job() {
  cat <<YAML
apiVersion: batch/v1
kind: Job
metadata: {name: web-migrate, namespace: $1}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      automountServiceAccountToken: false
      containers:
      - name: migrate
        image: $web_image
        command: ["/shop-web", "migrate"]
        resources: {requests: {cpu: 100m, memory: 64Mi}, limits: {cpu: 100m, memory: 64Mi}}
YAML
}

# split keeps the documents of kind $2 ("worker", "web") of plain's output.
split() { python3 -c 'import sys; docs=sys.stdin.read().split("\n---\n"); print("\n---\n".join(d for d in docs if "name: "+sys.argv[1]+"," in d))' "$1"; }

printf '%-4s %-8s %-9s %-8s %-9s %-9s | %-13s %-13s %-13s\n' run "af up" sidecar probe services "af down" "kubectl up" "same order" "kubectl down"
ups=() probes=() downs=() orders=() kdowns=()
: >"$work/gates.txt"
: >"$work/replaced.txt"
for i in $(seq "$runs"); do
  t=$(date +%s%N)
  "$af" up -f "$manifest" --env bench -q -o json --image "web=$web_image" --image "worker=$worker_image" >"$work/up.json"
  up=$(ms "$t")
  phases=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); p={x["name"]:x["elapsed_ns"]//1000000 for x in d["phases"]}; print(p["sidecar"], p["probe"], p["services"])' "$work/up.json")
  # The gate's time to its verdict in each pod of the environment (P9), from its verdict line:
  # the services' pods and the migration's (the probe's pod is gone by now). During af up the
  # gates start beside the sidecar and wait for it first; their own rounds are the rest.
  env_ns=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["namespace"])' "$work/up.json")
  verdicts() {
    for pod in "$@"; do
      { kubectl -n "$env_ns" logs "$pod" -c af-gate 2>/dev/null || true; } | sed -n 's/^AF-VERDICT //p' |
        python3 -c 'import json,sys; [print(int(d["ms"]), int(d["ms"]-d.get("sidecar_ms",0))) for d in map(json.loads, filter(str.strip, sys.stdin))]'
    done
  }
  # shellcheck disable=SC2046 # pod names
  verdicts $(kubectl -n "$env_ns" get pods -o name) >>"$work/gates.txt"
  # Replacements: every service pod deleted at once, its replacement gated with the sidecar up
  # and its hold released (what a pod start costs in a running environment).
  old=$(kubectl -n "$env_ns" get pods -l dev.antifailure.workload=service -o name)
  kubectl -n "$env_ns" delete pods -l dev.antifailure.workload=service --wait=false >/dev/null
  kubectl -n "$env_ns" wait --for=condition=Available deploy/worker deploy/web --timeout=120s >/dev/null
  new=()
  for _ in $(seq 100); do
    mapfile -t new < <(kubectl -n "$env_ns" get pods -l dev.antifailure.workload=service -o name | grep -vxF -f <(echo "$old") || true)
    [ "${#new[@]}" -ge 3 ] && break
    sleep 0.2
  done
  kubectl -n "$env_ns" wait --for=condition=Ready "${new[@]}" --timeout=120s >/dev/null
  verdicts "${new[@]}" >>"$work/replaced.txt"
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
  # The same objects in af's dependency order: worker and the migration, then web.
  ns="af-bench-order"
  t=$(date +%s%N)
  kubectl create namespace "$ns" >/dev/null
  { plain "$ns" | split worker; echo "---"; job "$ns"; } | kubectl apply -f - >/dev/null
  kubectl -n "$ns" wait --for=condition=Available deploy/worker --timeout=300s >/dev/null
  kubectl -n "$ns" wait --for=condition=Complete job/web-migrate --timeout=300s >/dev/null
  plain "$ns" | split web | kubectl apply -f - >/dev/null
  kubectl -n "$ns" wait --for=condition=Available deploy/web --timeout=300s >/dev/null
  order=$(ms "$t")
  kubectl delete namespace "$ns" --wait=true >/dev/null
  read -r sc pr sv <<<"$phases"
  printf '%-4s %-8s %-9s %-8s %-9s %-9s | %-13s %-13s %-13s\n' "$i" "${up}ms" "${sc}ms" "${pr}ms" "${sv}ms" "${down}ms" "${kup}ms" "${order}ms" "${kdown}ms"
  ups+=("$up") probes+=("$pr") downs+=("$down") orders+=("$order") kdowns+=("$kdown")
done
# Per-phase table of the last af up (start and length of each, overlaps visible).
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print("phases of the last af up:")
for p in d["phases"]:
    print("  %-24s start %6d ms  %6d ms" % (p["name"], p.get("start_ns", 0)//1000000, p["elapsed_ns"]//1000000))
' "$work/up.json"
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
mu=$(median "${ups[@]}") mp=$(median "${probes[@]}") md=$(median "${downs[@]}") mo=$(median "${orders[@]}") mk=$(median "${kdowns[@]}")
gates_of() { cut -d' ' -f"$1" "$2"; }
if [ -s "$work/gates.txt" ]; then
  mapfile -t g <<<"$(gates_of 2 "$work/gates.txt")"
  mapfile -t a <<<"$(gates_of 1 "$work/gates.txt")"
  echo "gate during af up, its own rounds (this cluster drops): median $(median "${g[@]}")ms over ${#g[@]} pods, max $(printf '%s\n' "${g[@]}" | sort -n | tail -1)ms; with its wait for the sidecar starting beside it: median $(median "${a[@]}")ms"
fi
if [ -s "$work/replaced.txt" ]; then
  mapfile -t r <<<"$(gates_of 1 "$work/replaced.txt")"
  echo "gate per pod start (replacements in a running environment, this cluster drops): median $(median "${r[@]}")ms over ${#r[@]} pods, max $(printf '%s\n' "${r[@]}" | sort -n | tail -1)ms"
fi
echo "medians: af up ${mu}ms (probe ${mp}ms), kubectl same order ${mo}ms, af down ${md}ms, namespace delete ${mk}ms"
awk -v u="$mu" -v p="$mp" -v o="$mo" 'BEGIN {printf "ratio af-up/kubectl-same-order = %.2f\n", (u-p)/o}'
awk -v d="$md" -v k="$mk" 'BEGIN {printf "ratio af-down/namespace-delete = %.2f\n", d/k}'
