// Command shop-worker is the example app's worker: it answers /work with who it is, so the
// web service can show that it reached the worker by its service name.
package main

import (
	"encoding/json"
	"log"
	"net/http"
	"os"
	"time"
)

func main() {
	addr := ":" + envOr("PORT", "8080")
	host, _ := os.Hostname()
	srv := &http.Server{Addr: addr, Handler: newHandler(host), ReadHeaderTimeout: 5 * time.Second}
	log.Printf("shop-worker listening on %s", addr)
	log.Fatal(srv.ListenAndServe())
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func newHandler(host string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /work", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"service": "worker", "instance": host})
	})
	return mux
}
