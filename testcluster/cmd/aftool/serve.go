package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/antifailure/af/github/delivery"
	"github.com/antifailure/af/testcluster/fakenet"
)

func serve(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	tcp := fs.String("tcp", ":8080", "TCP echo address (empty: none)")
	udp := fs.String("udp", ":8081", "UDP echo address (empty: none)")
	hook := fs.String("webhook", "", "address of a webhook receiver that verifies X-Hub-Signature-256 (empty: none)")
	secretEnv := fs.String("secret-env", "WEBHOOK_SECRET", "the variable holding the webhook receiver's secret")
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
	if *hook != "" {
		secret := os.Getenv(*secretEnv)
		if secret == "" {
			return fmt.Errorf("serve: -webhook needs the secret in %s", *secretEnv)
		}
		n++
		go func() { errs <- serveWebhook(ctx, *hook, []byte(secret), logger) }()
	}
	if n == 0 {
		return fmt.Errorf("serve: nothing to serve")
	}
	fmt.Printf("serving tcp=%q udp=%q webhook=%q\n", *tcp, *udp, *hook)
	for range n {
		if err := <-errs; err != nil {
			return err
		}
	}
	return nil
}

// serveWebhook answers POST /webhook with 200 "verified EVENT" when X-Hub-Signature-256 is the
// body's HMAC-SHA256 under secret, 401 otherwise, as a preview's webhook handler would.
func serveWebhook(ctx context.Context, addr string, secret []byte, logger *log.Logger) error {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /webhook", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		if !delivery.Verify(secret, body, r.Header.Get(delivery.SignatureHeader)) {
			logger.Printf("webhook: signature refused (event %q)", r.Header.Get("X-GitHub-Event"))
			http.Error(w, "signature refused", http.StatusUnauthorized)
			return
		}
		logger.Printf("webhook: verified %q delivery %s", r.Header.Get("X-GitHub-Event"), r.Header.Get("X-GitHub-Delivery"))
		fmt.Fprintf(w, "verified %s\n", r.Header.Get("X-GitHub-Event"))
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		return err
	}
	return nil
}
