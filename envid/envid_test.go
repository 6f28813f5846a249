package envid

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/antifailure/af/failure"
)

func TestForPullRequest(t *testing.T) {
	cases := []struct {
		repo   string
		number int
		want   string
	}{
		{"acme/shop", 12, "shop-pr-12"},
		{"acme/Shop", 12, "shop-pr-12"}, // GitHub names are case-insensitive
		{"acme/my-app", 1, "my-app-pr-1"},
		{"acme/my.app", 1, "my-app-" + hash("my.app") + "-pr-1"},
		{"acme/my_app", 1, "my-app-" + hash("my_app") + "-pr-1"},
		{"acme/.github", 3, "github-" + hash(".github") + "-pr-3"},
		{"acme/___", 3, "repo-" + hash("___") + "-pr-3"},
	}
	for _, c := range cases {
		got, err := ForPullRequest(c.repo, c.number)
		if err != nil {
			t.Errorf("ForPullRequest(%q, %d): %v", c.repo, c.number, err)
			continue
		}
		if got != c.want {
			t.Errorf("ForPullRequest(%q, %d) = %q, want %q", c.repo, c.number, got, c.want)
		}
	}
}

func TestForPullRequestLongNameIsCutWithHash(t *testing.T) {
	repo := "acme/" + strings.Repeat("a", 100)
	got, err := ForPullRequest(repo, 123456)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != MaxLabel || !strings.HasSuffix(got, "-"+hash(strings.Repeat("a", 100))+"-pr-123456") {
		t.Fatalf("got %q (%d chars)", got, len(got))
	}
}

func TestForPullRequestRejectsBadInput(t *testing.T) {
	for _, c := range []struct {
		repo   string
		number int
	}{
		{"shop", 1}, {"acme/", 1}, {"/shop", 1}, {"acme/shop/x", 1}, {"acme/sh op", 1},
		{"-acme/shop", 1}, {"acme/..", 1}, {"acme/shop", 0}, {"acme/shop", -4},
	} {
		_, err := ForPullRequest(c.repo, c.number)
		if !errors.Is(err, failure.NameInvalid) {
			t.Errorf("ForPullRequest(%q, %d) = %v, want AF-RUN-012", c.repo, c.number, err)
		}
	}
}

func TestForName(t *testing.T) {
	cases := map[string]string{
		"shop":                   "shop",
		"Feature-Login":          "feature-login",
		"feature/login page":     "feature-login-page-" + hash("feature/login page"),
		"--x--":                  "x-" + hash("--x--"),
		strings.Repeat("ab", 40): strings.Repeat("ab", 27) + "-" + hash(strings.Repeat("ab", 40)),
	}
	for in, want := range cases {
		got, err := ForName(in)
		if err != nil || got != want {
			t.Errorf("ForName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "---", "!!", "日本"} {
		if _, err := ForName(bad); !errors.Is(err, failure.NameInvalid) {
			t.Errorf("ForName(%q) = %v, want AF-RUN-012", bad, err)
		}
	}
}

func TestNamespaceAndPreviewHost(t *testing.T) {
	ns, err := Namespace("af-env-", "shop-pr-12")
	if err != nil || ns != "af-env-shop-pr-12" {
		t.Fatalf("Namespace = %q, %v", ns, err)
	}
	long := strings.Repeat("x", 60)
	ns, err = Namespace("af-env-", long)
	if err != nil || len(ns) != MaxLabel || !strings.HasPrefix(ns, "af-env-x") || validation.IsDNS1123Label(ns) != nil {
		t.Fatalf("Namespace(long) = %q (%d), %v", ns, len(ns), err)
	}
	if _, err := Namespace("AF_", "shop"); !errors.Is(err, failure.NameInvalid) {
		t.Fatalf("bad prefix accepted: %v", err)
	}
	if _, err := Namespace("af-", "Shop"); !errors.Is(err, failure.NameInvalid) {
		t.Fatalf("bad id accepted: %v", err)
	}

	host, err := PreviewHost("shop-pr-12", "web", "preview.acme.dev")
	if err != nil || host != "shop-pr-12-web.preview.acme.dev" {
		t.Fatalf("PreviewHost = %q, %v", host, err)
	}
	host, err = PreviewHost(long, "web", "preview.acme.dev")
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(host, ".")
	if len(first) > MaxLabel || !strings.HasSuffix(first, "-web") || validation.IsDNS1123Label(first) != nil {
		t.Fatalf("PreviewHost(long) = %q", host)
	}
	if _, err := PreviewHost("shop-pr-1", "web", "bad_domain.dev"); !errors.Is(err, failure.NameInvalid) {
		t.Fatalf("bad domain accepted: %v", err)
	}
	if _, err := PreviewHost("shop-pr-1", "web", strings.Repeat("a.", 130)+"dev"); !errors.Is(err, failure.NameInvalid) {
		t.Fatalf("overlong host accepted: %v", err)
	}
}

const repoAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"

func randomRepo(r *rand.Rand) string {
	owner := make([]byte, 1+r.IntN(39))
	for i := range owner {
		owner[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[r.IntN(36)]
	}
	// Mostly short realistic names, sometimes long ones that must be cut.
	n := 1 + r.IntN(20)
	if r.IntN(10) == 0 {
		n = 1 + r.IntN(100)
	}
	name := make([]byte, n)
	for i := range name {
		name[i] = repoAlphabet[r.IntN(len(repoAlphabet))]
	}
	if string(name) == "." || string(name) == ".." {
		name = []byte("x")
	}
	return string(owner) + "/" + string(name)
}

// TestPropertyPullRequestIDs derives ids for 100,000 random repository/number pairs and checks
// each is a valid label of at most 63 characters, deterministic, and that no two distinct
// inputs (repository name, case-folded as GitHub does, and number) share an id or a namespace.
func TestPropertyPullRequestIDs(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	seenID := map[string]string{}
	seenNS := map[string]string{}
	hashed := 0
	for range 100000 {
		repo := randomRepo(r)
		number := 1 + r.IntN(1_000_000)
		if r.IntN(4) == 0 {
			number = 1 + r.IntN(20) // collisions are likeliest among low numbers
		}
		id, err := ForPullRequest(repo, number)
		if err != nil {
			t.Fatalf("ForPullRequest(%q, %d): %v", repo, number, err)
		}
		if errs := validation.IsDNS1123Label(id); len(errs) > 0 {
			t.Fatalf("ForPullRequest(%q, %d) = %q: %v", repo, number, id, errs)
		}
		if again, _ := ForPullRequest(repo, number); again != id {
			t.Fatalf("not deterministic: %q then %q", id, again)
		}
		_, name, _ := strings.Cut(repo, "/")
		if id != fmt.Sprintf("%s-pr-%d", strings.ToLower(name), number) {
			hashed++
		}
		key := fmt.Sprintf("%s#%d", strings.ToLower(name), number)
		if prev, dup := seenID[id]; dup && prev != key {
			t.Fatalf("collision: %q and %q both give %q", prev, key, id)
		}
		seenID[id] = key
		ns, err := Namespace("af-env-", id)
		if err != nil {
			t.Fatal(err)
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			t.Fatalf("Namespace(%q) = %q: %v", id, ns, errs)
		}
		if prev, dup := seenNS[ns]; dup && prev != key {
			t.Fatalf("namespace collision: %q and %q both give %q", prev, key, ns)
		}
		seenNS[ns] = key
		host, err := PreviewHost(id, "web", "preview.acme.dev")
		if err != nil {
			t.Fatal(err)
		}
		if errs := validation.IsDNS1123Subdomain(host); len(errs) > 0 {
			t.Fatalf("PreviewHost(%q) = %q: %v", id, host, errs)
		}
	}
	if hashed == 0 {
		t.Fatal("no input needed a hash: the generator does not exercise cutting or sanitizing")
	}
	t.Logf("100000 pairs, %d distinct ids, %d with a hash suffix", len(seenID), hashed)
}

func BenchmarkForPullRequest(b *testing.B) {
	for b.Loop() {
		if _, err := ForPullRequest("acme/some.repository_name", 12345); err != nil {
			b.Fatal(err)
		}
	}
}

// The owner's id differs from the short one, is a valid label, and tells two owners apart.
func TestForPullRequestOfOwner(t *testing.T) {
	a, err := ForPullRequestOfOwner("acme/shop", 7)
	if err != nil || a != "acme-shop-pr-7" {
		t.Fatalf("acme/shop#7: %q %v", a, err)
	}
	b, _ := ForPullRequestOfOwner("other/shop", 7)
	short, _ := ForPullRequest("other/shop", 7)
	if a == b || b == short {
		t.Fatalf("ids %q %q %q", a, b, short)
	}
	long, err := ForPullRequestOfOwner(strings.Repeat("o", 39)+"/"+strings.Repeat("r", 60), 12345)
	if err != nil || len(long) > MaxLabel || !strings.HasSuffix(long, "-pr-12345") {
		t.Fatalf("long: %q %v", long, err)
	}
	if _, err := ForPullRequestOfOwner("not-a-repo", 1); err == nil {
		t.Fatal("an invalid repository was accepted")
	}
}
