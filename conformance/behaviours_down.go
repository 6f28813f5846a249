package conformance

import (
	"slices"
	"testing"
	"time"

	"github.com/antifailure/af/runtime"
)

// ---- down ----

// downMain downs the main environment once, having first recorded the other environment's
// instances and made an unmanaged namespace where an environment would live.
func (s *suite) downMain(t *testing.T) error {
	t.Helper()
	if s.downed[roleMain] {
		return s.mainDownErr
	}
	e := s.main()
	e.must(t)
	o := s.other()
	o.must(t)
	s.otherBefore = names(s.instances(t, o.ref), func(Instance) bool { return true })
	m, err := s.manifestFor("conformance-unmanaged", map[string]any{"s": map[string]any{"image": s.opts.Image}}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	s.unmanagedRef = s.ref("unmanaged", m)
	u, err := s.h.Unmanaged(s.context(t), s.unmanagedRef)
	if err != nil {
		t.Fatalf("making an unmanaged namespace: %v", err)
	}
	s.unknown = append(s.unknown, u)
	s.downed[roleMain] = true
	start := time.Now()
	s.mainDownErr = s.rt.Down(s.context(t), e.ref)
	t.Logf("down %s: %s (%v)", e.ref.ID, time.Since(start).Round(time.Millisecond), s.mainDownErr)
	return s.mainDownErr
}

func downRemovesEverything(t *testing.T, s *suite) {
	if err := s.downMain(t); err != nil {
		t.Fatalf("down: %v", err)
	}
	ref := s.envs[roleMain].ref
	if left := s.inventory(t, ref.ID); len(left) > 0 {
		t.Errorf("after down the inventory still has: %v", left)
	}
	if st := s.status(t, ref); st.Exists || len(st.Services) > 0 {
		t.Errorf("after down the status still shows the environment: %+v", st)
	}
}

func downNeverUp(t *testing.T, s *suite) {
	m, err := s.manifestFor("conformance-never", map[string]any{"s": map[string]any{"image": s.opts.Image}}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	s.leavesInventory(t, "down of an environment never up", func() error { return s.rt.Down(s.context(t), s.ref("never", m)) }, false)
}

// leavesInventory runs op and requires that the inventory is the same afterwards, and that op
// failed (refusal) or succeeded (!refusal).
func (s *suite) leavesInventory(t *testing.T, what string, op func() error, refusal bool) {
	t.Helper()
	before := s.inventory(t, "")
	err := op()
	switch {
	case refusal && err == nil:
		t.Errorf("%s succeeded; it must be refused", what)
	case refusal:
		t.Logf("%s refused: %v", what, err)
	case err != nil:
		t.Errorf("%s: %v", what, err)
	}
	if after := s.inventory(t, ""); !slices.Equal(before, after) {
		t.Errorf("%s changed the inventory:\nbefore %v\nafter  %v", what, before, after)
	}
}

func downIdempotent(t *testing.T, s *suite) {
	if err := s.downMain(t); err != nil {
		t.Fatalf("first down: %v", err)
	}
	s.leavesInventory(t, "the second down", func() error { return s.rt.Down(s.context(t), s.envs[roleMain].ref) }, false)
}

func downOnlyItsOwn(t *testing.T, s *suite) {
	if err := s.downMain(t); err != nil {
		t.Fatalf("down: %v", err)
	}
	o := s.envs[roleOther]
	st := s.status(t, o.ref)
	lonely := service(st, "lonely")
	if !st.Exists || lonely == nil || lonely.State != runtime.StateRunning {
		t.Errorf("the other environment did not survive: %+v", st)
	}
	if got := names(s.instances(t, o.ref), func(Instance) bool { return true }); !slices.Equal(got, s.otherBefore) {
		t.Errorf("the other environment's instances changed:\nbefore %v\nafter  %v", s.otherBefore, got)
	}
	ctx := s.context(t)
	u := s.unknown[len(s.unknown)-1]
	if err := u.Unchanged(ctx); err != nil {
		t.Errorf("the unmanaged namespace: %v", err)
	}
	// Down of the environment whose place the unmanaged namespace took is refused.
	if err := s.rt.Down(ctx, s.unmanagedRef); err == nil {
		t.Error("down of an environment whose namespace af did not make succeeded")
	} else {
		t.Logf("down where the unmanaged namespace is: %v", err)
	}
	if err := u.Unchanged(ctx); err != nil {
		t.Errorf("the unmanaged namespace after a down was tried on it: %v", err)
	}
}

func isObserver(rt runtime.Runtime) bool {
	return rt.Observer() != nil
}
