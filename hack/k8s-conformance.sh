#!/usr/bin/env bash
# make k8s-conformance: the conformance roster and the startup proof on a disposable k3d cluster,
# for machines with Docker and a network (CI's scheduled conformance workflow). It:
#   1. refuses to run when the Docker daemon does not answer (it never reads "no cluster" from
#      a daemon that said nothing) or when a k3d cluster of the name already exists;
#   2. builds the test image (Debian's busybox-static and aftool) and af's engine image;
#   3. starts the fake internet beside the cluster: a Docker network on the documentation range
#      198.51.100.0/24 with the test hosts and a fake metadata server on 169.254.77.1 (never
#      the real 169.254.169.254, never a real public address), every address as the test
#      cluster's Go code has it (afcluster internet);
#   4. creates the cluster from a k3s image PINNED BY DIGEST as k3s comes (its embedded
#      kube-router enforces NetworkPolicy with the default NodePort exemption 30000-32767,
#      flannel's bridge cni0, IPv6 left on in pods; Traefik serves ingress), its ingress on
#      loopback, and hardens it the way an operator would (docs/runtime.md's checklist): af's
#      node agent, deploy/harden/harden.yaml applied as written (its image, af's own, imported
#      by the name it names), which puts AF-LINK-LOCAL on cni0 and AF-NODEPORT on k3s'
#      exemption; then `af check` must say contained before the suite runs;
#   5. runs hack/conformance.sh against it (the roster, the startup proof, the verdict reader);
#   6. deletes the cluster and the fake internet (AF_K8S_CONFORMANCE_KEEP=1 keeps them).
#
# Environment:
#   AF_K8S_CLUSTER            the cluster's name (default af-conformance)
#   AF_K3S_IMAGE              the k3s image; must be pinned by digest
#   AF_K8S_INGRESS_PORT       the loopback port of the ingress (default 18081)
#   AF_K8S_CONFORMANCE_KEEP=1 keep the cluster and the fake internet afterwards
#   AF_K8S_DRY_RUN=1          print what would be run, run nothing
#   AF_CONFORMANCE_REPORT     the report (default bin/k8s-conformance-report.jsonl)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

name=${AF_K8S_CLUSTER:-af-conformance}
# rancher/k3s v1.34.1-k3s1 (Kubernetes 1.34: within one minor version of the client-go af uses).
k3s_image=${AF_K3S_IMAGE:-rancher/k3s:v1.34.1-k3s1@sha256:5e0707cfd1239b358ef73f3254bc3eadc027dd30cd5ec6ca41e29e47652a1b8c}
ingress_port=${AF_K8S_INGRESS_PORT:-18081}
# The image deploy/harden/harden.yaml names: af's own, imported by that name.
harden_image=$(sed -n 's/^ *image: *\([^ #]*\).*/\1/p' deploy/harden/harden.yaml | head -1)
[ -n "$harden_image" ] || die "deploy/harden/harden.yaml names no image"
keep=${AF_K8S_CONFORMANCE_KEEP:-}
dry=${AF_K8S_DRY_RUN:-}
report=${AF_CONFORMANCE_REPORT:-bin/k8s-conformance-report.jsonl}
net=af-fake-internet
inet=af-fake-internet
node="k3d-$name-server-0"

die() {
	echo "k8s-conformance: $*" >&2
	exit 1
}
run() {
	if [ -n "$dry" ]; then
		echo "+ $*"
	else
		"$@"
	fi
}

quiet() {
	if [ -n "$dry" ]; then
		echo "+ $*"
	else
		"$@" >/dev/null 2>&1
	fi
}

case "$k3s_image" in
*@sha256:????????????????????????????????????????????????????????????????) ;;
*) die "AF_K3S_IMAGE=$k3s_image is not pinned by digest (want NAME:TAG@sha256:<64 hex>)" ;;
esac
case "$name" in
[a-z]*) ;;
*) die "AF_K8S_CLUSTER=$name: want a name starting with a lower-case letter" ;;
esac

if [ -z "$dry" ]; then
	for c in docker k3d kubectl go; do
		command -v "$c" >/dev/null || die "$c is not installed (the conformance workflow installs pinned k3d and kubectl)"
	done
	[ -x /bin/busybox ] || die "/bin/busybox is missing: install busybox-static (the test image is built from it)"
	# A daemon that does not answer says nothing about which clusters exist.
	if ! docker info >/dev/null 2>&1; then
		die "the Docker daemon did not answer (docker info failed), so whether cluster $name exists cannot be told; start Docker and run again"
	fi
	if ! list=$(k3d cluster list -o json 2>&1); then
		die "k3d could not list clusters ($list); not assuming there is none"
	fi
	if tr -d ' \n\t' <<<"$list" | grep -q "\"name\":\"$name\""; then
		die "a k3d cluster named $name already exists: refusing to touch it (delete it, or set AF_K8S_CLUSTER to another name)"
	fi
	if docker network inspect "$net" >/dev/null 2>&1; then
		die "the Docker network $net already exists (an earlier run kept with AF_K8S_CONFORMANCE_KEEP?): remove it with docker rm -f $inet; docker network rm $net"
	fi
fi

# shellcheck source=hack/lib.sh
. hack/lib.sh # afcluster, build_af
# The fake internet's addresses, as Go has them (testcluster.Internet): its range and zone, the
# public TCP/UDP echo, the resolver, the allowed and the blocked API host, the fake metadata
# server.
internet=$(afcluster internet)
eval "$internet"
public_ip=$AF_INTERNET_PUBLIC_IP
metadata_ip=$AF_INTERNET_METADATA_IP
extra_ips="$AF_INTERNET_RESOLVER_IP $AF_INTERNET_ALLOWED_API_IP $AF_INTERNET_BLOCKED_API_IP $metadata_ip"

work=$(mktemp -d)
cleanup() {
	status=$?
	if [ -n "$keep" ]; then
		echo "== kept: cluster $name (k3d kubeconfig write $name), the fake internet ($inet on $net)"
	else
		echo "== deleting cluster $name and the fake internet"
		run k3d cluster delete "$name" || true
		quiet docker rm -f "$inet" || true
		quiet docker network rm "$net" || true
	fi
	rm -rf "$work"
	exit "$status"
}
trap cleanup EXIT

echo "== images: the test image and af's engine image"
run build_af
run env CGO_ENABLED=0 go build -trimpath -o "$work/aftool" ./testcluster/cmd/aftool
run afcluster test-image "$work/test.tar" "$work/aftool"
run bin/af engine-image --tar "$work/engine.tar"
run docker load -i "$work/test.tar"

echo "== the fake internet on $net ($AF_INTERNET_CIDR, metadata on $metadata_ip)"
run docker network create --subnet "$AF_INTERNET_CIDR" "$net"
adds=""
for ip in $extra_ips; do adds="$adds ip addr add $ip/32 dev eth0 &&"; done
run docker run -d --name "$inet" --network "$net" --ip "$public_ip" --cap-add NET_ADMIN af.test/aftest:1 \
	sh -c "$adds (aftool fake-metadata &) && exec aftool fake-internet"

echo "== cluster $name from $k3s_image, as k3s comes"
run k3d cluster create "$name" --image "$k3s_image" --servers 1 --agents 0 --wait --timeout 300s \
	-p "127.0.0.1:$ingress_port:80@loadbalancer"
# The node reaches the fake internet directly, and the metadata address through it.
run docker network connect "$net" "$node"
run docker exec "$node" ip route add "$metadata_ip/32" via "$public_ip"
run docker load -i "$work/engine.tar"
if [ -n "$dry" ]; then
	engine_image=ENGINE-IMAGE # bin/af is not built in a dry run: af version names it
else
	engine_image=$(bin/af version -o json | sed -n 's/.*"engine_image": *"\([^"]*\)".*/\1/p')
	[ -n "$engine_image" ] || die "bin/af version -o json named no engine_image"
fi
run docker tag "$engine_image" "$harden_image"
run k3d image import -c "$name" "$work/test.tar" "$work/engine.tar" "$harden_image"
kubeconfig="$work/kubeconfig"
if [ -n "$dry" ]; then
	echo "+ k3d kubeconfig get $name > $kubeconfig"
	node_ip=NODE-IP
else
	k3d kubeconfig get "$name" >"$kubeconfig"
	node_ip=$(docker inspect -f "{{(index .NetworkSettings.Networks \"k3d-$name\").IPAddress}}" "$node")
fi
export KUBECONFIG=$kubeconfig
# CoreDNS sends the fake internet's names to the fake resolver.
coredns_custom="apiVersion: v1
kind: ConfigMap
metadata: {name: coredns-custom, namespace: kube-system}
data:
  af.server: |
    $AF_INTERNET_DOMAIN:53 {
        forward . $AF_INTERNET_RESOLVER_IP
    }"
if [ -n "$dry" ]; then
	echo "+ kubectl apply -f - <<< coredns-custom ($AF_INTERNET_DOMAIN -> $AF_INTERNET_RESOLVER_IP)"
else
	kubectl apply -f - <<<"$coredns_custom"
fi
run kubectl -n kube-system rollout restart deployment/coredns
run kubectl -n kube-system rollout status deployment/coredns --timeout=180s
# k3s installs Traefik with a Helm job: wait until its Deployment exists, then until it is ready.
if [ -z "$dry" ]; then
	for _ in $(seq 1 120); do
		kubectl -n kube-system get deployment/traefik >/dev/null 2>&1 && break
		sleep 2
	done
fi
run kubectl -n kube-system rollout status deployment/traefik --timeout=300s

echo "== deploy/harden on $name, then af check"
run kubectl apply -f deploy/harden/harden.yaml
run kubectl -n af-harden rollout status daemonset/af-harden --timeout=180s
run env AF_GATE_PUBLIC_TCP="$public_ip:80" AF_GATE_PUBLIC_DNS="$AF_INTERNET_RESOLVER_IP:53" AF_GATE_METADATA="$metadata_ip:80" \
	bin/af check

echo "== conformance on $name"
run env AF_CONFORMANCE_EXTERNAL=1 AF_CONFORMANCE_KUBECONFIG="$kubeconfig" \
	AF_CONFORMANCE_APISERVER="$node_ip:6443" AF_CONFORMANCE_INGRESS="127.0.0.1:$ingress_port" \
	AF_CONFORMANCE_INGRESS_CONTROLLER=kube-system/app.kubernetes.io/name=traefik \
	AF_CONFORMANCE_REPORT="$report" ./hack/conformance.sh
