package gate

// One round: the sidecar checked, every route tried at once, the sidecar checked again.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// runRound checks the sidecar, tries every route once, concurrently, and checks the sidecar
// again.
func runRound(ctx context.Context, cfg Config, round int, begun chan<- time.Time) roundResult {
	r := roundResult{n: round}
	r.before = sidecarUp(ctx, cfg)
	r.began = time.Now()
	begun <- r.began
	if r.before != nil {
		return r
	}
	r.attempts = tryAll(ctx, cfg, round)
	r.after = sidecarUp(ctx, cfg)
	return r
}

// tryAll tries every route once, concurrently.
func tryAll(ctx context.Context, cfg Config, round int) []Attempt {
	out := make([]Attempt, len(cfg.Targets))
	done := make(chan struct{}, len(cfg.Targets))
	for i, t := range cfg.Targets {
		go func() {
			if cfg.attempt != nil {
				out[i] = cfg.attempt(ctx, t, cfg.Timeout, round)
			} else {
				out[i] = try(ctx, t, cfg.Timeout)
			}
			done <- struct{}{}
		}()
	}
	for range cfg.Targets {
		<-done
	}
	return out
}

// Try attempts one route once.
func try(ctx context.Context, t Target, timeout time.Duration) Attempt {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var err error
	switch {
	case t.Route == RouteLinkLocal:
		le := hostLinkLocalEnv()
		if t.env != nil {
			le = *t.env
		}
		outcome, detail := tryLinkLocal(ctx, le, t.ports)
		return Attempt{Route: t.Route, Target: t.Addr, Outcome: outcome, Detail: detail, MS: ms(time.Since(start))}
	case t.unannounced != nil:
		outcome, detail := tryUnannounced(ctx, t.unannounced, timeout)
		return Attempt{Route: t.Route, Target: t.Addr, Outcome: outcome, Detail: detail, MS: ms(time.Since(start))}
	case strings.TrimSuffix(t.Route, "-v6") == RouteDNS || t.Network == "udp":
		err = tryDNS(ctx, t.Addr)
	case strings.TrimSuffix(t.Route, "-v6") == RouteMetadata:
		err = tryHTTP(ctx, t.Addr)
	default:
		err = tryTCP(ctx, t.Addr)
	}
	outcome, detail := Classify(err)
	target := t.Addr
	if t.Network == "udp" {
		target += "/udp"
	}
	return Attempt{Route: t.Route, Target: target, Outcome: outcome, Detail: detail, MS: ms(time.Since(start))}
}

func tryTCP(ctx context.Context, addr string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		c.Close()
	}
	return err
}

// dnsQuery is a fixed query for "example.invalid. A" with recursion desired: any reply at all,
// whatever it says, means the packet reached a resolver.
var dnsQuery = []byte{
	0xaf, 0x01, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 7, 'i', 'n', 'v', 'a', 'l', 'i', 'd', 0,
	0x00, 0x01, 0x00, 0x01,
}

func tryDNS(ctx context.Context, addr string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "udp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	// Send a few times within the timeout: one lost datagram is not a denial.
	buf := make([]byte, 512)
	for {
		if _, err := c.Write(dnsQuery); err != nil {
			return err
		}
		_ = c.SetReadDeadline(minTime(time.Now().Add(250*time.Millisecond), deadlineOf(ctx)))
		if _, err := c.Read(buf); err == nil {
			return nil // any reply is an escape
		} else if !isTimeout(err) || ctx.Err() != nil {
			if isTimeout(err) {
				return context.DeadlineExceeded
			}
			return err
		}
	}
}

func tryHTTP(ctx context.Context, addr string) error {
	tr := &http.Transport{Proxy: nil, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

func sidecarUp(ctx context.Context, cfg Config) error {
	if cfg.sidecarCheck != nil {
		return cfg.sidecarCheck(ctx)
	}
	if cfg.Sidecar == "" {
		return fmt.Errorf("no sidecar address configured")
	}
	// Three attempts' time to answer, tried afresh every sidecarEvery: a sidecar that becomes
	// reachable meanwhile (its address routed a moment after it is ready, or the enforcer
	// admitting a new pod) answers the next try rather than the retransmission of a dropped one.
	ctx, cancel := context.WithTimeout(ctx, 3*cfg.Timeout)
	defer cancel()
	return firstAccept(ctx, cfg.Sidecar, sidecarEvery, cfg.Timeout, nil)
}

// sidecarEvery is the time between fresh tries of the sidecar and of a hold. A new pod reaches
// its sidecar the moment the enforcer has learnt its address (on the test cluster about 70 ms
// after the kubelet reports it), and a hold the moment kube-proxy routes it; what a pod waits
// beyond that is up to one interval. At most 16 tries are in flight (firstAccept), so where the
// network drops them this is a SYN every 62 ms or so.
const sidecarEvery = 50 * time.Millisecond

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func deadlineOf(ctx context.Context) time.Time {
	dl, ok := ctx.Deadline()
	if !ok {
		return time.Now().Add(time.Second)
	}
	return dl
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
