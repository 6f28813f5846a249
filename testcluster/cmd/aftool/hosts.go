package main

import (
	"context"
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

// fakeInternet serves the fake internet's hosts; run inside its namespace.
func fakeInternet(ctx context.Context) error {
	logger := log.New(os.Stdout, "", log.LstdFlags|log.Lmicroseconds)
	return fakenet.ServeInternet(ctx, fakenet.InternetPlan{
		PublicIP:   layout.PublicIP,
		ResolverIP: layout.ResolverIP,
		Hosts:      layout.FakeHosts(),
		HTTPHosts: map[string]string{
			layout.AllowedAPIHost: layout.AllowedAPIIP,
			layout.BlockedAPIHost: layout.BlockedAPIIP,
		},
	}, logger)
}

// fakeMetadata serves the fake metadata host; run inside its namespace.
func fakeMetadata(ctx context.Context) error {
	return fakenet.ServeMetadata(ctx, layout.MetadataIP, log.New(os.Stdout, "", log.LstdFlags|log.Lmicroseconds))
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
