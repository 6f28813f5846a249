package failure

import "testing"

func TestLastLines(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"", 3, ""},
		{"\n\n  \n", 3, ""},
		{"one\ntwo\n", 3, "one\ntwo"},
		{"one\ntwo\nthree\nfour\n", 2, "three\nfour"},
		// Blank lines do not take the place of lines that say something.
		{"one\ntwo\n\n\nthree\n\n", 2, "two\nthree"},
		// Trailing spaces and carriage returns go; indentation stays.
		{"panic: boom\r\n\tmain.go:12 +0x1d  \n", 5, "panic: boom\n\tmain.go:12 +0x1d"},
	} {
		if got := LastLines(c.in, c.n); got != c.want {
			t.Errorf("LastLines(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

func TestIndent(t *testing.T) {
	if got := Indent(""); got != "    (no output)" {
		t.Errorf("Indent of nothing = %q", got)
	}
	if got, want := Indent("a\n\tb"), "    a\n    \tb"; got != want {
		t.Errorf("Indent = %q, want %q", got, want)
	}
}
