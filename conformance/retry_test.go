package conformance

import (
	"context"
	"strings"
	"testing"
)

func TestRetriedOnlyWhatMustWork(t *testing.T) {
	cases := []struct {
		name      string
		first     Outcome
		seconds   []Outcome // what each second try would return, in order
		banner    string
		wantOK    bool
		wantCalls int
		wantIn    string
	}{
		{name: "first passes", first: Outcome{OK: true, Output: "banner"}, banner: "banner", wantOK: true, wantCalls: 0, wantIn: "banner"},
		{name: "second passes", first: Outcome{Output: "context deadline exceeded"}, seconds: []Outcome{{OK: true, Output: "banner"}}, banner: "banner", wantOK: true, wantCalls: 1, wantIn: `on a second try (the first: ok=false "context deadline exceeded"): banner`},
		{name: "both fail", first: Outcome{Output: "refused"}, seconds: []Outcome{{Output: "refused again"}}, wantOK: false, wantCalls: 1, wantIn: `refused (and on a second try: ok=false "refused again")`},
		{name: "answered by someone else", first: Outcome{OK: true, Output: "403 by the sidecar"}, seconds: []Outcome{{OK: true, Output: "403 by the sidecar"}}, banner: "banner", wantOK: false, wantCalls: 1, wantIn: "and on a second try"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			calls := 0
			var logged []string
			s := &suite{ctx: context.Background(), logf: func(f string, a ...any) { logged = append(logged, f) }}
			m := &tried{
				attempts: []Attempt{{Name: "allowed-http", Kind: HTTP, Target: "http://allowed.test/"}},
				out:      map[string]Outcome{"allowed-http": c.first},
				done:     make(chan struct{}),
				key:      "main", s: s, again: map[string]bool{},
				run: func(_ context.Context, a []Attempt) ([]Outcome, error) {
					if len(a) != 1 || a[0].Name != "allowed-http" {
						t.Errorf("second try of %v, want allowed-http alone", a)
					}
					calls++
					return []Outcome{c.seconds[calls-1]}, nil
				},
			}
			close(m.done)
			for range 2 { // asked twice (two behaviours): tried again at most once
				_, o := m.retried("allowed-http", answered(c.banner))
				if answered(c.banner)(o) != c.wantOK {
					t.Errorf("ok=%v, want %v: %q", answered(c.banner)(o), c.wantOK, o.Output)
				}
				if !strings.Contains(o.Output, c.wantIn) {
					t.Errorf("output %q does not say %q", o.Output, c.wantIn)
				}
			}
			if calls != c.wantCalls {
				t.Errorf("%d second tries, want %d", calls, c.wantCalls)
			}
			if c.wantCalls > 0 && len(logged) != 1 {
				t.Errorf("the second try was logged %d times, want once", len(logged))
			}
		})
	}
}

// An attempt that must fail is judged on its one outcome: fails and notFromOrigin read it with
// get, which never asks the harness again, so an escape seen once stays an escape.
func TestEscapesAreNotTriedAgain(t *testing.T) {
	calls := 0
	m := &tried{
		attempts: []Attempt{{Name: "public-tcp", Kind: TCP, Target: "198.51.100.10:80"}},
		out:      map[string]Outcome{"public-tcp": {OK: true, Output: "af-fake-internet"}},
		done:     make(chan struct{}),
		s:        &suite{ctx: context.Background(), logf: func(string, ...any) {}}, again: map[string]bool{},
		run: func(context.Context, []Attempt) ([]Outcome, error) {
			calls++
			return []Outcome{{Output: "refused"}}, nil
		},
	}
	close(m.done)
	a, o := m.get(t, "public-tcp")
	if !o.OK || a.Name != "public-tcp" {
		t.Fatalf("get: %v %v", a, o)
	}
	if calls != 0 {
		t.Fatalf("get asked the harness again (%d)", calls)
	}
}
