package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"sync"
	"time"

	"github.com/antifailure/af/testcluster/fakenet"
	"github.com/antifailure/af/testcluster/internal/layout"
)

// fakeInternet serves the fake internet's hosts; run inside its namespace. With ipv6, the public
// host and the resolver also answer on their IPv6 addresses (a dual-stack cluster).
func fakeInternet(ctx context.Context, ipv6 bool) error {
	logger := log.New(os.Stdout, "", log.LstdFlags|log.Lmicroseconds)
	plan := fakenet.InternetPlan{
		PublicIP:   layout.PublicIP,
		ResolverIP: layout.ResolverIP,
		Hosts:      layout.FakeHosts(),
		HTTPHosts: map[string]string{
			layout.AllowedAPIHost: layout.AllowedAPIIP,
			layout.BlockedAPIHost: layout.BlockedAPIIP,
		},
	}
	if ipv6 {
		plan.PublicIP6, plan.ResolverIP6 = layout.PublicIP6, layout.ResolverIP6
	}
	return fakenet.ServeInternet(ctx, plan, logger)
}

// fakeMetadata serves the fake metadata host; run inside its namespace. With ipv6, also on its
// IPv6 address.
func fakeMetadata(ctx context.Context, ipv6 bool) error {
	logger := log.New(os.Stdout, "", log.LstdFlags|log.Lmicroseconds)
	if !ipv6 {
		return fakenet.ServeMetadata(ctx, layout.MetadataIP, logger)
	}
	errs := make(chan error, 2)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, ip := range []string{layout.MetadataIP, layout.MetadataIP6} {
		go func() { errs <- fakenet.ServeMetadata(ctx, ip, logger) }()
	}
	err := <-errs
	cancel()
	return errors.Join(err, <-errs)
}

// forward relays TCP connections from a loopback address to another address.
func forward(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("forward", flag.ContinueOnError)
	listen := fs.String("listen", "", "address to listen on (loopback)")
	to := fs.String("to", "", "address to relay to")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *listen == "" || *to == "" {
		return fmt.Errorf("usage: aftool forward -listen ADDR -to ADDR")
	}
	return fakenet.ServeTCP(ctx, *listen, "forward", func(c net.Conn) { relay(ctx, c, *to) })
}

func relay(ctx context.Context, c net.Conn, to string) {
	defer c.Close()
	d := net.Dialer{Timeout: 5 * time.Second}
	up, err := d.DialContext(ctx, "tcp", to)
	if err != nil {
		return
	}
	defer up.Close()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _, _ = io.Copy(up, c); _ = up.(*net.TCPConn).CloseWrite() }()
	go func() { defer wg.Done(); _, _ = io.Copy(c, up); _ = c.(*net.TCPConn).CloseWrite() }()
	wg.Wait()
}
