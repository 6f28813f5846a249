package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/antifailure/af/testcluster"
	"github.com/antifailure/af/testcluster/internal/layout"
)

// TestPrintInternet: the fake internet's addresses as shell assignments a script can eval
// unquoted, the same as testcluster.Internet's.
func TestPrintInternet(t *testing.T) {
	var b bytes.Buffer
	if err := printInternet(&b); err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`^AF_INTERNET_[A-Z_]+=[0-9a-z./:-]+$`)
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if !line.MatchString(l) {
			t.Errorf("not a plain assignment: %q", l)
			continue
		}
		k, v, _ := strings.Cut(l, "=")
		got[k] = v
	}
	in := testcluster.Internet()
	for k, want := range map[string]string{
		"AF_INTERNET_CIDR":           in.CIDR,
		"AF_INTERNET_DOMAIN":         "af.test",
		"AF_INTERNET_PUBLIC_IP":      strings.TrimSuffix(in.PublicTCP, ":80"),
		"AF_INTERNET_RESOLVER_IP":    strings.TrimSuffix(in.Resolver, ":53"),
		"AF_INTERNET_ALLOWED_API_IP": in.AllowedAPIIP,
		"AF_INTERNET_BLOCKED_API_IP": in.BlockedAPIIP,
		"AF_INTERNET_METADATA_IP":    in.MetadataIP,
	} {
		if got[k] != want {
			t.Errorf("%s=%q, want %q", k, got[k], want)
		}
	}
	// The fake metadata server stands in for the cloud's, never is it.
	if strings.Contains(b.String(), layout.RealMetadataIP) {
		t.Error("names the real metadata address")
	}
}
