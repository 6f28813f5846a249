package inbox

import (
	"context"
	"net"
	"net/http"
	"net/smtp"
	"strings"
	"testing"
	"time"
)

func serveSMTP(t *testing.T, s *SMTPServer) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.ServeConn(ctx, c)
		}
	}()
	return ln.Addr().String()
}

func TestSMTPCaptureWithGoClient(t *testing.T) {
	store := NewStore(10, 1<<10)
	var logged []Message
	addr := serveSMTP(t, &SMTPServer{Store: store, Hostname: "sidecar.test", OnMessage: func(m Message) { logged = append(logged, m) }})

	msg := "From: app@shop.test\r\nTo: alice@example.test\r\nSubject: =?utf-8?q?Your_order_=E2=9C=93?=\r\nX-Api-Key: sk_live_123\r\n\r\nHello Alice,\r\n.hidden dot line\r\n"
	auth := smtp.PlainAuth("", "user", "hunter2", "127.0.0.1")
	if err := smtp.SendMail(addr, auth, "app@shop.test", []string{"alice@example.test", "bob@example.test"}, []byte(msg)); err != nil {
		t.Fatalf("SendMail: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	m, err := store.Wait(ctx, Filter{To: "ALICE@", Subject: "order"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if m.From != "app@shop.test" || len(m.To) != 2 || m.Subject != "Your order ✓" || m.Kind != KindSMTP {
		t.Errorf("message = %+v", m)
	}
	if !strings.Contains(m.Body, "\r\n.hidden dot line") {
		t.Errorf("dot-stuffing not undone: %q", m.Body)
	}
	if m.Header["X-Api-Key"][0] != "[redacted]" {
		t.Errorf("credential header stored: %v", m.Header)
	}
	if strings.Contains(m.Body+m.From, "hunter2") {
		t.Error("AUTH password stored")
	}
	if len(logged) != 1 || logged[0].ID != m.ID {
		t.Errorf("OnMessage = %v", logged)
	}
}

func TestSMTPRefusesSTARTTLSCleanly(t *testing.T) {
	addr := serveSMTP(t, &SMTPServer{Store: NewStore(10, 100)})
	c, err := smtp.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); ok {
		t.Fatal("STARTTLS advertised")
	}
	err = c.StartTLS(nil)
	if err == nil || !strings.Contains(err.Error(), "502") {
		t.Fatalf("StartTLS = %v, want 502", err)
	}
	// The session goes on after the refusal.
	if err := c.Mail("a@b.test"); err != nil {
		t.Fatalf("MAIL after refused STARTTLS: %v", err)
	}
	if err := c.Quit(); err != nil {
		t.Fatal(err)
	}
}

func TestSMTPProtocolErrors(t *testing.T) {
	addr := serveSMTP(t, &SMTPServer{Store: NewStore(10, 100)})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 512)
	read := func() string {
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, _ := c.Read(buf)
		return string(buf[:n])
	}
	read() // greeting
	for _, step := range []struct{ send, want string }{
		{"RCPT TO:<a@b>\r\n", "503"},
		{"DATA\r\n", "503"},
		{"MAIL FROM a@b\r\n", "501"},
		{"BOGUS\r\n", "500"},
		{"AUTH CRAM-MD5\r\n", "504"},
		{"NOOP\r\n", "250"},
		{strings.Repeat("x", 5000) + "\r\n", "500 5.5.2 line too long"},
	} {
		if _, err := c.Write([]byte(step.send)); err != nil {
			t.Fatal(err)
		}
		if got := read(); !strings.HasPrefix(got, step.want) {
			t.Errorf("%q -> %q, want %s", truncate(step.send), got, step.want)
		}
	}
}

func truncate(s string) string {
	if len(s) > 20 {
		return s[:20]
	}
	return s
}

func TestStoreBoundsAndWait(t *testing.T) {
	s := NewStore(2, 4)
	first := s.Add(Message{Kind: KindHTTP, Host: "a.test", Body: "123456"})
	if !first.BodyTruncated || first.Body != "1234" {
		t.Errorf("body bound: %+v", first)
	}
	s.Add(Message{Kind: KindHTTP, Host: "b.test"})
	s.Add(Message{Kind: KindHTTP, Host: "c.test"})
	if l := s.List(Filter{}); len(l) != 2 || l[0].Host != "b.test" {
		t.Errorf("bound: %+v", l)
	}
	if _, ok := s.Get(first.ID); ok {
		t.Error("evicted message still found")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.Wait(ctx, Filter{Host: "d.test"}, ""); err == nil {
		t.Error("Wait returned without a match")
	}
	done := make(chan Message)
	go func() {
		m, _ := s.Wait(context.Background(), Filter{Host: "D.test"}, "")
		done <- m
	}()
	time.Sleep(20 * time.Millisecond)
	s.Add(Message{Kind: KindHTTP, Host: "d.test"})
	select {
	case m := <-done:
		if m.Host != "d.test" {
			t.Errorf("woke with %+v", m)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Wait did not wake")
	}
	h := Redact(http.Header{"Authorization": {"Bearer x"}, "X-Github-Token": {"t"}, "Accept": {"*/*"}})
	if h["Authorization"][0] != "[redacted]" || h["X-Github-Token"][0] != "[redacted]" || h["Accept"][0] != "*/*" {
		t.Errorf("Redact = %v", h)
	}
}
