package report

import (
	"bytes"
	"flag"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/gate"
	afruntime "github.com/antifailure/af/runtime"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./github/report -update to write it)", err)
	}
	if !bytes.Equal([]byte(got), want) {
		t.Errorf("%s differs from %s:\n--- got\n%s--- want\n%s", name, path, got, want)
	}
}

func routes(escaped ...string) *gate.Result {
	res := &gate.Result{Verdict: gate.Contained, Rounds: 3, MS: 6040}
	for i, r := range []string{"tcp-public", "udp-dns", "metadata", "apiserver", "ipv6-link-local", "node-local"} {
		a := gate.Attempt{Route: r, Outcome: gate.Denied, Detail: "timed out | no answer", MS: float64(1000 + i)}
		for _, e := range escaped {
			if e == r {
				a.Outcome, a.Detail = gate.Escaped, "answered <200 OK>"
				res.Verdict = gate.Escape
				res.Escaped = append(res.Escaped, a)
			}
		}
		res.Routes = append(res.Routes, a)
	}
	return res
}

func facts(state string) *Facts {
	return &Facts{State: state, Environment: "shop-pr-7", Namespace: "af-env-shop-pr-7", Repository: "acme/shop", PullRequest: 7,
		Commit: "0123456789abcdef0123456789abcdef01234567", Duration: 27700 * time.Millisecond, RunURL: "https://github.com/acme/shop/actions/runs/77",
		At: time.Date(2026, 12, 1, 22, 0, 0, 0, time.UTC)}
}

func TestRendering(t *testing.T) {
	ready := facts(Ready)
	ready.Probe = routes()
	ready.URLs = map[string]string{"web": "https://shop-pr-7-web.preview.af.test", "admin": "https://shop-pr-7-admin.preview.af.test"}
	ready.Services = []afruntime.ServiceStatus{{Name: "web", Ready: 1, Desired: 1, CPU: "100m", Memory: "64Mi", State: "running"}, {Name: "worker", Ready: 2, Desired: 2, State: "running"}}
	ready.LeftOut = []string{"host evil.test, every port: allow"}
	ready.Blocked = []BlockedHost{{Host: "tracker.ads.test", Port: 443, Rule: "default", Count: 3}, {Host: "evil.test", Count: 1}}

	escaped := facts(NotContained)
	escaped.Probe = routes("ipv6-link-local", "node-local")
	rep := failure.Newf(failure.NotContained, "the probe got out by ipv6-link-local, node-local; no service image was run").Report()
	escaped.Failure = &rep

	failed := facts(Failed)
	failed.Probe = routes()
	failed.Services = []afruntime.ServiceStatus{{Name: "web", Ready: 0, Desired: 1, State: "failed", Reason: "exit 1: missing DATABASE_URL"}}
	rep2 := failure.Newf(failure.ExitedDuringStart, "web exited with 1 before it became ready").Report()
	failed.Failure = &rep2

	gone := facts(Gone)
	gone.Reason = "the pull request was merged"

	skipped := facts(Skipped)
	skipped.Reason = "pull request #7 comes from a fork and does not carry the label af-preview."

	for name, f := range map[string]*Facts{"ready": ready, "not-contained": escaped, "failed": failed, "gone": gone, "skipped": skipped} {
		t.Run(name, func(t *testing.T) {
			c := Comment(f)
			if !strings.HasPrefix(c, Marker+"\n") {
				t.Fatalf("the comment does not start with the marker")
			}
			title, summary, _ := CheckOutput(f)
			golden(t, "comment-"+name, c)
			golden(t, "check-"+name, "conclusion: "+Conclusion(f)+"\ntitle: "+title+"\n\n"+summary)
		})
	}
	if got := ready.FirstURL(); got != "https://shop-pr-7-admin.preview.af.test" {
		t.Fatalf("FirstURL %q, want the first by name", got)
	}
}

func TestLimits(t *testing.T) {
	f := facts(Failed)
	long := strings.Repeat("x", 70000)
	rep := failure.Newf(failure.Internal, "%s", long).Report()
	f.Failure = &rep
	title, summary, _ := CheckOutput(f)
	if len(title) > 255 || len(summary) > 65000 {
		t.Fatalf("title %d, summary %d bytes: GitHub takes 255 and 65535", len(title), len(summary))
	}
}

// hostile is text a pull request (or the environment it runs) can put in any field the report
// writes.
var hostile = []string{
	"[click](https://evil.test)",
	"![x](https://evil.test/p.png)",
	"<img src=x onerror=alert(1)>",
	Marker,
	GoneMarker,
	"x " + GoneMarker + " y",
	"@octocat",
	"hi @octocat and user@evil.test",
	"&#64;octocat &lt;img&gt;",
	"a`b``c",
	"`",
	"``` fence",
	"| x | y |",
	"line1\n# heading",
	"line1\r\n> quote\n- item\n1. one\n---\n===",
	"# heading",
	"- item",
	"+ item",
	"2) item",
	"    indented code",
	"*bold* _em_ ~~gone~~ $x^2$",
	"see #123 and acme/shop#9",
	"https://evil.test/x",
	"go to www.evil.test now",
	"javascript:alert(1)",
	"javascript://evil.test/%0Aalert(1)",
	"data:text/html,<script>alert(1)</script>",
	`\](https://evil.test)`,
	"[a]: https://evil.test",
	"\u202egnp.exe",
}

// hostileFields are the places outside text reaches the report: each sets one field of f to v.
var hostileFields = []struct {
	name  string
	state string
	code  bool // written as a code span
	short bool // shortened (a commit)
	url   bool // a URL: a link when it is an http(s) URL
	set   func(f *Facts, v string)
}{
	{name: "environment", state: Ready, set: func(f *Facts, v string) { f.Environment = v }},
	{name: "environment-failed", state: Failed, set: func(f *Facts, v string) { f.Environment = v }},
	{name: "environment-gone", state: Gone, set: func(f *Facts, v string) { f.Environment = v }},
	{name: "namespace", state: Ready, code: true, set: func(f *Facts, v string) { f.Namespace = v }},
	{name: "namespace-gone", state: Gone, code: true, set: func(f *Facts, v string) { f.Namespace = v }},
	{name: "commit", state: Ready, code: true, short: true, set: func(f *Facts, v string) { f.Commit = v }},
	{name: "run url", state: Ready, url: true, set: func(f *Facts, v string) { f.RunURL = v }},
	{name: "service name", state: Ready, set: func(f *Facts, v string) {
		f.URLs = map[string]string{v: "https://shop-pr-7-web.preview.af.test"}
		f.Services = []afruntime.ServiceStatus{{Name: v, Ready: 1, Desired: 1, State: "running"}}
	}},
	{name: "url", state: Ready, url: true, set: func(f *Facts, v string) { f.URLs = map[string]string{"web": v} }},
	{name: "service state", state: Failed, set: func(f *Facts, v string) {
		f.Services = []afruntime.ServiceStatus{{Name: "web", State: v}}
	}},
	{name: "service reason", state: Failed, set: func(f *Facts, v string) {
		f.Services = []afruntime.ServiceStatus{{Name: "web", State: "failed", Reason: v}}
	}},
	{name: "service size", state: Ready, set: func(f *Facts, v string) {
		f.Services = []afruntime.ServiceStatus{{Name: "web", State: "running", CPU: v, Memory: v}}
	}},
	{name: "failure message", state: Failed, set: func(f *Facts, v string) {
		rep := failure.Newf(failure.ExitedDuringStart, "%s", v).Report()
		f.Failure = &rep
	}},
	{name: "failure hint", state: Failed, set: func(f *Facts, v string) {
		rep := failure.Newf(failure.ExitedDuringStart, "web exited").WithHint(v).Report()
		f.Failure = &rep
	}},
	{name: "failure not in the catalogue", state: Failed, set: func(f *Facts, v string) {
		f.Failure = &failure.Report{Code: failure.Code(v), Title: v, Message: v, Do: v}
	}},
	{name: "probe route", state: NotContained, set: func(f *Facts, v string) {
		f.Probe = &gate.Result{Verdict: gate.Escape, Routes: []gate.Attempt{{Route: v, Outcome: gate.Outcome(v), Detail: "x"}}}
	}},
	{name: "probe detail", state: Ready, set: func(f *Facts, v string) {
		f.Probe = &gate.Result{Verdict: gate.Contained, Routes: []gate.Attempt{{Route: "tcp-public", Outcome: gate.Denied, Detail: v}}}
	}},
	{name: "blocked host", state: Ready, code: true, set: func(f *Facts, v string) { f.Blocked = []BlockedHost{{Host: v, Count: 1}} }},
	{name: "blocked rule", state: Ready, set: func(f *Facts, v string) { f.Blocked = []BlockedHost{{Host: "evil.test", Rule: v, Count: 1}} }},
	{name: "left-out rule", state: Ready, set: func(f *Facts, v string) { f.LeftOut = []string{v} }},
	{name: "ignored setting", state: Ready, set: func(f *Facts, v string) { f.Ignored = []string{"runtime.domain: " + v} }},
	{name: "reason-gone", state: Gone, set: func(f *Facts, v string) { f.Reason = v }},
	{name: "reason-skipped", state: Skipped, set: func(f *Facts, v string) { f.Reason = v }},
}

var (
	blockStart = regexp.MustCompile("^(#{1,6}(\\s|$)|>|[-+*](\\s|$)|=+\\s*$|-{3,}|_{3,}|\\d{1,9}[.)](\\s|$)|\\s|~~~|```|<)")
	issueRef   = regexp.MustCompile(`#\d`)
	mention    = regexp.MustCompile(`(?i)@octocat`)
	linkDest   = regexp.MustCompile(`\]\(([^)]*)\)`)
)

// TestHostileText puts hostile text in each field the report takes from outside and checks
// that the comment, the step summary and the check run's text still say only what af wrote.
func TestHostileText(t *testing.T) {
	for _, field := range hostileFields {
		for _, v := range hostile {
			t.Run(field.name+"/"+v, func(t *testing.T) {
				f := facts(field.state)
				if field.state == Failed || field.state == NotContained {
					rep := failure.Newf(failure.ExitedDuringStart, "web exited").Report()
					f.Failure = &rep
				}
				field.set(f, v)
				_, check, _ := CheckOutput(f)
				for kind, md := range map[string]string{"comment": Comment(f), "summary": Summary(f), "check": check} {
					want := v
					if field.short {
						want = short(v)
					}
					checkHostile(t, kind, md, f, field.code, field.url, want)
				}
				if c := Comment(f); IsGone(c) != (f.State == Gone) {
					t.Errorf("IsGone(comment) is %v for a %s comment:\n%s", IsGone(c), f.State, c)
				}
			})
		}
	}
}

func checkHostile(t *testing.T, kind, md string, f *Facts, code, isURL bool, v string) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("%s: "+format+"\n%s", append([]any{kind}, append(args, md)...)...)
	}
	// af's own markers: Marker once at the start of the comment, GoneMarker once after it in a
	// gone comment, nowhere else.
	wantMarker, wantGone := 0, 0
	if kind == "comment" {
		wantMarker = 1
		if f.State == Gone {
			wantGone = 1
		}
		if !strings.HasPrefix(md, Marker+"\n") {
			fail("the comment does not start with the marker")
		}
	}
	if n := strings.Count(md, Marker); n != wantMarker {
		fail("%d Marker, want %d", n, wantMarker)
	}
	if n := strings.Count(md, GoneMarker); n != wantGone {
		fail("%d GoneMarker, want %d", n, wantGone)
	}
	if n := strings.Count(md, "<!--"); n != wantMarker+wantGone {
		fail("%d HTML comments, want %d", n, wantMarker+wantGone)
	}

	outside, spans := splitCode(md)
	if code && v != "" {
		want := strings.Join(strings.Fields(strings.ReplaceAll(v, "<!--", "<\u200b!--")), " ")
		found := false
		for _, s := range spans {
			if strings.Join(strings.Fields(s), " ") == want {
				found = true
			}
		}
		if !found && strings.Contains(md, strings.Fields(v)[0]) {
			fail("no code span holds %q whole (spans %q)", want, spans)
		}
	}
	if strings.Contains(outside, "<img") || strings.Contains(strings.ToLower(outside), "<img") {
		fail("raw <img outside a code span")
	}
	// GitHub finds mentions and issue references in the rendered text: entities decoded.
	rendered := html.UnescapeString(outside)
	if mention.MatchString(rendered) {
		fail("a raw @octocat outside a code span")
	}
	if issueRef.MatchString(rendered) {
		fail("an issue reference outside a code span")
	}
	if strings.Contains(strings.ToLower(outside), "www.evil") {
		fail("www.evil autolinks")
	}
	// Links: each ]( outside code spans is one of af's own, to an http(s) URL af was given.
	allowed := map[string]bool{}
	if u, ok := webURL(f.RunURL); ok {
		allowed[u] = true
	}
	for _, u := range f.URLs {
		if w, ok := webURL(u); ok {
			allowed[w] = true
		}
	}
	for _, m := range linkDest.FindAllStringSubmatchIndex(outside, -1) {
		if m[0] > 0 && outside[m[0]-1] == '\\' {
			fail("an escaped ] before ( still reads as a link at %d", m[0])
		}
		dest := outside[m[2]:m[3]]
		if !allowed[dest] || !(strings.HasPrefix(dest, "https://") || strings.HasPrefix(dest, "http://")) {
			fail("a link to %q af did not write", dest)
		}
	}
	if strings.Contains(md, "](javascript") || strings.Contains(md, "](data") {
		fail("a javascript: URL is a link")
	}
	text := linkDest.ReplaceAllString(outside, "](…)")
	if strings.Contains(text, "https://evil.test") || strings.Contains(text, "http://evil.test") {
		fail("a raw https://evil.test outside a code span and a link's destination")
	}
	if isURL && strings.HasPrefix(v, "https://evil.test") && !strings.Contains(md, "](https://evil.test/x)") {
		fail("the http(s) URL %q is not a link", v)
	}
	// Lines: only af's heading is one, and nothing from outside starts a block.
	lines := strings.Split(strings.TrimSuffix(outside, "\n"), "\n")
	headings := 0
	var table []string
	for i, l := range lines {
		switch {
		case (l == Marker || l == GoneMarker) && kind == "comment" && i < 2:
		case strings.HasPrefix(l, "### ") && kind == "comment", strings.HasPrefix(l, "## ") && kind == "summary":
			headings++
			if blockStart.MatchString(strings.TrimLeft(l, "# ")) {
				fail("the heading %q starts a block", l)
			}
		case strings.HasPrefix(l, "<sub>"):
		case strings.HasPrefix(l, "|"):
			table = append(table, l)
			continue
		case strings.HasPrefix(l, "- "):
			if blockStart.MatchString(l[2:]) {
				fail("the list item %q starts a block", l)
			}
		case blockStart.MatchString(l):
			fail("line %q starts a block", l)
		}
		checkTable(t, kind, table)
		table = nil
	}
	checkTable(t, kind, table)
	if headings > 1 {
		fail("%d headings", headings)
	}
}

// checkTable checks that every row of a table has as many cells as its header.
func checkTable(t *testing.T, kind string, rows []string) {
	t.Helper()
	if len(rows) == 0 {
		return
	}
	pipes := func(l string) int {
		n := 0
		for i := 0; i < len(l); i++ {
			switch l[i] {
			case '\\':
				i++
			case '|':
				n++
			}
		}
		return n
	}
	for _, r := range rows[1:] {
		if pipes(r) != pipes(rows[0]) {
			t.Errorf("%s: the row %q has %d cell borders, its header %d", kind, r, pipes(r), pipes(rows[0]))
		}
	}
}

// splitCode separates md's code spans (CommonMark: a run of n backticks, not escaped, up to the
// next run of exactly n) from the rest, each span left as "CODE".
func splitCode(md string) (outside string, spans []string) {
	var b strings.Builder
	for i := 0; i < len(md); {
		c := md[i]
		if c == '\\' && i+1 < len(md) && strings.IndexByte("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", md[i+1]) >= 0 {
			b.WriteString(md[i : i+2])
			i += 2
			continue
		}
		if c != '`' {
			b.WriteByte(c)
			i++
			continue
		}
		j := i
		for j < len(md) && md[j] == '`' {
			j++
		}
		if end := closing(md[j:], j-i); end >= 0 {
			content := md[j : j+end]
			if len(content) > 2 && content[0] == ' ' && content[len(content)-1] == ' ' {
				content = content[1 : len(content)-1]
			}
			spans = append(spans, content)
			b.WriteString("CODE")
			i = j + end + (j - i)
			continue
		}
		b.WriteString(md[i:j])
		i = j
	}
	return b.String(), spans
}

func TestHostileNotGone(t *testing.T) {
	f := facts(Ready)
	f.Environment, f.Namespace, f.Reason = GoneMarker, GoneMarker, GoneMarker
	f.URLs = map[string]string{GoneMarker: GoneMarker}
	f.Services = []afruntime.ServiceStatus{{Name: GoneMarker, State: GoneMarker, Reason: GoneMarker}}
	f.Blocked = []BlockedHost{{Host: GoneMarker, Rule: GoneMarker, Count: 1}}
	f.LeftOut = []string{GoneMarker}
	f.Probe = &gate.Result{Verdict: gate.Contained, Routes: []gate.Attempt{{Route: GoneMarker, Outcome: gate.Denied, Detail: GoneMarker}}}
	if c := Comment(f); IsGone(c) || strings.Count(c, Marker) != 1 {
		t.Fatalf("a ready comment whose fields say %q reads as gone:\n%s", GoneMarker, c)
	}
}

func TestEscaping(t *testing.T) {
	for _, c := range []struct{ fn, in, want string }{
		{"text", "web", "web"},
		{"text", "af-env-shop-pr-7", "af-env-shop-pr-7"},
		{"text", "api.stripe.com:443", "api.stripe.com:443"},
		{"text", "[click](https://evil.test)", `\[click\]\(https\://evil.test\)`},
		{"text", "<!-- af:gone -->", `&lt;\!-- af:gone --&gt;`},
		{"text", "@octocat #12 a&b", "@&#8203;octocat #&#8203;12 a&amp;b"},
		{"text", "line1\n# heading", `line1 \# heading`},
		{"text", "- item", `\- item`},
		{"text", "1. one", `1\. one`},
		{"text", "www.evil.test", `www\.evil.test`},
		{"prose", "the workflow ran `command: down`", "the workflow ran `command: down`"},
		{"prose", "a`b``c", "a\\`b\\`\\`c"},
		{"prose", "`x` then `` y ` ``", "`x` then `` y ` ``"},
		{"code", "af-env-shop-pr-7", "`af-env-shop-pr-7`"},
		{"code", "a`b``c", "```a`b``c```"},
		{"code", "`x", "`` `x ``"},
		{"code", "a\nb", "`a b`"},
		{"code", GoneMarker, "`<\u200b!-- af:gone -->`"},
		{"link", "https://shop-pr-7-web.preview.af.test", "[https\\://shop-pr-7-web.preview.af.test](https://shop-pr-7-web.preview.af.test)"},
		{"link", "https://x.test/a(b)|c?q=<'x'>", "[https\\://x.test/a\\(b\\)\\|c?q=&lt;'x'&gt;](https://x.test/a%28b%29%7Cc?q=%3C%27x%27%3E)"},
		{"link", "https://x.test/a b", `https\://x.test/a b`},
		{"link", "javascript:alert(1)", `javascript:alert\(1\)`},
		{"link", "https://github.com@evil.test/", `https\://github.com@&#8203;evil.test/`},
		{"link", "//evil.test/x", "//evil.test/x"},
		{"link", "HTTPS://X.test", "[HTTPS\\://X.test](https://X.test)"},
	} {
		fn := map[string]func(string) string{"text": mdText, "prose": mdProse, "code": mdCode, "link": mdLink}[c.fn]
		if got := fn(c.in); got != c.want {
			t.Errorf("%s(%q) = %q, want %q", c.fn, c.in, got, c.want)
		}
	}
}
