package tlshello

import (
	"bytes"
	"errors"
	"os"
	"testing"
)

// The hellos in testdata were recorded from Go's crypto/tls (a client asking for
// API.Allowed.Test, and one with no server name). Live TLS through the sidecar is tested in
// package sidecar with curl and Node's fetch.
func hello(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRead(t *testing.T) {
	h := hello(t, "hello-sni.bin")
	raw, name, err := Read(bytes.NewReader(append(append([]byte(nil), h...), "trailing"...)))
	if err != nil || name != "api.allowed.test" || !bytes.Equal(raw, h) {
		t.Fatalf("name %q err %v, raw %d of %d bytes", name, err, len(raw), len(h))
	}
	// The same hello split across two records still parses.
	body := h[5:]
	var split []byte
	for _, chunk := range [][]byte{body[:40], body[40:]} {
		split = append(split, 0x16, 0x03, 0x01, byte(len(chunk)>>8), byte(len(chunk)))
		split = append(split, chunk...)
	}
	if _, name, err := Read(bytes.NewReader(split)); err != nil || name != "api.allowed.test" {
		t.Fatalf("split: %q %v", name, err)
	}
	if _, _, err := Read(bytes.NewReader(hello(t, "hello-nosni.bin"))); !errors.Is(err, ErrNoSNI) {
		t.Fatalf("no SNI: %v", err)
	}
	for _, bad := range [][]byte{
		[]byte("GET / HTTP/1.1\r\n\r\n"),
		{0x16, 0x03, 0x01, 0x00, 0x00},
		{0x16, 0x03, 0x01, 0x00, 0x04, 0x02, 0x00, 0x00, 0x00},
		{0x16, 0x03, 0x01, 0x00, 0x05, 0x01, 0x00, 0x00, 0x01, 0x00},
		h[:len(h)-1],
	} {
		if _, _, err := Read(bytes.NewReader(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzClientHello(f *testing.F) {
	f.Add(hello(f, "hello-sni.bin"))
	f.Add(hello(f, "hello-nosni.bin"))
	f.Add([]byte{0x16, 0x03, 0x01, 0x00, 0x05, 0x01, 0x00, 0x00, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		raw, name, err := Read(bytes.NewReader(b))
		if len(raw) > len(b) || !bytes.Equal(raw, b[:len(raw)]) {
			t.Fatalf("raw is not a prefix of the input: %d of %d bytes", len(raw), len(b))
		}
		if err == nil && (name == "" || len(name) > 253) {
			t.Fatalf("accepted name %q", name)
		}
	})
}
