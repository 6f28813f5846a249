package failure

import (
	"fmt"
	"io"
	"strings"
)

// Report is the machine-readable form of a failure, as `-o json` prints it.
type Report struct {
	Code    Code   `json:"code"`
	Title   string `json:"title"`
	Message string `json:"message"`
	Means   string `json:"means"`
	Do      string `json:"do"`
	Exit    int    `json:"exit"`
}

// Report returns the machine-readable form of e.
func (e *Error) Report() Report {
	do := e.Entry.Do
	if e.Hint != "" {
		do = e.Hint + " " + do
	}
	return Report{
		Code:    e.Entry.Code,
		Title:   e.Entry.Title,
		Message: e.Error(),
		Means:   e.Entry.Means,
		Do:      do,
		Exit:    e.Exit(),
	}
}

// WriteText writes e for a person: what happened, what it means, what to do.
func (e *Error) WriteText(w io.Writer) error {
	r := e.Report()
	var b strings.Builder
	fmt.Fprintf(&b, "Error %s: %s\n", r.Code, r.Title)
	if what := strings.TrimPrefix(r.Message, string(r.Code)+": "+r.Title); what != "" {
		fmt.Fprintf(&b, "  what happened: %s\n", strings.TrimPrefix(what, ": "))
	}
	fmt.Fprintf(&b, "  what it means: %s\n", r.Means)
	fmt.Fprintf(&b, "  what to do:    %s\n", r.Do)
	_, err := io.WriteString(w, b.String())
	return err
}

// Markdown renders the catalogue as docs/errors.md.
func Markdown() []byte {
	var b strings.Builder
	b.WriteString("# af error catalogue\n\n")
	b.WriteString("<!-- Generated from failure/catalogue.go by `make generate`. Do not edit. -->\n\n")
	b.WriteString("Every failure af reports carries one of these codes. The exit status is what `af` exits with\n")
	b.WriteString("when that failure ends a command: 1 the operation failed, 2 bad input (nothing was changed),\n")
	b.WriteString("3 a deliberate refusal. With `-o json` a failure is printed as\n")
	b.WriteString("`{\"error\": {\"code\", \"title\", \"message\", \"means\", \"do\", \"exit\"}}`.\n\n")
	b.WriteString("| code | title | exit |\n|---|---|---|\n")
	for _, e := range Catalogue() {
		fmt.Fprintf(&b, "| [%s](#%s) | %s | %d |\n", e.Code, strings.ToLower(string(e.Code)), e.Title, e.Exit)
	}
	for _, e := range Catalogue() {
		fmt.Fprintf(&b, "\n## %s\n\n**%s** (exit %d)\n\n", e.Code, e.Title, e.Exit)
		fmt.Fprintf(&b, "What it means: %s\n\nWhat to do: %s\n", e.Means, e.Do)
	}
	return []byte(b.String())
}
