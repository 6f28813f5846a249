package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
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
	web := httptest.NewServer(newHandler(worker.URL, worker.Client(), outbound{}))
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

// GET /track reports what the tracker answered (here a stand-in for the sidecar's refusal);
// POST /order mails through the SMTP server it is given.
func TestTrackAndOrder(t *testing.T) {
	tracker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "af sidecar: blocked", http.StatusForbidden)
	}))
	defer tracker.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 1)
	go fakeSMTP(ln, got)
	web := httptest.NewServer(newHandler("http://127.0.0.1:1", tracker.Client(), outbound{tracker: tracker.URL + "/track", smtp: ln.Addr().String(), mailTo: "orders@shop.mail.test"}))
	defer web.Close()

	resp, err := http.Get(web.URL + "/track")
	if err != nil {
		t.Fatal(err)
	}
	var tr struct {
		Status int
		Answer string
	}
	_ = json.NewDecoder(resp.Body).Decode(&tr)
	resp.Body.Close()
	if tr.Status != 403 || tr.Answer != "af sidecar: blocked" {
		t.Fatalf("/track: %+v", tr)
	}
	resp, err = http.Post(web.URL+"/order", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/order: %d", resp.StatusCode)
	}
	if m := <-got; !strings.Contains(m, "To: orders@shop.mail.test") || !strings.Contains(m, "confirmed") {
		t.Fatalf("mail: %q", m)
	}
}

// fakeSMTP takes one message, as the sidecar's SMTP listener would, and sends its data to got.
func fakeSMTP(ln net.Listener, got chan<- string) {
	c, err := ln.Accept()
	if err != nil {
		return
	}
	defer c.Close()
	r := bufio.NewReader(c)
	fmt.Fprintf(c, "220 fake ESMTP\r\n")
	var data strings.Builder
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		switch cmd := strings.ToUpper(strings.TrimSpace(line)); {
		case strings.HasPrefix(cmd, "EHLO"), strings.HasPrefix(cmd, "HELO"):
			fmt.Fprintf(c, "250 fake\r\n")
		case cmd == "DATA":
			fmt.Fprintf(c, "354 go on\r\n")
			for {
				l, err := r.ReadString('\n')
				if err != nil || l == ".\r\n" {
					break
				}
				data.WriteString(l)
			}
			fmt.Fprintf(c, "250 kept\r\n")
			got <- data.String()
		case cmd == "QUIT":
			fmt.Fprintf(c, "221 bye\r\n")
			return
		default:
			fmt.Fprintf(c, "250 ok\r\n")
		}
	}
}
