// Package tlshello reads the start of a TLS connection without terminating it: the records
// that hold the ClientHello, kept byte for byte to replay upstream, and the server name (SNI)
// the client asks for. It is how the sidecar decides a TLS connection by name.
package tlshello

import (
	"encoding/binary"
	"errors"
	"io"
	"strings"
)

// MaxHello bounds how much of a TLS connection is read to find the server name.
const MaxHello = 64 << 10

// Errors Read returns besides the reader's own.
var (
	ErrNotTLS  = errors.New("not a TLS handshake")
	ErrNoSNI   = errors.New("the ClientHello names no server (no SNI)")
	ErrBadTLS  = errors.New("malformed ClientHello")
	ErrTooLong = errors.New("ClientHello larger than 64 KiB")
)

// Read reads TLS records from r until it holds a whole ClientHello handshake
// message, and returns every byte read (to replay upstream) and the server name it names.
func Read(r io.Reader) (raw []byte, serverName string, err error) {
	var hs []byte
	for {
		var hdr [5]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return raw, "", err
		}
		raw = append(raw, hdr[:]...)
		if hdr[0] != 0x16 || hdr[1] != 3 {
			return raw, "", ErrNotTLS
		}
		n := int(binary.BigEndian.Uint16(hdr[3:5]))
		if n == 0 || n > 16384+2048 {
			return raw, "", ErrBadTLS
		}
		if len(raw)+n > MaxHello {
			return raw, "", ErrTooLong
		}
		start := len(raw)
		raw = append(raw, make([]byte, n)...)
		if got, err := io.ReadFull(r, raw[start:]); err != nil {
			return raw[:start+got], "", err
		}
		hs = append(hs, raw[start:]...)
		if len(hs) < 4 {
			continue
		}
		if hs[0] != 1 { // client_hello
			return raw, "", ErrNotTLS
		}
		msgLen := int(hs[1])<<16 | int(hs[2])<<8 | int(hs[3])
		if msgLen > MaxHello {
			return raw, "", ErrTooLong
		}
		if len(hs) >= 4+msgLen {
			name, err := parseClientHello(hs[4 : 4+msgLen])
			return raw, name, err
		}
	}
}

// parseClientHello returns the host_name of the server_name extension of a ClientHello body.
func parseClientHello(b []byte) (string, error) {
	s := reader(b)
	if !s.skip(2 + 32) { // legacy_version, random
		return "", ErrBadTLS
	}
	if !s.skipVec(1) || !s.skipVec(2) || !s.skipVec(1) { // session id, cipher suites, compression
		return "", ErrBadTLS
	}
	if len(s) == 0 {
		return "", ErrNoSNI // no extensions
	}
	exts, ok := s.vec(2)
	if !ok {
		return "", ErrBadTLS
	}
	for len(exts) > 0 {
		typ, ok1 := exts.u16()
		data, ok2 := exts.vec(2)
		if !ok1 || !ok2 {
			return "", ErrBadTLS
		}
		if typ != 0 { // server_name
			continue
		}
		list, ok := data.vec(2)
		if !ok {
			return "", ErrBadTLS
		}
		for len(list) > 0 {
			nameType, ok1 := list.u8()
			name, ok2 := list.vec(2)
			if !ok1 || !ok2 {
				return "", ErrBadTLS
			}
			if nameType == 0 {
				h := strings.ToLower(strings.TrimSuffix(string(name), "."))
				if !hostName(h) {
					return "", ErrBadTLS
				}
				return h, nil
			}
		}
		return "", ErrNoSNI
	}
	return "", ErrNoSNI
}

type reader []byte

func (r *reader) skip(n int) bool {
	if len(*r) < n {
		return false
	}
	*r = (*r)[n:]
	return true
}

func (r *reader) u8() (byte, bool) {
	if len(*r) < 1 {
		return 0, false
	}
	v := (*r)[0]
	*r = (*r)[1:]
	return v, true
}

func (r *reader) u16() (uint16, bool) {
	if len(*r) < 2 {
		return 0, false
	}
	v := binary.BigEndian.Uint16(*r)
	*r = (*r)[2:]
	return v, true
}

// vec reads a vector with a length prefix of lenBytes (1 or 2) bytes.
func (r *reader) vec(lenBytes int) (reader, bool) {
	var n int
	switch lenBytes {
	case 1:
		v, ok := r.u8()
		if !ok {
			return nil, false
		}
		n = int(v)
	case 2:
		v, ok := r.u16()
		if !ok {
			return nil, false
		}
		n = int(v)
	}
	if len(*r) < n {
		return nil, false
	}
	v := (*r)[:n]
	*r = (*r)[n:]
	return v, true
}

func (r *reader) skipVec(lenBytes int) bool {
	_, ok := r.vec(lenBytes)
	return ok
}

// hostName reports whether h is a plausible DNS name: 1 to 253 characters, labels of letters,
// digits, '-' and '_', none empty.
func hostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, l := range strings.Split(h, ".") {
		if l == "" || len(l) > 63 {
			return false
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}
