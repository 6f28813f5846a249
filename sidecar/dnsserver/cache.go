package dnsserver

import (
	"encoding/binary"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// answerCache keeps the cluster resolver's positive answers to the environment's own names for
// as long as their TTL says, so a repeated lookup of a service's name is answered on the
// sidecar's UDP loop without a round trip. Only plain answers are kept: NOERROR with at least
// one answer record, no truncation, no EDNS; never a denial (a Service created a moment later
// must resolve at once). The key is the question byte for byte, case included: an answer's
// names may spell the question as it was first asked, so a query spelled otherwise goes to
// the resolver. A cached answer goes out with the client's id and every TTL lowered by the
// time it spent here.
type answerCache struct {
	mu      sync.Mutex
	entries map[string]cachedAnswer
	max     int
	now     func() time.Time
}

type cachedAnswer struct {
	wire    []byte // the response as the resolver sent it
	ttls    []int  // offsets of the TTL fields of its records
	stored  time.Time
	expires time.Time
}

// maxCacheTTL bounds how long an answer is kept whatever its TTL.
const maxCacheTTL = 30 * time.Second

func newAnswerCache(max int) *answerCache {
	return &answerCache{entries: map[string]cachedAnswer{}, max: max, now: time.Now}
}

// store keeps resp, an answer to question (the question section's bytes), when it may be kept.
func (c *answerCache) store(question, resp []byte) {
	if c == nil || len(resp) < 12+len(question) {
		return
	}
	flags := binary.BigEndian.Uint16(resp[2:4])
	if flags&0x8000 == 0 || flags&0x0200 != 0 || flags&0x000f != dns.RcodeSuccess {
		return // not a response, truncated, or not NOERROR
	}
	if binary.BigEndian.Uint16(resp[4:6]) != 1 || binary.BigEndian.Uint16(resp[6:8]) == 0 {
		return // not one question, or no answer
	}
	ttls, minTTL, ok := recordTTLs(resp, 12+len(question))
	if !ok || minTTL == 0 {
		return
	}
	life := min(time.Duration(minTTL)*time.Second, maxCacheTTL)
	now := c.now()
	key := string(question)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.max {
		for k, e := range c.entries { // drop what expired; if nothing has, start over
			if now.After(e.expires) {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= c.max {
			c.entries = map[string]cachedAnswer{}
		}
	}
	c.entries[key] = cachedAnswer{wire: append([]byte(nil), resp...), ttls: ttls, stored: now, expires: now.Add(life)}
}

// answer writes into out the cached answer to the query pkt (its question ends at qEnd), or
// returns nil.
func (c *answerCache) answer(pkt []byte, qEnd int, out []byte) []byte {
	if c == nil {
		return nil
	}
	key := pkt[12:qEnd]
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[string(key)]
	if ok && !now.Before(e.expires) {
		delete(c.entries, string(key))
		ok = false
	}
	c.mu.Unlock()
	if !ok {
		return nil
	}
	out = append(out[:0], e.wire...)
	copy(out[0:2], pkt[0:2]) // the client's id
	// RD as the client asked, the rest as the resolver answered.
	flags := binary.BigEndian.Uint16(out[2:4])&^0x0100 | binary.BigEndian.Uint16(pkt[2:4])&0x0100
	binary.BigEndian.PutUint16(out[2:4], flags)
	aged := uint32(now.Sub(e.stored) / time.Second)
	for _, off := range e.ttls {
		ttl := binary.BigEndian.Uint32(out[off : off+4])
		if ttl > aged {
			ttl -= aged
		} else {
			ttl = 0
		}
		binary.BigEndian.PutUint32(out[off:off+4], ttl)
	}
	return out
}

// recordTTLs walks the records of a response from off (the end of its question section) and
// returns where each TTL field is and the smallest TTL. An OPT record (whose "TTL" holds EDNS
// flags) makes the answer one not to keep.
func recordTTLs(msg []byte, off int) (offsets []int, minTTL uint32, ok bool) {
	count := int(binary.BigEndian.Uint16(msg[6:8])) + int(binary.BigEndian.Uint16(msg[8:10])) + int(binary.BigEndian.Uint16(msg[10:12]))
	minTTL = ^uint32(0)
	for range count {
		// The owner name: labels, ending in a zero byte or a compression pointer.
		for {
			if off >= len(msg) {
				return nil, 0, false
			}
			l := int(msg[off])
			if l == 0 {
				off++
				break
			}
			if l&0xc0 == 0xc0 {
				off += 2
				break
			}
			if l&0xc0 != 0 {
				return nil, 0, false
			}
			off += 1 + l
		}
		if off+10 > len(msg) {
			return nil, 0, false
		}
		if binary.BigEndian.Uint16(msg[off:off+2]) == dns.TypeOPT {
			return nil, 0, false
		}
		ttl := binary.BigEndian.Uint32(msg[off+4 : off+8])
		offsets = append(offsets, off+4)
		minTTL = min(minTTL, ttl)
		rdlen := int(binary.BigEndian.Uint16(msg[off+8 : off+10]))
		off += 10 + rdlen
		if off > len(msg) {
			return nil, 0, false
		}
	}
	if off != len(msg) || len(offsets) == 0 {
		return nil, 0, false
	}
	return offsets, minTTL, true
}
