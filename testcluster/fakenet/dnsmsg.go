package fakenet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// DNS record types and response codes used here.
const (
	typeA       = 1
	typeAAAA    = 28
	classIN     = 1
	rcodeOK     = 0
	rcodeFormat = 1
	rcodeNX     = 3
)

// question is the first question of a DNS message.
type question struct {
	name  string // lower case, no trailing dot
	qtype uint16
	end   int // offset just past the question in the message
}

var errShort = errors.New("dns message too short")

// parseQuestion reads the header and the first question of msg.
func parseQuestion(msg []byte) (question, error) {
	if len(msg) < 12 {
		return question{}, errShort
	}
	if binary.BigEndian.Uint16(msg[4:6]) < 1 {
		return question{}, errors.New("dns message has no question")
	}
	var labels []string
	i := 12
	for {
		if i >= len(msg) {
			return question{}, errShort
		}
		l := int(msg[i])
		i++
		if l == 0 {
			break
		}
		if l&0xc0 != 0 {
			return question{}, errors.New("compressed name in question")
		}
		if i+l > len(msg) {
			return question{}, errShort
		}
		labels = append(labels, string(msg[i:i+l]))
		i += l
	}
	if i+4 > len(msg) {
		return question{}, errShort
	}
	return question{
		name:  strings.ToLower(strings.Join(labels, ".")),
		qtype: binary.BigEndian.Uint16(msg[i : i+2]),
		end:   i + 4,
	}, nil
}

// answer builds the response to query from hosts (name -> IPv4 address).
func answer(query []byte, hosts map[string]string) []byte {
	q, err := parseQuestion(query)
	if err != nil {
		if len(query) < 12 {
			return nil
		}
		return header(query, rcodeFormat, 0, 0)
	}
	addr, known := hosts[q.name]
	if !known {
		return append(header(query, rcodeNX, 1, 0), query[12:q.end]...)
	}
	if q.qtype != typeA {
		return append(header(query, rcodeOK, 1, 0), query[12:q.end]...)
	}
	ip, err := netip.ParseAddr(addr)
	if err != nil || !ip.Is4() {
		return append(header(query, rcodeNX, 1, 0), query[12:q.end]...)
	}
	out := append(header(query, rcodeOK, 1, 1), query[12:q.end]...)
	out = append(out, 0xc0, 12) // pointer to the question's name
	out = binary.BigEndian.AppendUint16(out, typeA)
	out = binary.BigEndian.AppendUint16(out, classIN)
	out = binary.BigEndian.AppendUint32(out, 30)
	out = binary.BigEndian.AppendUint16(out, 4)
	a4 := ip.As4()
	return append(out, a4[:]...)
}

func header(query []byte, rcode, qd, an int) []byte {
	h := make([]byte, 12)
	copy(h[0:2], query[0:2])        // id
	h[2] = 0x80 | (query[2] & 0x79) // QR, opcode, RD copied
	h[3] = 0x80 | byte(rcode&0x0f)  // RA, rcode
	binary.BigEndian.PutUint16(h[4:6], uint16(qd))
	binary.BigEndian.PutUint16(h[6:8], uint16(an))
	return h
}

// Query builds a recursive query for name's A record with the given id.
func Query(id uint16, name string) []byte {
	msg := make([]byte, 12)
	binary.BigEndian.PutUint16(msg[0:2], id)
	msg[2] = 0x01 // RD
	binary.BigEndian.PutUint16(msg[4:6], 1)
	for _, label := range strings.Split(strings.TrimSuffix(name, "."), ".") {
		msg = append(msg, byte(len(label)))
		msg = append(msg, label...)
	}
	msg = append(msg, 0)
	msg = binary.BigEndian.AppendUint16(msg, typeA)
	return binary.BigEndian.AppendUint16(msg, classIN)
}

// ParseAnswer returns the IPv4 addresses in a response to Query(id, ...).
func ParseAnswer(id uint16, msg []byte) ([]netip.Addr, error) {
	q, err := parseQuestion(msg)
	if err != nil {
		return nil, err
	}
	if binary.BigEndian.Uint16(msg[0:2]) != id {
		return nil, fmt.Errorf("dns answer has id %d, want %d", binary.BigEndian.Uint16(msg[0:2]), id)
	}
	if rc := msg[3] & 0x0f; rc != rcodeOK {
		return nil, fmt.Errorf("dns answer has rcode %d", rc)
	}
	an := int(binary.BigEndian.Uint16(msg[6:8]))
	var out []netip.Addr
	i := q.end
	for range an {
		i, err = skipName(msg, i)
		if err != nil {
			return nil, err
		}
		if i+10 > len(msg) {
			return nil, errShort
		}
		rtype := binary.BigEndian.Uint16(msg[i : i+2])
		rdlen := int(binary.BigEndian.Uint16(msg[i+8 : i+10]))
		i += 10
		if i+rdlen > len(msg) {
			return nil, errShort
		}
		if rtype == typeA && rdlen == 4 {
			out = append(out, netip.AddrFrom4([4]byte(msg[i:i+4])))
		}
		i += rdlen
	}
	return out, nil
}

func skipName(msg []byte, i int) (int, error) {
	for {
		if i >= len(msg) {
			return 0, errShort
		}
		l := int(msg[i])
		switch {
		case l == 0:
			return i + 1, nil
		case l&0xc0 == 0xc0:
			return i + 2, nil
		default:
			i += 1 + l
		}
	}
}
