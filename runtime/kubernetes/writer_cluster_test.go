package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/manifest"
	afruntime "github.com/antifailure/af/runtime"
)

// lines collects one run's progress, safe for the runs going on at once.
type lines struct {
	mu  sync.Mutex
	all []string
}

func (l *lines) with(t *testing.T, who string) func(*Options) {
	return func(o *Options) {
		o.Progress = func(format string, args ...any) {
			s := fmt.Sprintf(format, args...)
			l.mu.Lock()
			l.all = append(l.all, s)
			l.mu.Unlock()
			t.Logf("%s: %s", who, s)
		}
	}
}

func (l *lines) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, x := range l.all {
		if strings.Contains(x, s) {
			return true
		}
	}
	return false
}

// TestOneWriterPerEnvironment: af up holds its environment while it runs. Tried as two pushes
// one second apart would: while run A brings the environment up, run B (a one-second wait) refuses
// with AF-RUN-057 naming A, and run C (the default wait) waits, naming A, then brings it up
// itself, contained: never the false AF-RUN-043 of a probe judged by another run. A hold whose
// run died (never renewed) is taken over. af down during an af up wins: the up ends with
// AF-RUN-058 and nothing is left.
func TestOneWriterPerEnvironment(t *testing.T) {
	besideOthers(t)
	f := setup(t)
	ctx := ctxFor(t, 12*time.Minute)
	ref := afruntime.Ref{ID: "one-writer", Manifest: small(t, map[string]*manifest.Service{"s": {Command: manifest.Command{Exec: []string{"aftool", "serve"}}}})}
	var la, lb, lc lines
	rtA, rtB, rtC := f.runtime(t, la.with(t, "A")), f.runtime(t, lb.with(t, "B"), func(o *Options) { o.WriterWait = time.Second }), f.runtime(t, lc.with(t, "C"))
	down(t, rtA, ref)
	ns := "af-env-" + ref.ID
	leases := f.kube.CoordinationV1().Leases(ns)
	held := func() *coordinationv1.Lease {
		t.Helper()
		for ctx.Err() == nil {
			if l, err := leases.Get(ctx, WriterLease, metav1.GetOptions{}); err == nil && l.Spec.HolderIdentity != nil {
				return l
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatal("the writer lease was never taken")
		return nil
	}

	type outcome struct {
		res *afruntime.Result
		err error
	}
	a := make(chan outcome, 1)
	go func() {
		res, err := rtA.Up(ctx, afruntime.Spec{Ref: ref, Holder: "run A (commit aaaaaaa)"})
		a <- outcome{res, err}
	}()
	if l := held(); !strings.HasPrefix(*l.Spec.HolderIdentity, "run A (commit aaaaaaa) #") {
		t.Fatalf("the lease is held by %q, want run A", *l.Spec.HolderIdentity)
	}
	// C and B start while A holds the environment: C waits it out, B's wait is too short.
	c := make(chan outcome, 1)
	go func() {
		res, err := rtC.Up(ctx, afruntime.Spec{Ref: ref, Holder: "run C"})
		c <- outcome{res, err}
	}()
	_, errB := rtB.Up(ctx, afruntime.Spec{Ref: ref, Holder: "run B"})
	if !errors.Is(errB, failure.EnvironmentBusy) || !strings.Contains(errB.Error(), "run A (commit aaaaaaa)") {
		t.Errorf("run B while A holds the environment: want AF-RUN-057 naming run A, got %v", errB)
	}
	oa, oc := <-a, <-c
	for who, o := range map[string]outcome{"A": oa, "C": oc} {
		if o.err != nil {
			t.Errorf("run %s: %v", who, o.err)
		} else if o.res.Probe == nil || o.res.Probe.Verdict != "contained" {
			t.Errorf("run %s: probe %+v, want contained", who, o.res.Probe)
		}
	}
	if !lc.has("is being brought up by run A (commit aaaaaaa)") || !lc.has("the other run is done; this one goes on") {
		t.Errorf("run C did not say it waited for run A, then went on")
	}
	if _, err := leases.Get(ctx, WriterLease, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the writer lease is still there after both runs: %v", err)
	}

	// A run that died holding the environment: its lease is never renewed, and is taken over.
	now := metav1.NewMicroTime(time.Now())
	dead, secs := "a run that died #0000", int32(30)
	if _, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: WriterLease},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &dead, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var ld lines
	if _, err := f.runtime(t, ld.with(t, "D")).Up(ctx, afruntime.Spec{Ref: ref}); err != nil {
		t.Fatalf("up after a run died holding the environment: %v", err)
	}
	if !ld.has("a run that died #0000 stopped renewing its hold") {
		t.Errorf("the run that took over did not say so")
	}

	// af down while af up runs: removal wins, and the up says so.
	e := make(chan outcome, 1)
	go func() {
		res, err := rtA.Up(ctx, afruntime.Spec{Ref: ref, Holder: "run E"})
		e <- outcome{res, err}
	}()
	for ctx.Err() == nil {
		if l := held(); strings.HasPrefix(*l.Spec.HolderIdentity, "run E #") {
			break
		}
	}
	if err := rtB.Down(ctx, ref); err != nil {
		t.Fatalf("af down during af up: %v", err)
	}
	oe := <-e
	if !errors.Is(oe.err, failure.EnvironmentRemoved) {
		t.Errorf("af up during which the environment was removed: want AF-RUN-058, got %v", oe.err)
	}
	if _, err := f.kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s after af down during af up: %v, want it gone", ns, err)
	}
}
