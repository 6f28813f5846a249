#!/usr/bin/env bash
# Checks hack/k8s-conformance.sh where it can be checked without Docker and a network: its
# refusals (run against stand-in docker and k3d commands that record every call) and its dry
# run. Run by make lint.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"
# Stand-ins: behave as FAKE_DOCKER_INFO / FAKE_K3D_LIST say, and log every call.
cat >"$tmp/bin/docker" <<'SH'
#!/bin/sh
echo "docker $*" >>"$FAKE_LOG"
case "$1" in
info) [ "$FAKE_DOCKER_INFO" = ok ] && exit 0; echo "Cannot connect to the Docker daemon" >&2; exit 1 ;;
network) [ "$2" = inspect ] && exit 1 ;;
esac
exit 0
SH
cat >"$tmp/bin/k3d" <<'SH'
#!/bin/sh
echo "k3d $*" >>"$FAKE_LOG"
if [ "$1 $2" = "cluster list" ]; then
	[ "$FAKE_K3D_LIST" = fail ] && { echo "failed to list nodes" >&2; exit 1; }
	echo "$FAKE_K3D_LIST"
fi
exit 0
SH
printf '#!/bin/sh\nexit 0\n' >"$tmp/bin/kubectl"
chmod +x "$tmp/bin/"*
export FAKE_LOG="$tmp/log"

fail=0
expect() { # expect NAME WANT-IN-STDERR env...
	local what=$1 want=$2
	shift 2
	: >"$FAKE_LOG"
	local out rc=0
	out=$(env PATH="$tmp/bin:$PATH" "$@" ./hack/k8s-conformance.sh 2>&1) || rc=$?
	if [ "$rc" = 0 ] || ! grep -qF "$want" <<<"$out"; then
		echo "FAIL $what: exit $rc, want a refusal saying \"$want\"; got: $out" >&2
		fail=1
	elif grep -q 'cluster create\|network create\|cluster delete\|docker run' "$FAKE_LOG"; then
		echo "FAIL $what: refused, but after changing something: $(cat "$FAKE_LOG")" >&2
		fail=1
	else
		echo "ok   $what: $want"
	fi
}
expect "daemon silent" "the Docker daemon did not answer" FAKE_DOCKER_INFO=down FAKE_K3D_LIST='[]'
expect "k3d cannot list" "k3d could not list clusters" FAKE_DOCKER_INFO=ok FAKE_K3D_LIST=fail
expect "cluster exists" "a k3d cluster named af-conformance already exists" FAKE_DOCKER_INFO=ok FAKE_K3D_LIST='[{"name": "af-conformance", "nodes": []}]'
expect "another name exists" "a k3d cluster named mine already exists" FAKE_DOCKER_INFO=ok FAKE_K3D_LIST='[{"name":"mine"}]' AF_K8S_CLUSTER=mine
expect "image by tag" "is not pinned by digest" FAKE_DOCKER_INFO=ok FAKE_K3D_LIST='[]' AF_K3S_IMAGE=rancher/k3s:v1.34.1-k3s1

# The dry run names the pinned image and every step, and touches nothing.
: >"$FAKE_LOG"
dry=$(env PATH="$tmp/bin:$PATH" AF_K8S_DRY_RUN=1 ./hack/k8s-conformance.sh)
for want in "k3d cluster create af-conformance --image rancher/k3s:" "@sha256:" "-p 127.0.0.1:18081:80@loadbalancer" \
	"docker network create --subnet 198.51.100.0/24" "ip route add 169.254.77.1/32" "k3d image import" \
	"./hack/conformance.sh" "k3d cluster delete af-conformance" \
	"kubectl apply -f deploy/harden/harden.yaml" "rollout status daemonset/af-harden" \
	"ghcr.io/antifailure/af:" "docker tag ENGINE-IMAGE ghcr.io/antifailure/af:" "bin/af check"; do
	if ! grep -qF -- "$want" <<<"$dry"; then
		echo "FAIL dry run: does not show \"$want\"" >&2
		fail=1
	fi
done
if grep -q -- '--service-node-port-range' <<<"$dry"; then
	echo "FAIL dry run: narrows the NodePort range (the cluster must be k3s as it comes; deploy/harden closes it)" >&2
	fail=1
fi
if grep -q '169.254.169.254' <<<"$dry"; then
	echo "FAIL dry run: names the real metadata address" >&2
	fail=1
fi
if [ -s "$FAKE_LOG" ]; then
	echo "FAIL dry run: ran $(cat "$FAKE_LOG")" >&2
	fail=1
fi
[ "$fail" = 0 ] && echo "ok   dry run: every step shown, nothing run"
exit "$fail"
