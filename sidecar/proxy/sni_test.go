package proxy

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// clientHello returns the bytes crypto/tls sends first for serverName ("" sends no SNI).
func clientHello(t testing.TB, serverName string) []byte {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	go func() {
		c := tls.Client(b, &tls.Config{ServerName: serverName, InsecureSkipVerify: serverName == ""})
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		_ = c.Handshake()
		b.Close()
	}()
	_ = a.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 64<<10)
	var got []byte
	for {
		n, err := a.Read(buf)
		got = append(got, buf[:n]...)
		_, _, herr := readClientHello(bytes.NewReader(got))
		if err != nil || !errors.Is(herr, io.ErrUnexpectedEOF) && !errors.Is(herr, io.EOF) {
			return got
		}
	}
}

func TestReadClientHello(t *testing.T) {
	hello := clientHello(t, "API.Allowed.Test")
	raw, name, err := readClientHello(bytes.NewReader(hello))
	if err != nil || name != "api.allowed.test" || !bytes.Equal(raw, hello) {
		t.Fatalf("name %q err %v, raw %d of %d bytes", name, err, len(raw), len(hello))
	}
	// The hello split across records still parses.
	body := hello[5:]
	split := []byte{}
	for i, chunk := range [][]byte{body[:40], body[40:]} {
		_ = i
		split = append(split, 0x16, 0x03, 0x01, byte(len(chunk)>>8), byte(len(chunk)))
		split = append(split, chunk...)
	}
	if _, name, err := readClientHello(bytes.NewReader(split)); err != nil || name != "api.allowed.test" {
		t.Fatalf("split: %q %v", name, err)
	}
	if _, _, err := readClientHello(bytes.NewReader(clientHello(t, ""))); !errors.Is(err, errNoSNI) {
		t.Fatalf("no SNI: %v", err)
	}
	for _, bad := range [][]byte{
		[]byte("GET / HTTP/1.1\r\n\r\n"),
		{0x16, 0x03, 0x01, 0x00, 0x00},
		{0x16, 0x03, 0x01, 0x00, 0x04, 0x02, 0x00, 0x00, 0x00},
		{0x16, 0x03, 0x01, 0x00, 0x05, 0x01, 0x00, 0x00, 0x01, 0x00},
	} {
		if _, _, err := readClientHello(bytes.NewReader(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzClientHello(f *testing.F) {
	f.Add(clientHello(f, "api.allowed.test"))
	f.Add(clientHello(f, ""))
	f.Add([]byte{0x16, 0x03, 0x01, 0x00, 0x05, 0x01, 0x00, 0x00, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		raw, name, err := readClientHello(bytes.NewReader(b))
		if len(raw) > len(b) {
			t.Fatalf("read %d of %d bytes", len(raw), len(b))
		}
		if err == nil && (name == "" || len(name) > 253) {
			t.Fatalf("accepted name %q", name)
		}
	})
}
