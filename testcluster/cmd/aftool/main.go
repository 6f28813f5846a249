// Command aftool is the network test tool inside the test cluster's test image:
// TCP and UDP echo servers, and clients that report whether a route works.
//
//	aftool serve [-tcp :8080] [-udp :8081]
//	aftool tcp HOST:PORT        # exit 0 when the echo came back
//	aftool connect HOST:PORT    # exit 0 when the TCP handshake completed (any server)
//	aftool linklocal [-ports 53,8080] [-timeout 3s]  # exit 0 when anything on the IPv6 segment answered
//	aftool udp HOST:PORT
//	aftool dns [-server HOST:PORT] NAME
//	aftool http URL             # exit 0 on any HTTP answer; prints the body
//	aftool probe -tcp HOST:PORT -udp HOST:PORT [-interval 50ms] [-for 3s]
//	aftool forward -listen ADDR -to ADDR   # TCP relay (the node's loopback ingress)
//	aftool fake-internet | fake-metadata [-ipv6]   # the test hosts, run inside their namespaces
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "aftool:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: aftool serve|tcp|udp|connect|dns|http|probe ...")
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:])
	case "tcp", "udp":
		return echo(ctx, args[0], args[1:])
	case "connect":
		return connect(ctx, args[1:])
	case "linklocal":
		return linkLocal(ctx, args[1:])
	case "dns":
		return dns(ctx, args[1:])
	case "http":
		return httpGet(ctx, args[1:])
	case "probe":
		return probe(ctx, args[1:])
	case "forward":
		return forward(ctx, args[1:])
	case "fake-internet":
		return fakeInternet(ctx, slices.Contains(args[1:], "-ipv6"))
	case "fake-metadata":
		return fakeMetadata(ctx, slices.Contains(args[1:], "-ipv6"))
	default:
		return fmt.Errorf("unknown command %q", args[0])
	}
}
