// Command shop-web is the example app's web service: it answers on / with what the worker
// says, by calling the worker by its service name, and on /healthz when it can serve.
// `shop-web migrate` is its migration: it runs once before the web service starts.
//
// Two endpoints show what the environment's sidecar does with what leaves: GET /track calls a
// tracking host no egress rule allows (TRACKER_URL), so the sidecar blocks it and `af net log
// --blocked` shows it; POST /order mails a confirmation through SMTP_ADDR to a host the
// manifest captures, so `af inbox` has it and no mail leaves.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/smtp"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "migrate" {
		fmt.Println("shop-web: migration applied (schema version 1)")
		return
	}
	worker := os.Getenv("WORKER_URL")
	if worker == "" {
		worker = "http://worker:8080"
	}
	addr := ":" + envOr("PORT", "8080")
	out := outbound{
		tracker: envOr("TRACKER_URL", "http://blocked-api.af.test/track"),
		smtp:    envOr("SMTP_ADDR", "smtp.mail.test:25"),
		mailTo:  envOr("ORDER_MAIL_TO", "orders@shop.mail.test"),
	}
	srv := &http.Server{Addr: addr, Handler: newHandler(worker, &http.Client{Timeout: 5 * time.Second}, out), ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	log.Printf("shop-web listening on %s, worker at %s", addr, worker)
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// outbound is where the two endpoints that leave the environment go.
type outbound struct {
	tracker string // a URL no egress rule allows
	smtp    string // host:port of a mail server the manifest captures
	mailTo  string
}

func newHandler(worker string, client *http.Client, out outbound) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /track", func(w http.ResponseWriter, r *http.Request) {
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, out.tracker, nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		resp, err := client.Do(req)
		if err != nil {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"tracker": out.tracker, "error": err.Error()})
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"tracker": out.tracker, "status": resp.StatusCode, "answer": strings.TrimSpace(string(body))})
	})
	mux.HandleFunc("POST /order", func(w http.ResponseWriter, r *http.Request) {
		id := fmt.Sprintf("%d", time.Now().UnixNano()%1000000)
		msg := "From: shop@shop.test\r\nTo: " + out.mailTo + "\r\nSubject: Order " + id + " confirmed\r\n\r\nThank you for your order " + id + ".\r\n"
		if err := smtp.SendMail(out.smtp, nil, "shop@shop.test", []string{out.mailTo}, []byte(msg)); err != nil {
			http.Error(w, "mail not sent: "+err.Error(), http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"order": id, "mailed": out.mailTo})
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, worker+"/work", nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, "worker unreachable: "+err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		var answer map[string]any
		if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&answer); err != nil {
			http.Error(w, "worker answered badly: "+err.Error(), http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"service": "web", "worker": answer})
	})
	return mux
}
