#!/usr/bin/env bash
# Installs the Debian packages a make target needs, only when a command is missing.
# Usage: hack/deps.sh test|bench
set -euo pipefail
declare -A pkg=(
  [curl]=curl [dig]=bind9-dnsutils [ip]=iproute2 [nft]=nftables [node]=nodejs [npm]=npm [git]=git
  [dockerd]=docker.io [shellcheck]=shellcheck [busybox]=busybox-static
  [squid]=squid [tinyproxy]=tinyproxy [dnsmasq]=dnsmasq-base [dnsperf]=dnsperf [hey]=hey
)
case "${1:-test}" in
  test)  want=(curl dig ip nft node npm git dockerd shellcheck busybox) ;;
  bench) want=(curl ip squid tinyproxy dnsmasq dnsperf hey) ;;
  *) echo "usage: $0 test|bench" >&2; exit 2 ;;
esac
missing=()
for c in "${want[@]}"; do
  command -v "$c" >/dev/null 2>&1 || missing+=("${pkg[$c]}")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "hack/deps.sh: missing ${missing[*]}; run as root (or install them) first" >&2
  exit 1
fi
echo "installing ${missing[*]}"
# Package scripts must not start services (docker.io would start a daemon with its own
# iptables and masquerade rules): a policy-rc.d that refuses, unless one is already there.
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
  chmod 755 /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
