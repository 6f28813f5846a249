package rest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/antifailure/af/github/githubtest"
	"github.com/antifailure/af/github/rest"
)

// Each read against the stand-in, which checks every request against GitHub's REST
// description: pull requests (one, and the open ones over several pages), permissions,
// labels, files at a ref.
func TestRepositoryReads(t *testing.T) {
	const tok = "ghs_readstoken0123456789"
	gh := githubtest.New(t, tok)
	ctx := context.Background()
	repo, err := rest.New(gh.Client(t, tok, nil), "acme/shop")
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"shop", "/shop", "acme/", "acme/shop/x"} {
		if _, err := rest.New(nil, bad); err == nil {
			t.Errorf("rest.New(%q) accepted", bad)
		}
	}
	head := strings.Repeat("a", 40)
	for n := 1; n <= 230; n++ {
		state := "open"
		if n%3 == 0 {
			state = "closed"
		}
		gh.SetPull(n, state, head, n == 9)
	}
	open, err := repo.OpenPulls(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(open) != 154 || !open[1] || open[3] || !open[230] {
		t.Errorf("%d open pull requests (1: %v, 3: %v, 230: %v), want 154 of 230", len(open), open[1], open[3], open[230])
	}
	if m, err := repo.Merged(ctx, 9); err != nil || !m {
		t.Errorf("Merged(9) = %v, %v", m, err)
	}
	gh.SetPullHead(7, "someone/shop", strings.Repeat("b", 40))
	p, err := repo.PullRequest(ctx, 7)
	if err != nil || !p.Open || p.HeadSHA != head || p.HeadRepository != "someone/shop" {
		t.Errorf("PullRequest(7) = %+v, %v", p, err)
	}

	gh.SetPermission("maint", "maintain")
	gh.SetPermission("reader", "read")
	for login, want := range map[string]bool{"maint": true, "reader": false} {
		if ok, err := repo.CanWrite(ctx, login); err != nil || ok != want {
			t.Errorf("CanWrite(%s) = %v, %v; want %v", login, ok, err, want)
		}
	}

	gh.SetLabels(7, "Preview", "db")
	if has, err := repo.HasLabel(ctx, 7, "preview"); err != nil || !has {
		t.Errorf("HasLabel(preview) = %v, %v", has, err)
	}
	if err := repo.RemoveLabel(ctx, 7, "db"); err != nil {
		t.Fatal(err)
	}
	if err := repo.RemoveLabel(ctx, 7, "db"); err != nil {
		t.Errorf("removing a label already gone: %v", err)
	}
	if has, _ := repo.HasLabel(ctx, 7, "db"); has {
		t.Errorf("db is still on #7: %v", gh.Labels(7))
	}

	gh.SetFile("main", "af.yaml", "name: shop\n")
	if b, ok, err := repo.File(ctx, "af.yaml", "main"); err != nil || !ok || string(b) != "name: shop\n" {
		t.Errorf("File(af.yaml@main) = %q, %v, %v", b, ok, err)
	}
	if _, ok, err := repo.File(ctx, "af.yaml", "other"); err != nil || ok {
		t.Errorf("File at a ref without it = %v, %v; want not there", ok, err)
	}
}
