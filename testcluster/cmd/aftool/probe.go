package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/antifailure/af/testcluster/fakenet"
)

// probe tries the routes every interval from the moment the process starts
// (which is the container's start) and prints one line per attempt, then a
// summary: how many attempts got through and when the last one did.
func probe(ctx context.Context, args []string) error {
	start := time.Now()
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	tcp := fs.String("tcp", "", "TCP echo address")
	udp := fs.String("udp", "", "UDP echo address")
	interval := fs.Duration("interval", 50*time.Millisecond, "time between attempts")
	total := fs.Duration("for", 3*time.Second, "how long to probe")
	timeout := fs.Duration("timeout", 200*time.Millisecond, "per-attempt timeout")
	if err := fs.Parse(args); err != nil {
		return err
	}
	type route struct {
		name, addr string
		f          func(context.Context, string, time.Duration) error
		ok         int
		lastOK     time.Duration
	}
	var routes []*route
	if *tcp != "" {
		routes = append(routes, &route{name: "tcp", addr: *tcp, f: fakenet.TCPEcho})
	}
	if *udp != "" {
		routes = append(routes, &route{name: "udp", addr: *udp, f: fakenet.UDPEcho})
	}
	if len(routes) == 0 {
		return fmt.Errorf("probe: give -tcp and/or -udp")
	}
	attempts := 0
	for time.Since(start) < *total && ctx.Err() == nil {
		attempts++
		for _, r := range routes {
			at := time.Since(start)
			err := r.f(ctx, r.addr, *timeout)
			if err == nil {
				r.ok++
				r.lastOK = at
			}
			fmt.Printf("attempt %s t=%dms ok=%t\n", r.name, at.Milliseconds(), err == nil)
		}
		time.Sleep(*interval)
	}
	for _, r := range routes {
		last := int64(-1)
		if r.ok > 0 {
			last = r.lastOK.Milliseconds()
		}
		fmt.Printf("SUMMARY %s attempts=%d ok=%d last_ok_ms=%d\n", r.name, attempts, r.ok, last)
	}
	return nil
}
