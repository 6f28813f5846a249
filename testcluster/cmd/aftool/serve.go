package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"

	"github.com/antifailure/af/testcluster/fakenet"
)

func serve(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	tcp := fs.String("tcp", ":8080", "TCP echo address (empty: none)")
	udp := fs.String("udp", ":8081", "UDP echo address (empty: none)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	logger := log.New(os.Stdout, "", log.LstdFlags|log.Lmicroseconds)
	errs := make(chan error, 2)
	n := 0
	if *tcp != "" {
		n++
		go func() { errs <- fakenet.ServeTCPEcho(ctx, *tcp, logger) }()
	}
	if *udp != "" {
		n++
		go func() { errs <- fakenet.ServeUDPEcho(ctx, *udp, logger) }()
	}
	if n == 0 {
		return fmt.Errorf("serve: nothing to serve")
	}
	fmt.Printf("serving tcp=%q udp=%q\n", *tcp, *udp)
	for range n {
		if err := <-errs; err != nil {
			return err
		}
	}
	return nil
}
