package failure

import "strings"

// LastLines returns the last n lines of a program's output that are not blank, each without
// its trailing spaces, for a failure's detail: what a person needs to see why it failed,
// without the rest. Blank lines are left out so that they do not take the place of one that
// says something; indentation is kept (a stack trace stays readable).
func LastLines(output string, n int) string {
	var lines []string
	for l := range strings.SplitSeq(output, "\n") {
		if l = strings.TrimRight(l, " \t\r"); strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Indent sets s off as a block under a failure's detail, four spaces in; nothing at all is
// shown as "(no output)".
func Indent(s string) string {
	if s == "" {
		return "    (no output)"
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
