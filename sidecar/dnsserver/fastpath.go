package dnsserver

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"sync"

	"github.com/miekg/dns"
)

// ServeUDP reads queries from pc until it is closed. The common query — one question, no
// EDNS, type A, for an external name — is answered straight from the packet's bytes with no
// allocation beyond the name; every other query takes the full path (Answer) in its own
// goroutine, so a forwarded one never holds up the socket.
func (s *Server) ServeUDP(pc *net.UDPConn) error {
	buf := make([]byte, 4096)
	out := make([]byte, 0, 512)
	var wg sync.WaitGroup
	defer wg.Wait()
	cache := s.cache
	if batchable(pc, s.cfg.ClusterResolver) {
		return s.serveBatched(pc, &wg)
	}
	rl, err := newRelay(s.cfg.ClusterResolver, pc, s.cfg.ForwardTimeout, cache)
	if err != nil {
		rl = nil // forwarding takes the full path
	} else {
		defer rl.close()
	}
	for {
		n, from, err := pc.ReadFromUDPAddrPort(buf)
		if err != nil {
			return err
		}
		pkt := buf[:n]
		resp, verdict, qEnd := s.fast(pkt, out[:0], from.Addr())
		if verdict == fastAnswered {
			_, _ = pc.WriteToUDPAddrPort(resp, from)
			continue
		}
		if verdict == fastForward && rl != nil {
			if resp := cache.answer(pkt, qEnd, out[:0]); resp != nil {
				_, _ = pc.WriteToUDPAddrPort(resp, from)
				out = resp[:0] // keep what it grew to
				continue
			}
			if rl.forward(pkt, qEnd, from) {
				continue
			}
		}
		s.goSlow(&wg, pc, pkt, from)
	}
}

// goSlow answers pkt on the full path in a goroutine of its own, with a copy of it (the loop's
// buffer is read into again).
func (s *Server) goSlow(wg *sync.WaitGroup, pc *net.UDPConn, pkt []byte, from netip.AddrPort) {
	q := append([]byte(nil), pkt...)
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.slowUDP(pc, q, from)
	}()
}

func (s *Server) slowUDP(pc *net.UDPConn, pkt []byte, from netip.AddrPort) {
	m := new(dns.Msg)
	if err := m.Unpack(pkt); err != nil {
		// Answer FORMERR when at least the header is there, as a server should.
		if len(pkt) >= 12 {
			hdr := make([]byte, 12)
			copy(hdr, pkt[:12])
			hdr[2] = 0x80 | pkt[2]&0x79 // QR, keep opcode and RD
			hdr[3] = 0x80 | dns.RcodeFormatError
			for i := 4; i < 12; i++ {
				hdr[i] = 0
			}
			_, _ = pc.WriteToUDPAddrPort(hdr, from)
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*s.cfg.ForwardTimeout)
	defer cancel()
	resp := s.answer(ctx, m, "udp", from.Addr())
	if resp == nil {
		return
	}
	b, err := resp.Pack()
	if err != nil {
		return
	}
	_, _ = pc.WriteToUDPAddrPort(b, from)
}

// Fast path verdicts.
const (
	fastNo = iota
	fastAnswered
	fastForward
)

// fast answers a plain query for an external name's A record (fastAnswered), or says that a
// query for one of the environment's own names can be relayed as it is (fastForward, with the
// end of its question), or declines (fastNo).
func (s *Server) fast(pkt, out []byte, client netip.Addr) ([]byte, int, int) {
	if len(pkt) < 12+5 || !s.cfg.AdvertiseV4.Is4() {
		return nil, fastNo, 0
	}
	flags := binary.BigEndian.Uint16(pkt[2:4])
	if flags&0x8000 != 0 || flags&0x7800 != 0 { // a response, or an opcode other than QUERY
		return nil, fastNo, 0
	}
	if binary.BigEndian.Uint16(pkt[4:6]) != 1 || binary.BigEndian.Uint16(pkt[6:8]) != 0 ||
		binary.BigEndian.Uint16(pkt[8:10]) != 0 || binary.BigEndian.Uint16(pkt[10:12]) != 0 {
		return nil, fastNo, 0 // not exactly one question and nothing else (EDNS takes the full path)
	}
	// The name: plain labels only (no compression in a question), at most 255 bytes.
	i := 12
	var nb [256]byte // the name, on the stack: one allocation for its string
	name := nb[:0]
	for {
		if i >= len(pkt) {
			return nil, fastNo, 0
		}
		l := int(pkt[i])
		if l == 0 {
			i++
			break
		}
		if l > 63 || i+1+l > len(pkt) || len(name)+l+1 > 254 {
			return nil, fastNo, 0
		}
		for _, c := range pkt[i+1 : i+1+l] {
			if c == '.' || c == '\\' || c < '!' || c > '~' {
				return nil, fastNo, 0 // let the full path escape what needs escaping
			}
		}
		name = append(name, pkt[i+1:i+1+l]...)
		name = append(name, '.')
		i += 1 + l
	}
	if i+4 != len(pkt) {
		return nil, fastNo, 0
	}
	qtype := binary.BigEndian.Uint16(pkt[i : i+2])
	qclass := binary.BigEndian.Uint16(pkt[i+2 : i+4])
	if qtype != dns.TypeA || qclass != dns.ClassINET || len(name) == 0 {
		return nil, fastNo, 0
	}
	qname := string(name)
	k, fwd := s.classify(qname)
	if k == internal && fwd == qname {
		return nil, fastForward, i + 4
	}
	if k != external {
		return nil, fastNo, 0
	}
	out = append(out, pkt[:i+4]...)
	binary.BigEndian.PutUint16(out[2:4], 0x8000|flags&0x0100|0x0080) // QR, RD as asked, RA; NOERROR
	binary.BigEndian.PutUint16(out[6:8], 1)                          // one answer
	out = append(out, 0xc0, 0x0c, 0, byte(dns.TypeA), 0, byte(dns.ClassINET), 0, 0, 0, TTL, 0, 4)
	a := s.cfg.AdvertiseV4.As4()
	out = append(out, a[:]...)
	s.recordExternal(qname, client)
	return out, fastAnswered, i + 4
}
