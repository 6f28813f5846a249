// Package report is what af reports on a pull request, and how: the facts of one run
// (Facts), rendered as the sticky comment, the check run's output and the step summary
// (markdown), and written to GitHub by a Reporter (one comment found by a hidden marker and
// the bot's own login, a check run with a real conclusion, a deployment and its statuses).
// The action and the App both report through it.
package report

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/gate"
	afruntime "github.com/antifailure/af/runtime"
)

// Marker starts every comment af writes; with the bot's login it finds the one to edit.
const Marker = "<!-- af:preview -->"

// GoneMarker follows Marker in a comment that says the environment is gone: the App rewrites a
// comment once, and a comment already saying so is left as it is.
const GoneMarker = "<!-- af:gone -->"

// IsGone says whether a comment body already says the environment is gone.
func IsGone(body string) bool { return strings.Contains(body, GoneMarker) }

// CheckName is the check run's name.
const CheckName = "af preview"

// The states a report can say.
const (
	Ready        = "ready"         // up, the probe found every route denied
	NotContained = "not-contained" // the probe found a way out: no service ran
	Failed       = "failed"        // some other failure
	Gone         = "gone"          // taken down
	Skipped      = "skipped"       // a fork's pull request nobody approved
)

// Facts are what one run of af found, for one pull request.
type Facts struct {
	State       string
	Environment string
	Namespace   string
	Repository  string
	PullRequest int
	Commit      string
	Duration    time.Duration
	At          time.Time
	RunURL      string

	Probe    *gate.Result
	Services []afruntime.ServiceStatus
	URLs     map[string]string
	Failure  *failure.Report

	// LeftOut lists the pull request's egress rules not applied (not approved).
	LeftOut []string
	// Ignored lists the values of the pull request's af.yaml that af did not take: base-only
	// fields and sizes above the default branch's limits ("path: why").
	Ignored []string
	// Blocked is what the sidecar refused while the environment started.
	Blocked []BlockedHost
	// Reason says why the environment is gone, or why nothing ran.
	Reason string
}

// FirstURL returns the URL of the first web service in name order.
func (f *Facts) FirstURL() string {
	names := slices.Sorted(maps.Keys(f.URLs))
	if len(names) == 0 {
		return ""
	}
	return f.URLs[names[0]]
}

func short(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}

// Headline is the one line that says how it went, as plain text (the check run's title, the
// deployment status's description). Comment and Summary write it as markdown, escaped.
func (f *Facts) Headline() string { return f.headline(func(s string) string { return s }) }

// headline is Headline with each value from outside af passed through esc.
func (f *Facts) headline(esc func(string) string) string {
	switch f.State {
	case Ready:
		return fmt.Sprintf("✅ Preview ready: %s", esc(f.Environment))
	case NotContained:
		return fmt.Sprintf("⛔ Not contained: %s was not started", esc(f.Environment))
	case Gone:
		return fmt.Sprintf("🗑️ Preview removed: %s", esc(f.Environment))
	case Skipped:
		return "⏸️ Preview not started: this pull request needs a maintainer's approval"
	}
	code := ""
	if f.Failure != nil {
		code = esc(string(f.Failure.Code)) + " "
	}
	return fmt.Sprintf("❌ Preview failed: %s%s", code, esc(f.Environment))
}

// Comment renders the sticky comment.
func Comment(f *Facts) string {
	var b strings.Builder
	b.WriteString(Marker + "\n")
	if f.State == Gone {
		b.WriteString(GoneMarker + "\n")
	}
	fmt.Fprintf(&b, "### %s\n\n", f.headline(mdText))
	body(&b, f)
	return b.String()
}

// Summary renders the step summary: the comment's content without the marker.
func Summary(f *Facts) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n", f.headline(mdText))
	body(&b, f)
	return b.String()
}

// body writes the report's markdown. Every value that comes from the pull request or the
// environment it ran (names, messages, reasons, hosts, rules, URLs) goes through mdText,
// mdProse, mdCode or mdLink (below); only af's own words and its catalogue's "what to do" keep
// their markdown.
func body(b *strings.Builder, f *Facts) {
	at := f.At.UTC().Format("2006-01-02 15:04 UTC")
	switch f.State {
	case Gone:
		if f.Namespace != "" {
			fmt.Fprintf(b, "The environment and its namespace %s were removed %s", mdCode(f.Namespace), at)
		} else {
			fmt.Fprintf(b, "The environment is gone (nothing of it was left on the cluster) as of %s", at)
		}
		if f.Reason != "" {
			fmt.Fprintf(b, ": %s", mdProse(f.Reason))
		}
		b.WriteString(".\n")
		return
	case Skipped:
		fmt.Fprintf(b, "%s\n", mdProse(f.Reason))
		return
	}
	if r := f.Failure; r != nil {
		what := strings.TrimPrefix(r.Message, string(r.Code)+": "+r.Title+": ")
		fmt.Fprintf(b, "**%s %s**: %s\n\n", mdText(string(r.Code)), mdProse(r.Title), mdProse(what))
		fmt.Fprintf(b, "What to do: %s\n\n", whatToDo(r))
	}
	if len(f.URLs) > 0 {
		names := slices.Sorted(maps.Keys(f.URLs))
		b.WriteString("| Service | Preview |\n|---|---|\n")
		for _, n := range names {
			fmt.Fprintf(b, "| %s | %s |\n", mdText(n), mdLink(f.URLs[n]))
		}
		b.WriteString("\n")
	}
	if f.Probe != nil && len(f.Probe.Routes) > 0 {
		fmt.Fprintf(b, "**Containment probe**: %s (%d round(s), %.0f ms)\n\n", mdText(string(f.Probe.Verdict)), f.Probe.Rounds, f.Probe.MS)
		b.WriteString("| Route | Verdict | Time | Detail |\n|---|---|---|---|\n")
		for _, r := range f.Probe.Routes {
			fmt.Fprintf(b, "| %s | %s | %.0f ms | %s |\n", mdText(r.Route), verdictMark(r.Outcome), r.MS, mdText(r.Detail))
		}
		b.WriteString("\n")
	}
	if len(f.Services) > 0 {
		b.WriteString("| Service | Ready | State | Size |\n|---|---|---|---|\n")
		for _, s := range f.Services {
			size := mdText(strings.Trim(s.CPU+" / "+s.Memory, " /"))
			if size == "" {
				size = "—"
			}
			state := mdText(s.State)
			if s.Reason != "" {
				state += ": " + mdText(s.Reason)
			}
			fmt.Fprintf(b, "| %s | %d/%d | %s | %s |\n", mdText(s.Name), s.Ready, s.Desired, state, size)
		}
		b.WriteString("\n")
	}
	if len(f.Blocked) > 0 {
		b.WriteString("**Blocked by the egress sidecar** while the environment started (`af net log --blocked` shows every decision):\n\n")
		for i, h := range f.Blocked {
			if i == maxBlocked {
				fmt.Fprintf(b, "- and %d more\n", len(f.Blocked)-maxBlocked)
				break
			}
			target := h.Host
			if h.Port > 0 {
				target = fmt.Sprintf("%s:%d", h.Host, h.Port)
			}
			fmt.Fprintf(b, "- %s: rule %s, %d time(s)\n", mdCode(target), mdText(orDefault(h.Rule)), h.Count)
		}
		b.WriteString("\n")
	}
	if len(f.LeftOut) > 0 {
		b.WriteString("**Egress rules left out** (this pull request widens what the default branch allows; the environment runs under the default branch's rules until a maintainer adds the approval label and runs the workflow again):\n\n")
		for _, r := range f.LeftOut {
			fmt.Fprintf(b, "- %s\n", mdText(r))
		}
		b.WriteString("\n")
	}
	if len(f.Ignored) > 0 {
		b.WriteString("**Settings taken from the default branch** (a pull request does not set where and how its environment runs, its database, its reports or its limits):\n\n")
		for _, r := range f.Ignored {
			fmt.Fprintf(b, "- %s\n", mdText(r))
		}
		b.WriteString("\n")
	}
	var foot []string
	if f.Commit != "" {
		foot = append(foot, "commit "+mdCode(short(f.Commit)))
	}
	if f.Namespace != "" {
		foot = append(foot, "namespace "+mdCode(f.Namespace))
	}
	if f.Duration > 0 {
		foot = append(foot, "took "+f.Duration.Round(100*time.Millisecond).String())
	}
	if f.RunURL != "" {
		if u, ok := webURL(f.RunURL); ok {
			foot = append(foot, "[run]("+u+")")
		} else {
			foot = append(foot, "run "+mdText(f.RunURL))
		}
	}
	if len(foot) > 0 {
		fmt.Fprintf(b, "<sub>%s</sub>\n", strings.Join(foot, " · "))
	}
}

// whatToDo is a failure's "what to do": the catalogue entry's own text keeps its markdown, an
// instance's hint before it (and anything that is not the catalogue's) is escaped.
func whatToDo(r *failure.Report) string {
	if e, ok := failure.Lookup(r.Code); ok && e.Do != "" {
		if r.Do == e.Do {
			return e.Do
		}
		if hint, ok := strings.CutSuffix(r.Do, " "+e.Do); ok {
			return mdProse(hint) + " " + e.Do
		}
	}
	return mdProse(r.Do)
}

// BlockedHost is one host the sidecar refused, with the rule that decided and how often.
type BlockedHost struct {
	Host  string
	Port  int
	Rule  string
	Count int
}

// maxBlocked bounds the blocked hosts a comment lists.
const maxBlocked = 20

func orDefault(rule string) string {
	if rule == "" {
		return "default"
	}
	return rule
}

// Conclusion is the check run's conclusion for f.
func Conclusion(f *Facts) string {
	switch f.State {
	case Ready:
		return "success"
	case Skipped:
		return "neutral"
	}
	if f.Removed() {
		return "cancelled"
	}
	return "failure"
}

// Removed reports whether the run ended because its environment was removed while it ran
// (AF-RUN-058): the remover's report stands, and this run's is no failure of the change.
func (f *Facts) Removed() bool {
	return f.Failure != nil && f.Failure.Code == failure.EnvironmentRemoved.Code
}

// CheckOutput renders the check run's title, summary and text.
func CheckOutput(f *Facts) (title, summary, text string) {
	title = f.Headline()
	switch {
	case f.State == NotContained && f.Probe != nil:
		var names []string
		for _, e := range f.Probe.Escaped {
			if !slices.Contains(names, e.Route) {
				names = append(names, e.Route)
			}
		}
		title = "Not contained: escaped by " + strings.Join(names, ", ")
	case f.Failure != nil && f.State == Failed:
		title = string(f.Failure.Code) + " " + f.Failure.Title
	}
	var b strings.Builder
	body(&b, f)
	return limit(title, 255), limit(b.String(), 65000), ""
}

func verdictMark(outcome gate.Outcome) string {
	switch outcome {
	case gate.Denied:
		return "denied ✅"
	case gate.Escaped:
		return "**escaped** ⛔"
	}
	return mdText(string(outcome))
}

func limit(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// RunURL is the workflow run's page from the Actions environment, or "".
func RunURL(getenv func(string) string) string {
	server, repo, run := getenv("GITHUB_SERVER_URL"), getenv("GITHUB_REPOSITORY"), getenv("GITHUB_RUN_ID")
	if server == "" || repo == "" || run == "" {
		return ""
	}
	u, err := url.Parse(strings.TrimRight(server, "/") + "/" + repo + "/actions/runs/" + run)
	if err != nil || !u.IsAbs() {
		return ""
	}
	return u.String()
}

// Escaping. A pull request is untrusted, and so is what its environment says (service names,
// messages that quote the manifest, the kubelet's reasons, the sidecar's hosts and rules): each
// value written into the markdown goes through one of these, so none can add a link, an image,
// HTML (a fake Marker or GoneMarker among it), a mention, an issue reference, a heading, a list,
// a code block, or a cell to a table. Values are written on one line: a newline becomes a space.

// mdText escapes s as inline text, for a table cell, a list item or a sentence: markdown's
// punctuation is backslash-escaped (| too, for tables), < > & become entities (no HTML, no
// comment, no entity of the value's own), @ and # before a digit get a zero-width space after
// them (GitHub links mentions and issue references in the rendered text, where a backslash or
// an entity no longer is: @&#8203;octocat notifies nobody), "://" and "www." are broken so
// GitHub does not autolink them, and a value that would start a block (a list, a heading, a
// quote, a thematic break) at the start of a line starts with an escape.
func mdText(s string) string { return escapeText(oneLine(s), true) }

// mdProse escapes s like mdText but keeps s's `code spans` as code spans (their content
// written by mdCode): messages and reasons, af's own or quoting the pull request, often name
// a command or a field that way.
func mdProse(s string) string {
	s = oneLine(s)
	var b strings.Builder
	start := true
	for s != "" {
		i := strings.IndexByte(s, '`')
		if i < 0 {
			b.WriteString(escapeText(s, start))
			break
		}
		b.WriteString(escapeText(s[:i], start))
		start = start && i == 0
		n := i
		for n < len(s) && s[n] == '`' {
			n++
		}
		fence := s[i:n]
		if end := closing(s[n:], len(fence)); end >= 0 {
			b.WriteString(mdCode(s[n : n+end]))
			s = s[n+end+len(fence):]
		} else {
			b.WriteString(strings.Repeat("\\`", len(fence)))
			s = s[n:]
		}
		start = false
	}
	return b.String()
}

// closing is where in s the first run of exactly n backticks starts, or -1.
func closing(s string, n int) int {
	for i := 0; i < len(s); {
		if s[i] != '`' {
			i++
			continue
		}
		j := i
		for j < len(s) && s[j] == '`' {
			j++
		}
		if j-i == n {
			return i
		}
		i = j
	}
	return -1
}

// mdCode writes s as a code span, whose content GitHub shows as it is (no markdown, no HTML, no
// mention, no link): the fence is one backtick longer than the longest run inside, a space pads
// content that starts or ends with a backtick, newlines become spaces, and "<!--" gets a
// zero-width space after its "<" so the raw body holds no HTML comment (Marker, GoneMarker) af
// did not write. A code span does not belong in a table cell: a | inside one splits the cell.
func mdCode(s string) string {
	s = strings.ReplaceAll(oneLine(s), "<!--", "<\u200b!--")
	if s == "" {
		return ""
	}
	longest, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", longest+1)
	if s[0] == '`' || s[len(s)-1] == '`' || (s[0] == ' ' && s[len(s)-1] == ' ' && strings.Trim(s, " ") != "") {
		s = " " + s + " "
	}
	return fence + s + fence
}

// mdLink writes a URL as a link to itself when webURL takes it, and as text (mdText) otherwise.
func mdLink(raw string) string {
	if u, ok := webURL(raw); ok {
		return "[" + mdText(raw) + "](" + u + ")"
	}
	return mdText(raw)
}

// webURL is raw as a link destination, when it is an absolute http or https URL that parses,
// with a host and no user information (https://github.com@evil.test), with no whitespace or
// control characters; ok is false otherwise. Characters a destination or a table cell would
// read as syntax are percent-encoded.
func webURL(raw string) (string, bool) {
	if raw == "" || strings.IndexFunc(raw, func(r rune) bool { return r <= ' ' || r == 0x7f || unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return "", false
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.User != nil || u.Opaque != "" {
		return "", false
	}
	if s := strings.ToLower(u.Scheme); s != "http" && s != "https" {
		return "", false
	}
	var b strings.Builder
	for _, c := range []byte(u.String()) {
		if c < 0x80 && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~:/?#[]@!$&*+,;=%", c) >= 0) {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String(), true
}

// oneLine puts s on one line: line breaks and tabs become spaces, other control characters
// (bidirectional overrides among them) are dropped, and the ends are trimmed.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\r' || r == '\t' || r == '\v' || r == '\f' || r == '\u0085' || r == '\u2028' || r == '\u2029':
			return ' '
		case unicode.IsControl(r), r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069', r == utf8.RuneError:
			return -1
		}
		return r
	}, s)
	return strings.TrimSpace(s)
}

// escapeText escapes one line of text; start says it may begin a line (or a list item).
func escapeText(s string, start bool) string {
	var b strings.Builder
	b.Grow(len(s) + len(s)/4)
	if start {
		if n := leadingDigits(s); n > 0 && n < len(s) && (s[n] == '.' || s[n] == ')') {
			// an ordered list item ("1. x"); ) is escaped below anyway
			b.WriteString(s[:n])
			if s[n] == '.' {
				b.WriteString("\\")
			}
			s = s[n:]
		} else if s != "" && strings.IndexByte("-+=", s[0]) >= 0 {
			b.WriteByte('\\')
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\\', '`', '*', '_', '~', '[', ']', '(', ')', '!', '|', '$':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		case '@':
			b.WriteString("@&#8203;")
		case '#':
			if i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9' {
				b.WriteString("#&#8203;")
			} else {
				b.WriteString("\\#")
			}
		case ':':
			if strings.HasPrefix(s[i+1:], "/") {
				b.WriteString("\\:")
			} else {
				b.WriteByte(c)
			}
		case '.':
			if i >= 3 && strings.EqualFold(s[i-3:i], "www") {
				b.WriteString("\\.")
			} else {
				b.WriteByte(c)
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func leadingDigits(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}
