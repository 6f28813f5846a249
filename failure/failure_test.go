package failure

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"testing"
)

func TestCatalogueEntries(t *testing.T) {
	code := regexp.MustCompile(`^AF-(RUN|GH)-0\d\d$`)
	seen := map[Code]bool{}
	for _, e := range Catalogue() {
		if !code.MatchString(string(e.Code)) {
			t.Errorf("%s: not an AF-RUN-0xx or AF-GH-0xx code", e.Code)
		}
		if seen[e.Code] {
			t.Errorf("%s: listed twice", e.Code)
		}
		seen[e.Code] = true
		if e.Title == "" || e.Means == "" || e.Do == "" {
			t.Errorf("%s: title, meaning and what to do are all required", e.Code)
		}
		if e.Exit < ExitFailure || e.Exit > ExitRefused {
			t.Errorf("%s: exit %d is not 1, 2 or 3", e.Code, e.Exit)
		}
		if got, ok := Lookup(e.Code); !ok || got != e {
			t.Errorf("Lookup(%s) = %v", e.Code, got)
		}
	}
	// The codes the issues require, with their exit statuses.
	for c, exit := range map[Code]int{
		"AF-RUN-001": 1, "AF-RUN-002": 1, "AF-RUN-004": 1, "AF-RUN-005": 1, "AF-RUN-030": 1,
		"AF-RUN-040": 1, "AF-RUN-041": 2, "AF-RUN-042": 2, "AF-RUN-043": 3, "AF-RUN-044": 3,
		"AF-RUN-045": 3, "AF-RUN-047": 1,
	} {
		e, ok := Lookup(c)
		if !ok {
			t.Errorf("%s is missing from the catalogue", c)
			continue
		}
		if e.Exit != exit {
			t.Errorf("%s exits %d, want %d", c, e.Exit, exit)
		}
	}
	sorted := true
	cat := Catalogue()
	for i := 1; i < len(cat); i++ {
		sorted = sorted && cat[i-1].Code < cat[i].Code
	}
	if !sorted {
		t.Error("Catalogue() is not in code order")
	}
}

func TestErrorsWrap(t *testing.T) {
	cause := fs.ErrNotExist
	err := fmt.Errorf("loading: %w", New(ManifestUnreadable, "cannot read af.yaml", cause))
	if !errors.Is(err, ManifestUnreadable) {
		t.Error("errors.Is does not find the entry through a wrap")
	}
	if errors.Is(err, ManifestInvalid) {
		t.Error("errors.Is matches another entry")
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Error("errors.Is does not reach the cause")
	}
	if CodeOf(err) != "AF-RUN-010" || As(err).Exit() != ExitInput {
		t.Errorf("CodeOf = %s", CodeOf(err))
	}
	var pe *fs.PathError
	_, openErr := os.Open("/definitely/not/here")
	if !errors.As(New(ManifestUnreadable, "x", openErr), &pe) {
		t.Error("errors.As does not reach a typed cause")
	}
	if got := New(ManifestUnreadable, "cannot read af.yaml", cause).Error(); got != "AF-RUN-010: manifest not found or unreadable: cannot read af.yaml: file does not exist" {
		t.Errorf("Error() = %q", got)
	}
	if CodeOf(errors.New("plain")) != "" || As(nil) != nil || Ensure(nil) != nil {
		t.Error("uncatalogued errors must have no code")
	}
	if e := Ensure(errors.New("boom")); e.Entry != Internal || !strings.Contains(e.Error(), "boom") {
		t.Errorf("Ensure = %v", e)
	}
	wrapped := Newf(NotReady, "service %s: %w", "web", cause)
	if !errors.Is(wrapped, fs.ErrNotExist) || !strings.Contains(wrapped.Error(), "service web") {
		t.Errorf("Newf = %v", wrapped)
	}
	if strings.Count(wrapped.Error(), "file does not exist") != 1 {
		t.Errorf("cause repeated: %q", wrapped.Error())
	}
}

func TestWriteText(t *testing.T) {
	var b bytes.Buffer
	e := New(NamespaceNotOurs, `namespace "af-env-shop-pr-1" exists without the label`, nil).WithHint("Pick another prefix.")
	if err := e.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Error AF-RUN-045: namespace not created by af\n",
		`  what happened: namespace "af-env-shop-pr-1" exists without the label`,
		"  what it means: A namespace",
		"  what to do:    Pick another prefix. Choose another",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	r := e.Report()
	if r.Code != "AF-RUN-045" || r.Exit != ExitRefused || !strings.HasPrefix(r.Do, "Pick another prefix.") {
		t.Errorf("Report = %+v", r)
	}
}

func TestDocsAreCurrent(t *testing.T) {
	committed, err := os.ReadFile("../docs/errors.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(committed, Markdown()) {
		t.Fatal("docs/errors.md is stale: run `make generate` and commit the result")
	}
	for _, e := range Catalogue() {
		if !bytes.Contains(committed, []byte("## "+string(e.Code))) {
			t.Errorf("docs/errors.md lacks %s", e.Code)
		}
	}
}
