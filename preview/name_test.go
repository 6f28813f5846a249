package preview

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/manifest"
)

func TestID(t *testing.T) {
	for _, c := range []struct {
		name, env, repo string
		pr              int
		manifest        string
		want            string
		notAnID         string // the id NotAnID says it would be
		code            *failure.Entry
	}{
		{"the environment as given", "review-7", "acme/shop", 7, "shop", "review-7", "", nil},
		{"a given name that is no id", "Review_7", "acme/shop", 0, "shop", "", "review-7-jhnlzoqp", nil},
		{"a pull request's", "", "acme/shop-web", 12, "shop", "shop-web-pr-12", "", nil},
		{"the manifest's name", "", "", 0, "Shop", "shop", "", nil},
		{"a pull request of no repository", "", "", 3, "shop", "", "", failure.NameInvalid},
		{"nothing names it (the action without a pull request)", "", "acme/shop", 0, "", "", "", failure.NameInvalid},
	} {
		got, err := ID(c.env, c.repo, c.pr, c.manifest)
		var na *NotAnID
		switch {
		case c.notAnID != "":
			if !errors.As(err, &na) || na.Would != c.notAnID || na.Given != c.env {
				t.Errorf("%s: %q, %v; want NotAnID would be %q", c.name, got, err, c.notAnID)
			}
		case c.code != nil:
			if !errors.Is(err, c.code) {
				t.Errorf("%s: %q, %v; want %s", c.name, got, err, c.code.Code)
			}
		case err != nil || got != c.want:
			t.Errorf("%s: %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}

// Build asks for the container daemon only when a service needs building: with everything
// given, a broken daemon setting is never read; with something to build, it is.
func TestBuildOnlyWhatNeedsIt(t *testing.T) {
	res := manifest.Parse([]byte("name: shop\nruntime:\n  provider: kubernetes\nservices:\n  web:\n    build:\n      context: .\n    port: 8080\n  cache:\n    image: redis:7.2\n    port: 6379\n"))
	if err := res.Err("af.yaml"); err != nil {
		t.Fatal(err)
	}
	m := res.Manifest
	broken := func(k string) string { return map[string]string{"AF_BUILD_TIMEOUT": "soon"}[k] }
	given := map[string]string{"web": "registry.local/web@sha256:" + strings.Repeat("a", 64)}
	if NeedsBuild(m, given, nil) || !NeedsBuild(m, nil, nil) || NeedsBuild(m, nil, map[string]string{"web": "/tmp/web.tar"}) {
		t.Errorf("NeedsBuild: given %v, none %v, archive %v", NeedsBuild(m, given, nil), NeedsBuild(m, nil, nil), NeedsBuild(m, nil, map[string]string{"web": "/tmp/web.tar"}))
	}
	if err := Build(context.Background(), broken, nil, m, ".", given, map[string]string{}); err != nil {
		t.Errorf("nothing to build, yet: %v", err)
	}
	err := Build(context.Background(), broken, nil, m, ".", map[string]string{}, map[string]string{})
	if err == nil || !strings.Contains(err.Error(), "AF_BUILD_TIMEOUT") {
		t.Errorf("web to build with a broken AF_BUILD_TIMEOUT: %v", err)
	}
}
