package report

import (
	"fmt"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

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
