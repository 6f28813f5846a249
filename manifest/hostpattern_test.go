package manifest

import "testing"

func TestHostPatternMatch(t *testing.T) {
	cases := []struct {
		pattern string
		host    string
		want    bool
	}{
		{"api.stripe.com", "api.stripe.com", true},
		{"api.stripe.com", "API.Stripe.com.", true},
		{"api.stripe.com", "x.api.stripe.com", false},
		{"api.stripe.com", "stripe.com", false},
		{"*.stripe.com", "a.stripe.com", true},
		{"*.stripe.com", "a.b.stripe.com", true},
		{"*.stripe.com", "stripe.com", false},
		{"*.stripe.com", "evilstripe.com", false},
		{"*.stripe.com", "stripe.com.evil.net", false},
		{"api.*.example.org", "api.eu.example.org", true},
		{"api.*.example.org", "api.eu.west.example.org", false},
		{"api.*.example.org", "api.example.org", false},
		{"*.*.example.org", "a.b.example.org", true},
		{"*.*.example.org", "a.b.c.example.org", true},
		{"*.*.example.org", "a.example.org", false},
		{"api.stripe.com", "", false},
		{"*.stripe.com", ".stripe.com", false},
	}
	for _, c := range cases {
		p, err := ParseHostPattern(c.pattern)
		if err != nil {
			t.Fatalf("ParseHostPattern(%q): %v", c.pattern, err)
		}
		if got := p.Match(c.host); got != c.want {
			t.Errorf("%q matches %q = %t, want %t", c.pattern, c.host, got, c.want)
		}
	}
}

func TestHostPatternSpecificity(t *testing.T) {
	for _, c := range []struct {
		pattern  string
		exact    bool
		literals int
	}{
		{"api.stripe.com", true, 3},
		{"*.stripe.com", false, 2},
		{"api.*.example.org", false, 3},
	} {
		p, err := ParseHostPattern(c.pattern)
		if err != nil {
			t.Fatal(err)
		}
		if p.Exact() != c.exact || p.Literals() != c.literals || p.String() != c.pattern {
			t.Errorf("%q: exact %t literals %d", c.pattern, p.Exact(), p.Literals())
		}
	}
}

func TestHostPatternRejects(t *testing.T) {
	for _, bad := range []string{
		"", "*", "*.com", "a*.b.com", "api.stripe.com:443", "https://api.stripe.com",
		"10.0.0.1", "::1", "[::1]", "a..b.com", ".a.com", "-a.b.com", "a-.b.com", "a b.com",
		"*.*", "api.stripe.com/v1",
	} {
		if _, err := ParseHostPattern(bad); err == nil {
			t.Errorf("ParseHostPattern(%q) accepted", bad)
		}
	}
}

func TestCheckSchedule(t *testing.T) {
	for _, ok := range []string{"* * * * *", "*/5 * * * *", "0 2 * * mon-fri", "0,30 8-18/2 1 jan,jul 0", "@daily", "@hourly", "0 0 ? * 7"} {
		if err := checkSchedule(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "* * * *", "* * * * * *", "60 * * * *", "* 24 * * *", "* * 0 * *", "* * * 13 *", "* * * * 8", "*/0 * * * *", "5-1 * * * *", "a * * * *", "@every 5m", "1,,2 * * * *", "+1 * * * *"} {
		if err := checkSchedule(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestDuration(t *testing.T) {
	for in, hours := range map[string]float64{"72h": 72, "3d": 72, "90m": 1.5, "1h30m": 1.5, "0d": 0} {
		d, err := Duration(in).Value()
		if err != nil || d.Hours() != hours {
			t.Errorf("%q = %v, %v", in, d, err)
		}
	}
	for _, bad := range []string{"", "d", "-3d", "+3d", "3 days", "3.5d", "forever", "99999999d"} {
		if _, err := Duration(bad).Value(); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
