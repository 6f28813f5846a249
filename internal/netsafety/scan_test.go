package netsafety

import (
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// allowed are the ranges a test may write: loopback, unspecified, private and shared ranges
// (used as data the guard must refuse, and the test cluster's own ranges), documentation and
// benchmarking ranges (test hosts in namespaces), link-local except the metadata address,
// multicast and reserved (guard data).
var allowed = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("224.0.0.0/3"),
}

var metadata = netip.AddrFrom4([4]byte{169, 254, 169, 254}) // written as bytes so no test names it

var ipv4 = regexp.MustCompile(`(^|[^0-9.])((?:\d{1,3}\.){3}\d{1,3})([^0-9.]|$)`)

func TestNoTestNamesARealPublicOrMetadataAddress(t *testing.T) {
	root := "../.."
	scanned := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == ".git" || name == "node_modules" || name == "bin" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") || strings.HasSuffix(path, "scan_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		scanned++
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range ipv4.FindAllStringSubmatch(line, -1) {
				a, err := netip.ParseAddr(m[2])
				if err != nil {
					continue // a version number or similar
				}
				if a == metadata {
					t.Errorf("%s:%d names the metadata address %s", path, i+1, a)
					continue
				}
				ok := false
				for _, p := range allowed {
					ok = ok || p.Contains(a)
				}
				if !ok {
					t.Errorf("%s:%d names %s, a public address; tests reach only loopback and their own test hosts", path, i+1, a)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if scanned < 10 {
		t.Fatalf("scanned only %d test files: the walk is broken", scanned)
	}
	t.Logf("scanned %d test files", scanned)
}
