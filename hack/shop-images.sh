# shellcheck shell=bash
# shellcheck disable=SC2154 # $af and $work are the sourcing script's.
# Sourced by hack/demo.sh and make bench-up: imports into the local test cluster the engine
# image of bin/af and the example's two services, built from their static binaries, and sets
# $web_image and $worker_image. Needs $af, $work and an afcluster function.
"$af" engine-image --tar "$work/engine.tar" >/dev/null
afcluster import "$work/engine.tar"
(cd examples/shop && CGO_ENABLED=0 go build -trimpath -o "$work/shop-web" ./web && CGO_ENABLED=0 go build -trimpath -o "$work/shop-worker" ./worker)
tag=demo-$(sha256sum "$work/shop-web" "$work/shop-worker" | sha256sum | cut -c1-12)
web_image=af.local/shop-web:$tag
worker_image=af.local/shop-worker:$tag
afcluster image "$web_image" "$work/shop-web"
afcluster image "$worker_image" "$work/shop-worker"
# Where the probe and the gates try to get out (the test cluster's fake internet, and the node's
# kubelet and host-network service in the NodePort range): `afcluster env` prints them.
eval "$(afcluster env | grep '^export AF_GATE_')"
# The test cluster's ingress controller: Traefik's pods (let in to web services) and where it
# listens on this machine (preview hosts do not resolve here); plain HTTP.
export AF_INGRESS_CONTROLLER=af-ingress/app.kubernetes.io/name=traefik AF_INGRESS_ADDRESS=127.0.0.1:18080 AF_URL_SCHEME=http
