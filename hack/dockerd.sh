#!/usr/bin/env bash
# A private container daemon for the build tests: hack/dockerd.sh start|stop.
# It never touches the host's network: no iptables rules, no masquerade, no bridge (builds get
# no network at all; the tests' Dockerfiles need none). Its data lives in ~/.cache/af/docker,
# its sockets under /run/af-docker. Prints the DOCKER_HOST to use.
set -euo pipefail
run=/run/af-docker
sock=unix://$run/docker.sock
case "${1:-}" in
  start)
    mkdir -p "$run"
    if DOCKER_HOST=$sock docker version >/dev/null 2>&1; then echo "$sock"; exit 0; fi
    dockerd --host "$sock" --data-root "$HOME/.cache/af/docker" --exec-root "$run/exec" \
      --pidfile "$run/docker.pid" --iptables=false --ip6tables=false --ip-masq=false \
      --bridge=none >"$run/dockerd.log" 2>&1 &
    for _ in $(seq 60); do
      DOCKER_HOST=$sock docker version >/dev/null 2>&1 && { echo "$sock"; exit 0; }
      sleep 0.5
    done
    echo "hack/dockerd.sh: dockerd did not answer; its log:" >&2
    tail -20 "$run/dockerd.log" >&2
    exit 1 ;;
  stop)
    if [ -f "$run/docker.pid" ]; then
      pid=$(cat "$run/docker.pid")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    fi
    # A container on the host network leaves the daemon's handle on it mounted (exec/netns/default).
    awk -v r="$run/" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r | while read -r m; do umount "$m" || umount -l "$m"; done
    rm -rf "$run" ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
