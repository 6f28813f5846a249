package inbox

import (
	"context"
	"encoding/json"
	"net"
	"net/smtp"
	"strings"
	"testing"
	"time"

	"github.com/antifailure/af/cmd/af/internal/cmdtest"
	"github.com/antifailure/af/failure"
	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/runtime/runtimetest"
	sidecarinbox "github.com/antifailure/af/sidecar/inbox"
)

// mail sends one message to the sidecar's own SMTP server over loopback, with net/smtp, as an
// application would.
func mail(t *testing.T, o *runtimetest.Observed, to, subject string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srv := &sidecarinbox.SMTPServer{Store: o.Box, Hostname: "sidecar.test", IdleTimeout: 5 * time.Second}
	go func() {
		c, err := ln.Accept()
		if err == nil {
			srv.ServeConn(context.Background(), c)
		}
	}()
	msg := "From: shop@shop.test\r\nTo: " + to + "\r\nSubject: " + subject + "\r\nX-Api-Key: sk_live_123\r\n\r\nYour order has shipped.\r\n"
	if err := smtp.SendMail(ln.Addr().String(), nil, "shop@shop.test", []string{to}, []byte(msg)); err != nil {
		t.Fatal(err)
	}
}

func TestInbox(t *testing.T) {
	o := runtimetest.NewObserved()
	// The mail comes from loopback: here the address of the web service's pod.
	o.Pods = []afruntime.Instance{{Name: "shop-web-1", Service: "web", Workload: "service", Addresses: []string{"127.0.0.1"}}}
	mail(t, o, "buyer@example.test", "Order 17 shipped")

	r := cmdtest.Exec(t, cmdtest.Env{Runtime: o}, NewCmdInbox, "list", "--env", "e")
	if r.Err != nil || !strings.Contains(r.Out, "mail  from shop@shop.test to buyer@example.test: Order 17 shipped  sent by web/shop-web-1") {
		t.Fatalf("list: %v\n%s", r.Err, r.Out)
	}
	r = cmdtest.Exec(t, cmdtest.Env{Runtime: o, JSON: true}, NewCmdInbox, "list", "--env", "e")
	var named struct{ Messages []sidecarinbox.Message }
	if err := json.Unmarshal([]byte(r.Out), &named); err != nil || len(named.Messages) != 1 || named.Messages[0].Client != "127.0.0.1" || named.Messages[0].Service != "web" || named.Messages[0].Instance != "shop-web-1" {
		t.Fatalf("list -o json names the sender: %v %s", err, r.Out)
	}
	id := named.Messages[0].ID
	r = cmdtest.Exec(t, cmdtest.Env{Runtime: o}, NewCmdInbox, "show", id, "--env", "e")
	if r.Err != nil || !strings.Contains(r.Out, "Your order has shipped.") || !strings.Contains(r.Out, "[redacted]") || strings.Contains(r.Out, "sk_live_123") {
		t.Fatalf("show: %v\n%s", r.Err, r.Out)
	}
	r = cmdtest.Exec(t, cmdtest.Env{Runtime: o, JSON: true}, NewCmdInbox, "list", "--env", "e", "--kind", "http")
	var got struct{ Messages []sidecarinbox.Message }
	if err := json.Unmarshal([]byte(r.Out), &got); err != nil || len(got.Messages) != 0 {
		t.Fatalf("list --kind http -o json: %v %s", err, r.Out)
	}

	// wait: one that arrives while waiting ends it with exit 0; none within the timeout is
	// AF-RUN-054.
	done := make(chan cmdtest.Run, 1)
	go func() {
		done <- cmdtest.Exec(t, cmdtest.Env{Runtime: o}, NewCmdInbox, "wait", "--env", "e", "--to", "late@example.test", "--timeout", "20s")
	}()
	time.Sleep(300 * time.Millisecond)
	mail(t, o, "late@example.test", "Late")
	if r := <-done; r.Err != nil || !strings.Contains(r.Out, "late@example.test") || !strings.Contains(r.Out, "Late") {
		t.Fatalf("wait: %v\n%s", r.Err, r.Out)
	}
	r = cmdtest.Exec(t, cmdtest.Env{Runtime: o}, NewCmdInbox, "wait", "--env", "e", "--to", "nobody@example.test", "--timeout", "1s")
	if e := failure.As(r.Err); e == nil || e.Entry != failure.NothingArrived || e.Entry.Exit != 1 {
		t.Fatalf("wait with nothing: %v", r.Err)
	}
	r = cmdtest.Exec(t, cmdtest.Env{Runtime: o}, NewCmdInbox, "wait", "--env", "e")
	if e := failure.As(r.Err); e == nil || e.Entry != failure.UsageInvalid {
		t.Fatalf("wait for nothing in particular: %v", r.Err)
	}
	if n, _ := o.Links(); n != 0 {
		t.Fatalf("%d links left open", n)
	}
}
