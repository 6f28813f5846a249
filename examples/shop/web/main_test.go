package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestWebCallsWorker(t *testing.T) {
	worker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/work" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"service":"worker","instance":"w-1"}`))
	}))
	defer worker.Close()
	web := httptest.NewServer(newHandler(worker.URL, worker.Client()))
	defer web.Close()

	resp, err := http.Get(web.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		Service string
		Worker  map[string]string
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || got.Service != "web" || got.Worker["instance"] != "w-1" {
		t.Fatalf("%d %+v", resp.StatusCode, got)
	}

	worker.Close()
	resp, err = http.Get(web.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("worker down: status %d, want 502", resp.StatusCode)
	}
	resp, err = http.Get(web.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("healthz %d", resp.StatusCode)
	}
}
