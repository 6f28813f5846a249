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
