// Package control is the sidecar's control endpoint: what `af net log` and `af inbox` read.
// It serves the decision log with filters, and the inbox (list, get, wait). It listens on a
// port the environment's services cannot reach.
package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/antifailure/af/sidecar/decisionlog"
	"github.com/antifailure/af/sidecar/inbox"
)

// MaxWait bounds a wait request.
const MaxWait = 5 * time.Minute

// Handler returns the control API.
func Handler(log *decisionlog.Log, box *inbox.Store, ready func() bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if ready != nil && !ready() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /v1/log", func(w http.ResponseWriter, r *http.Request) {
		f, err := logFilter(r)
		if err != nil {
			fail(w, http.StatusBadRequest, err)
			return
		}
		write(w, http.StatusOK, map[string]any{"entries": log.Query(f), "dropped_lines": log.Dropped()})
	})
	mux.HandleFunc("GET /v1/inbox", func(w http.ResponseWriter, r *http.Request) {
		write(w, http.StatusOK, map[string]any{"messages": box.List(inboxFilter(r))})
	})
	mux.HandleFunc("GET /v1/inbox/wait", func(w http.ResponseWriter, r *http.Request) {
		timeout := 30 * time.Second
		if s := r.URL.Query().Get("timeout"); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil || d <= 0 || d > MaxWait {
				fail(w, http.StatusBadRequest, fmt.Errorf("timeout %q: a duration from 1ms to %s", s, MaxWait))
				return
			}
			timeout = d
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		m, err := box.Wait(ctx, inboxFilter(r), r.URL.Query().Get("after"))
		if errors.Is(err, context.DeadlineExceeded) {
			fail(w, http.StatusGatewayTimeout, fmt.Errorf("no matching message within %s", timeout))
			return
		}
		if err != nil {
			return // the client went away
		}
		write(w, http.StatusOK, m)
	})
	mux.HandleFunc("GET /v1/inbox/{id}", func(w http.ResponseWriter, r *http.Request) {
		m, ok := box.Get(r.PathValue("id"))
		if !ok {
			fail(w, http.StatusNotFound, fmt.Errorf("no message %q (the inbox keeps the newest messages only)", r.PathValue("id")))
			return
		}
		write(w, http.StatusOK, m)
	})
	return mux
}

func logFilter(r *http.Request) (decisionlog.Filter, error) {
	q := r.URL.Query()
	var f decisionlog.Filter
	if s := q.Get("blocked"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return f, fmt.Errorf("blocked=%q: true or false", s)
		}
		f.Blocked = b
	}
	if s := q.Get("since"); s != "" {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			f.Since = t
		} else if d, err := time.ParseDuration(s); err == nil && d > 0 {
			f.Since = time.Now().Add(-d)
		} else {
			return f, fmt.Errorf("since=%q: an RFC 3339 time or a duration like 10m", s)
		}
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return f, fmt.Errorf("limit=%q: a whole number of 1 or more", s)
		}
		f.Limit = n
	}
	return f, nil
}

func inboxFilter(r *http.Request) inbox.Filter {
	q := r.URL.Query()
	return inbox.Filter{Kind: q.Get("kind"), To: q.Get("to"), Subject: q.Get("subject"), Host: q.Get("host")}
}

func write(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func fail(w http.ResponseWriter, status int, err error) {
	write(w, status, map[string]string{"error": err.Error()})
}
