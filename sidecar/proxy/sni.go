package proxy

import (
	"encoding/binary"
	"errors"
	"io"
	"strings"
)

// maxHello bounds how much of a TLS connection is read to find the server name.
const maxHello = 64 << 10

var (
	errNotTLS  = errors.New("not a TLS handshake")
	errNoSNI   = errors.New("the ClientHello names no server (no SNI)")
	errBadTLS  = errors.New("malformed ClientHello")
	errTooLong = errors.New("ClientHello larger than 64 KiB")
)

// readClientHello reads TLS records from r until it holds a whole ClientHello handshake
// message, and returns every byte read (to replay upstream) and the server name it names.
func readClientHello(r io.Reader) (raw []byte, serverName string, err error) {
	var hs []byte
	for {
		var hdr [5]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return raw, "", err
		}
		raw = append(raw, hdr[:]...)
		if hdr[0] != 0x16 || hdr[1] != 3 {
			return raw, "", errNotTLS
		}
		n := int(binary.BigEndian.Uint16(hdr[3:5]))
		if n == 0 || n > 16384+2048 {
			return raw, "", errBadTLS
		}
		if len(raw)+n > maxHello {
			return raw, "", errTooLong
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
			return raw, "", errNotTLS
		}
		msgLen := int(hs[1])<<16 | int(hs[2])<<8 | int(hs[3])
		if msgLen > maxHello {
			return raw, "", errTooLong
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
		return "", errBadTLS
	}
	if !s.skipVec(1) || !s.skipVec(2) || !s.skipVec(1) { // session id, cipher suites, compression
		return "", errBadTLS
	}
	if len(s) == 0 {
		return "", errNoSNI // no extensions
	}
	exts, ok := s.vec(2)
	if !ok {
		return "", errBadTLS
	}
	for len(exts) > 0 {
		typ, ok1 := exts.u16()
		data, ok2 := exts.vec(2)
		if !ok1 || !ok2 {
			return "", errBadTLS
		}
		if typ != 0 { // server_name
			continue
		}
		list, ok := data.vec(2)
		if !ok {
			return "", errBadTLS
		}
		for len(list) > 0 {
			nameType, ok1 := list.u8()
			name, ok2 := list.vec(2)
			if !ok1 || !ok2 {
				return "", errBadTLS
			}
			if nameType == 0 {
				h := string(name)
				if h == "" || len(h) > 253 || strings.ContainsAny(h, "\x00/ :") {
					return "", errBadTLS
				}
				return strings.ToLower(strings.TrimSuffix(h, ".")), nil
			}
		}
		return "", errNoSNI
	}
	return "", errNoSNI
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
