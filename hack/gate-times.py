#!/usr/bin/env python3
"""Reads one pod's gate log and, after a line "APP", its application's first log line (both
from `kubectl logs --timestamps`) and prints one line: the gate's time to its verdict, its wait
for the sidecar, its rounds, the time from its last line to the application's first (ms, "-"
when the application has not written yet), the attempts that were refused and that timed out; and, given a time (ns since the epoch) as its
argument, the time from it to the application's first line (ms). For a pod without a gate
the first six are "-". Used by hack/bench-up.sh."""
import json
import re
import sys
from datetime import datetime, timezone


def stamp(line):
    """The kubectl timestamp at the start of a line, in ns since the epoch (None: none)."""
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?Z ", line)
    if not m:
        return None
    sec = datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc).timestamp()
    frac = (m.group(2) or "0").ljust(9, "0")[:9]
    return int(sec) * 10**9 + int(frac)


def main():
    gate, app = [], []
    into = gate
    for line in sys.stdin:
        if line.strip() == "APP":
            into = app
            continue
        into.append(line.rstrip("\n"))
    verdict = None
    refused = timeouts = 0
    last = None
    for line in gate:
        t = stamp(line)
        if t is not None:
            last = t if last is None else max(last, t)
        rest = line.split(" ", 1)[1] if t is not None else line
        if rest.startswith("AF-VERDICT "):
            verdict = json.loads(rest[len("AF-VERDICT "):])
        elif "outcome=denied" in rest:
            if 'detail="timeout"' in rest:
                timeouts += 1
            elif 'detail="connection refused"' in rest:
                refused += 1
    first = stamp(app[0]) if app else None
    since = ""
    if len(sys.argv) > 1:
        since = " %d" % ((first - int(sys.argv[1])) // 10**6) if first is not None else " -"
    if verdict is None:
        if gate or not since:
            return  # a gate without a verdict: nothing to time
        print("- - - - - -" + since)
        return
    total = verdict["ms"]
    waited = verdict.get("sidecar_ms", 0)
    handoff = "%d" % ((first - last) // 10**6) if first is not None and last is not None else "-"
    print(int(total), int(waited), int(total - waited), handoff, refused, timeouts, end="")
    print(since)


if __name__ == "__main__":
    main()
