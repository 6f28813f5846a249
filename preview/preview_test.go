package preview

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/antifailure/af/failure"
	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/runtime/runtimetest"
)

func TestAdopt(t *testing.T) {
	envs := []afruntime.Environment{
		{ID: "shop-pr-7", Namespace: "af-env-shop-pr-7", Repository: "other/shop", PullRequest: 7},
		{ID: "acme-shop-pr-7", Namespace: "af-env-acme-shop-pr-7", Repository: "acme/shop", PullRequest: 7},
		{ID: "shop-pr-8", Namespace: "af-env-shop-pr-8", Repository: "acme/shop", PullRequest: 8},
	}
	ref := func(id string) afruntime.Ref { return afruntime.Ref{ID: id, Repository: "ACME/shop"} }
	for _, c := range []struct {
		name   string
		l      afruntime.Lister
		ref    afruntime.Ref
		pr     int
		want   string
		saying string
	}{
		{"owner-qualified, found by repository (any case) and number", &runtimetest.Fake{Envs: envs}, ref("shop-pr-7"), 7, "acme-shop-pr-7", "pull request #7's environment is acme-shop-pr-7 (namespace af-env-acme-shop-pr-7)"},
		{"the short id, as computed", &runtimetest.Fake{Envs: envs}, ref("shop-pr-8"), 8, "shop-pr-8", ""},
		{"none yet", &runtimetest.Fake{Envs: envs}, ref("shop-pr-9"), 9, "shop-pr-9", ""},
		{"a runtime that cannot list", nil, ref("shop-pr-7"), 7, "shop-pr-7", ""},
		{"no pull request", &runtimetest.Fake{Envs: envs}, ref("demo"), 0, "demo", ""},
	} {
		got, said := Adopt(context.Background(), c.l, c.ref, c.pr)
		if got.ID != c.want || said != c.saying {
			t.Errorf("%s: %q saying %q, want %q saying %q", c.name, got.ID, said, c.want, c.saying)
		}
	}
}

// otherFirst refuses the short id as another repository's, as the kubernetes runtime does.
type otherFirst struct {
	runtimetest.Fake
	ups []string
}

func (o *otherFirst) Up(_ context.Context, spec afruntime.Spec) (*afruntime.Result, error) {
	o.ups = append(o.ups, spec.ID)
	if spec.ID == "shop-pr-7" {
		return nil, failure.New(failure.NamespaceNotOurs, "namespace af-env-shop-pr-7 is other/shop's", afruntime.ErrOtherRepository)
	}
	return &afruntime.Result{Environment: spec.ID}, nil
}

func TestUpFallsBackToTheOwnersID(t *testing.T) {
	var said []string
	progress := func(format string, args ...any) { said = append(said, fmt.Sprintf(format, args...)) }
	rt := &otherFirst{}
	spec := afruntime.Spec{Ref: afruntime.Ref{ID: "shop-pr-7", Repository: "acme/shop"}, PullRequest: 7}
	res, got, err := Up(context.Background(), rt, spec, progress)
	if err != nil || got.ID != "acme-shop-pr-7" || res.Environment != "acme-shop-pr-7" || strings.Join(rt.ups, ",") != "shop-pr-7,acme-shop-pr-7" {
		t.Fatalf("Up: %v, %q, ups %v", err, got.ID, rt.ups)
	}
	if len(said) != 1 || !strings.Contains(said[0], "this pull request's environment is acme-shop-pr-7") {
		t.Errorf("progress %q", said)
	}
	// A name of the user's own (not the pull request's short id) is never renamed.
	rt = &otherFirst{}
	spec.PullRequest = 0
	if _, _, err := Up(context.Background(), rt, spec, progress); !errors.Is(err, afruntime.ErrOtherRepository) || len(rt.ups) != 1 {
		t.Errorf("without a pull request: %v, ups %v", err, rt.ups)
	}
}
