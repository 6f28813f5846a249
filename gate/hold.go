package gate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// HoldConfig is the wait after a contained verdict and before the application starts: the
// runtime creates every pod of an environment at once and orders their applications by
// releasing each pod's hold (a TCP address that answers only once the pod may start: its
// dependencies are ready, its migration has succeeded, the probe has passed). The hold orders;
// it proves nothing about containment, which the rounds before it have already observed.
type HoldConfig struct {
	// Addr is host:port; a TCP connection that is accepted releases the hold.
	Addr string
	// Every is the time between tries (default 50ms).
	Every time.Duration
	// Report is how often a line says the hold is still closed (default 5s).
	Report time.Duration
	// Out receives those lines and the release (nil: none).
	Out io.Writer
}

// Hold waits until cfg.Addr accepts a TCP connection, or ctx ends (its error is returned). A
// refused or unanswered connection is a closed hold, tried again every cfg.Every: there is no
// deadline of its own, because the runtime that releases it bounds the wait and reports it, and
// a pod held for long shows as initialising rather than crash-looping through the rounds again.
func Hold(ctx context.Context, cfg HoldConfig) (time.Duration, error) {
	if cfg.Every <= 0 {
		cfg.Every = sidecarEvery
	}
	if cfg.Report <= 0 {
		cfg.Report = 5 * time.Second
	}
	if _, _, err := net.SplitHostPort(cfg.Addr); err != nil {
		return 0, fmt.Errorf("hold address %q is not host:port", cfg.Addr)
	}
	logf := func(format string, args ...any) {
		if cfg.Out != nil {
			fmt.Fprintf(cfg.Out, LogPrefix+format+"\n", args...)
		}
	}
	start, said := time.Now(), time.Now()
	logf("hold=%s waiting until af releases this pod (its dependencies ready, its migration done)", cfg.Addr)
	err := firstAccept(ctx, cfg.Addr, cfg.Every, time.Second, func(last error) {
		if time.Since(said) >= cfg.Report {
			said = time.Now()
			logf("hold=%s still closed after %.0f s (%v)", cfg.Addr, time.Since(start).Seconds(), shortErr(last))
		}
	})
	if err != nil {
		return time.Since(start), fmt.Errorf("hold %s still closed: %w", cfg.Addr, err)
	}
	waited := time.Since(start)
	logf("hold=%s released after %.0f ms", cfg.Addr, ms(waited))
	return waited, nil
}

// firstAccept returns nil once a TCP connection to addr is accepted, or ctx's end (with the
// last refusal seen). A try starts every `every` whatever the ones before it are doing, each
// bounded by `each`: where a policy drops what it does not allow (the closed hold, the sidecar
// before the cluster routes its address), one try waits out its SYN's retransmission, and the
// address that opens meanwhile should be seen within `every`, not a second later. waiting is
// called on every tick after a refusal, with the last one.
func firstAccept(ctx context.Context, addr string, every, each time.Duration, waiting func(last error)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	const most = 16 // tries in flight
	results := make(chan error, most)
	running := 0
	tick := time.NewTicker(every)
	defer tick.Stop()
	var last error
	try := func() {
		running++
		go func() {
			c, err := (&net.Dialer{Timeout: each}).DialContext(ctx, "tcp", addr)
			if err == nil {
				c.Close()
			}
			results <- err
		}()
	}
	try()
	for {
		select {
		case err := <-results:
			running--
			if err == nil {
				return nil
			}
			if ctx.Err() == nil {
				last = err
			}
		case <-tick.C:
			if running < most {
				try()
			}
			if last != nil && waiting != nil {
				waiting(last)
			}
		case <-ctx.Done():
			if last == nil {
				return ctx.Err()
			}
			return fmt.Errorf("%v: %w", shortErr(last), ctx.Err())
		}
	}
}

func shortErr(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	return err.Error()
}
