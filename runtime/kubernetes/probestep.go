package kubernetes

// The containment step of af up (up.go's "sidecar and probe"): the sidecar written and the
// probe pod started beside it, the workloads written (held after their gates) meanwhile, and
// the probe's verdict read (probe.go) before any application code runs. Which failure is told
// when several happen is decided here.

import (
	"context"
	"errors"
	"time"

	"github.com/antifailure/af/gate"
)

// sidecarAndProbe writes the sidecar, starts the probe beside it and waits for both: the
// sidecar ready, the probe's verdict. beside runs meanwhile, from the moment the sidecar's
// address is known (it writes the held workloads). The sidecar's failure is the one reported when several
// fail (the probe cannot answer without it), then the probe's, then beside's.
func (r *Runtime) sidecarAndProbe(ctx context.Context, t *target, e *env, beside func(context.Context) error) (*gate.Result, error) {
	start := time.Now()
	if err := r.applySidecar(ctx, t, e); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sidecarErr := make(chan error, 1)
	go func() {
		err := r.waitDeployment(ctx, t, SidecarName, 1, r.opts.SidecarTimeout)
		if err == nil {
			e.timeline.done("sidecar", start)
		} else if ctx.Err() == nil {
			cancel() // the probe cannot answer without it
		}
		sidecarErr <- err
	}()
	besideErr := make(chan error, 1)
	go func() {
		start := time.Now()
		err := beside(ctx)
		if err == nil {
			e.timeline.done("workloads written", start)
		}
		besideErr <- err
	}()
	probeStart := time.Now()
	var verdict *gate.Result
	var err error
	if r.opts.negativeControl == "" {
		verdict, err = r.probe(ctx, t, e)
	} else {
		r.progress(ctx).Printf("negative control (tests only): the probe is not run")
	}
	if err != nil {
		cancel() // no verdict: the sidecar's readiness no longer matters
	}
	serr, berr := <-sidecarErr, <-besideErr
	if serr != nil && (err == nil || !errors.Is(serr, context.Canceled)) {
		return verdict, serr
	}
	if err != nil {
		return verdict, err
	}
	e.timeline.done("probe", probeStart)
	if verdict != nil && verdict.SidecarMS > 0 {
		// The probe's own rounds, from the first that found the sidecar answering.
		e.timeline.done("probe rounds", time.Now().Add(-time.Duration((verdict.MS-verdict.SidecarMS)*float64(time.Millisecond))))
	}
	return verdict, berr
}
