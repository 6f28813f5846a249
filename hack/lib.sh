# shellcheck shell=bash
# Shared by the hack/ scripts: sourced, never run. The test cluster's command and make test's
# phase reader are each built once per script (go build is cached), not `go run` each call.
export PATH=/usr/local/go/bin:$PATH
mkdir -p bin
go build -trimpath -o bin/afcluster ./testcluster/cmd/afcluster
go build -trimpath -o bin/testrun ./internal/testrun

afcluster() { bin/afcluster "$@"; }

# build_af: bin/af as make build makes it (static, -trimpath, the version stamped), the one way
# the scripts build af.
build_af() { make -s build >/dev/null; }

# gophase NAME [GO TEST ARGS...]: a go test phase of make test, through the reader, under the
# race detector (the cluster tests' waits, teardowns and probes run goroutines of their own).
gophase() {
	local name=$1
	shift
	CGO_ENABLED=1 bin/testrun go -phase "$name" -v -- -race -count=1 -timeout 40m "$@"
}

# step NAME COMMAND...: a phase of make test that is not go test, timed.
step() {
	local name=$1
	shift
	bin/testrun step -phase "$name" -- "$@"
}

# together FUNCTION...: runs the functions at once (phases that must each refuse on the same
# cluster state: load cannot make a refusal pass), each into its own log, says every minute
# which still run, then prints each log whole; fails when any failed, after all ended.
together() {
	local pids=() logs=() names=() rc=0 i log ticker
	for fn in "$@"; do
		log=$(mktemp)
		"$fn" >"$log" 2>&1 &
		pids+=($!)
		logs+=("$log")
		names+=("$fn")
	done
	echo "== together: ${names[*]} (each one's output follows when all have ended)"
	(
		start=$(date +%s)
		while sleep 60; do
			running=()
			for i in "${!pids[@]}"; do kill -0 "${pids[$i]}" 2>/dev/null && running+=("${names[$i]}"); done
			echo "   ... $(($(date +%s) - start))s: still running: ${running[*]}"
		done
	) &
	ticker=$!
	for i in "${!pids[@]}"; do
		if wait "${pids[$i]}"; then s=ok; else s=FAILED; rc=1; fi
		echo "---- ${names[$i]}: $s"
		cat "${logs[$i]}"
		rm -f "${logs[$i]}"
	done
	kill "$ticker" 2>/dev/null || true
	wait "$ticker" 2>/dev/null || true
	return $rc
}
