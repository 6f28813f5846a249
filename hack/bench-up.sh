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
# DENY: how the cluster's enforcer answers a packet its policies deny. kube-router REJECTs
# (an ICMP port-unreachable from the node), but the node's kernel sends those at most once a
# second per pod after a burst of 6 (net.ipv4.icmp_ratelimit), so as configured most denied
# attempts wait out their timeout. "drop" drops every such answer on the node (a raw-table
# OUTPUT rule for the pod range), "reject" lifts the rate limit so every one arrives; both are undone on exit.
deny=${DENY:-as-is}
work=$(mktemp -d)
restore=()
cleanup() {
  local r
  for r in "${restore[@]}"; do eval "$r" || true; done
  rm -rf "$work"
}
trap cleanup EXIT
# shellcheck source=hack/lib.sh
. hack/lib.sh # afcluster
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

afcluster ensure -enforcer kube-router >/dev/null
eval "$(afcluster env)"
. hack/shop-images.sh >/dev/null

# (In the raw table: kube-router keeps its own jump first in the filter table's OUTPUT chain.)
drop_rule=(OUTPUT -p icmp --icmp-type port-unreachable -m comment --comment af-bench-drop -j DROP)
while iptables -t raw -D "${drop_rule[@]}" 2>/dev/null; do :; done # left by a run that was killed
case $deny in
as-is) label="kube-router as configured: REJECT, its answers rate-limited by the node" ;;
drop)
  pods=$(kubectl get nodes -o jsonpath='{.items[0].spec.podCIDR}')
  drop_rule=("${drop_rule[0]}" -d "$pods" "${drop_rule[@]:1}")
  iptables -t raw -I "${drop_rule[@]}"
  restore+=("iptables -t raw -D ${drop_rule[*]}")
  label="kube-router, every REJECT answer to a pod dropped on the node"
  ;;
reject)
  restore+=("sysctl -qw net.ipv4.icmp_ratelimit=$(sysctl -n net.ipv4.icmp_ratelimit)")
  sysctl -qw net.ipv4.icmp_ratelimit=0
  label="kube-router, every REJECT answered (the node's ICMP rate limit lifted)"
  ;;
*) echo "DENY must be as-is, drop or reject, not $deny" >&2; exit 2 ;;
esac
echo "enforcer: $label"

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

# One line per pod of namespace $1: the gate's time to its verdict, its wait for the sidecar (the
# enforcer letting the new pod reach it), its rounds, the time from its last line to the
# application's first (the kubelet noticing the init container ended and starting the next),
# its attempts that were refused and that timed out; with --since T (ns since the epoch), the time from then to the
# application's first line (hack/gate-times.py).
verdicts() { # NS [--since T] POD...
  local ns=$1 pod app since=()
  shift
  if [ "$1" = --since ]; then since=("$2"); shift 2; fi
  for pod in "$@"; do
    app=$(kubectl -n "$ns" get "$pod" -o jsonpath='{.spec.containers[0].name}')
    { kubectl -n "$ns" logs "$pod" -c af-gate --timestamps 2>/dev/null || true; echo "APP"
      kubectl -n "$ns" logs "$pod" -c "$app" --timestamps 2>/dev/null | head -1 || true; } |
      python3 hack/gate-times.py "${since[@]}"
  done
}
# replace deletes every pod of namespace $1 that selector $2 picks (all at once), waits for the
# three replacements to be ready and appends their verdicts lines, timed from the delete, to $3.
replace() {
  local ns=$1 sel=$2 old del new=()
  old=$(kubectl -n "$ns" get pods "$sel" -o name)
  del=$(date +%s%N)
  kubectl -n "$ns" delete pods "$sel" --wait=false >/dev/null
  kubectl -n "$ns" wait --for=condition=Available deploy/worker deploy/web --timeout=120s >/dev/null
  for _ in $(seq 100); do
    mapfile -t new < <(kubectl -n "$ns" get pods "$sel" -o name | grep -vxF -f <(echo "$old") || true)
    [ "${#new[@]}" -ge 3 ] && break
    sleep 0.2
  done
  kubectl -n "$ns" wait --for=condition=Ready "${new[@]}" --timeout=120s >/dev/null
  verdicts "$ns" --since "$del" "${new[@]}" >>"$3"
}

printf '%-4s %-8s %-9s %-8s %-9s %-9s | %-13s %-13s %-13s\n' run "af up" sidecar probe services "af down" "kubectl up" "same order" "kubectl down"
ups=() probes=() downs=() orders=() kdowns=() prounds=() pbeyond=()
: >"$work/gates.txt"
: >"$work/replaced.txt"
: >"$work/plain-replaced.txt"
for i in $(seq "$runs"); do
  t=$(date +%s%N)
  "$af" up -f "$manifest" --env bench -q -o json --image "web=$web_image" --image "worker=$worker_image" >"$work/up.json"
  up=$(ms "$t")
  # The phases' lengths; and the probe's own rounds, and how long the probe went on after the
  # sidecar was up (what the probe adds to af up beyond the sidecar starting beside it).
  phases=$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
p = {x["name"]: x for x in d["phases"]}
n = lambda k: p[k]["elapsed_ns"] // 1000000
end = lambda k: (p[k].get("start_ns", 0) + p[k]["elapsed_ns"]) // 1000000
print(n("sidecar"), n("probe"), n("services"), n("probe rounds"), end("probe") - end("sidecar"))' "$work/up.json")
  # The gate's time to its verdict in each pod of the environment (P9), from its verdict line:
  # the services' pods and the migration's (the probe's pod is gone by now). During af up the
  # gates start beside the sidecar and wait for it first; their own rounds are the rest.
  env_ns=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["namespace"])' "$work/up.json")
  # shellcheck disable=SC2046 # pod names
  verdicts "$env_ns" $(kubectl -n "$env_ns" get pods -o name) >>"$work/gates.txt"
  # Replacements: every service pod deleted at once, its replacement gated with the sidecar up
  # and its hold released (what a pod start costs in a running environment).
  replace "$env_ns" -ldev.antifailure.workload=service "$work/replaced.txt"
  t=$(date +%s%N)
  "$af" down -f "$manifest" --env bench -q
  down=$(ms "$t")

  ns="af-bench-plain"
  t=$(date +%s%N)
  kubectl create namespace "$ns" >/dev/null
  plain "$ns" | kubectl apply -f - >/dev/null
  kubectl -n "$ns" wait --for=condition=Available deploy/worker deploy/web --timeout=300s >/dev/null
  kup=$(ms "$t")
  # The same replacements without af (no policies, no gate): the baseline of a pod start.
  replace "$ns" -lapp "$work/plain-replaced.txt"
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
  read -r sc pr sv rounds beyond <<<"$phases"
  printf '%-4s %-8s %-9s %-8s %-9s %-9s | %-13s %-13s %-13s\n' "$i" "${up}ms" "${sc}ms" "${pr}ms" "${sv}ms" "${down}ms" "${kup}ms" "${order}ms" "${kdown}ms"
  ups+=("$up") probes+=("$pr") downs+=("$down") orders+=("$order") kdowns+=("$kdown")
  prounds+=("$rounds") pbeyond+=("$beyond")
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
col() { cut -d' ' -f"$1" "$2"; }
sum() { awk '{s+=$1} END {print s+0}'; }
echo "enforcer: $label"
echo "probe: its own rounds median $(median "${prounds[@]}")ms; on after the sidecar was up median $(median "${pbeyond[@]}")ms; whole phase (from its pod written, beside the sidecar) median ${mp}ms"
gates() { # $1: what, $2: file
  [ -s "$2" ] || return 0
  local total side rounds hand
  mapfile -t total <<<"$(col 1 "$2")"
  mapfile -t side <<<"$(col 2 "$2")"
  mapfile -t rounds <<<"$(col 3 "$2")"
  mapfile -t hand <<<"$(col 4 "$2" | grep -v -- -)"
  echo "gate $1, over ${#total[@]} pods: its rounds median $(median "${rounds[@]}")ms (max $(printf '%s\n' "${rounds[@]}" | sort -n | tail -1)ms); with its wait for the sidecar median $(median "${total[@]}")ms (the wait alone $(median "${side[@]}")ms); then the application's first line $(median "${hand[@]}")ms after the gate's last; attempts denied: $(col 5 "$2" | sum) refused, $(col 6 "$2" | sum) timed out"
}
gates "during af up (beside the sidecar starting)" "$work/gates.txt"
gates "per pod start (replacements in a running environment)" "$work/replaced.txt"
# What af adds to a pod start: a replacement's delete to its application's first line, in af's
# environment and in the plain namespace.
if [ -s "$work/replaced.txt" ] && [ -s "$work/plain-replaced.txt" ]; then
  mapfile -t ga <<<"$(col 7 "$work/replaced.txt" | grep -v -- -)"
  mapfile -t pl <<<"$(col 7 "$work/plain-replaced.txt" | grep -v -- -)"
  mg=$(median "${ga[@]}") mpl=$(median "${pl[@]}")
  echo "pod start, delete to the application's first line: with af median ${mg}ms over ${#ga[@]} pods, plain median ${mpl}ms over ${#pl[@]}; af adds $(awk -v a="$mg" -v b="$mpl" 'BEGIN {print a-b}')ms"
fi
echo "medians: af up ${mu}ms (probe ${mp}ms), kubectl same order ${mo}ms, af down ${md}ms, namespace delete ${mk}ms"
awk -v u="$mu" -v p="$mp" -v o="$mo" 'BEGIN {printf "ratio af-up/kubectl-same-order = %.2f\n", (u-p)/o}'
awk -v d="$md" -v k="$mk" 'BEGIN {printf "ratio af-down/namespace-delete = %.2f\n", d/k}'
