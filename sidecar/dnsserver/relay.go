package dnsserver

import (
	"bytes"
	crand "crypto/rand"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// relay forwards the environment's own names to the cluster resolver as they are, byte for
// byte, on one connected UDP socket: the query goes out under an id of the relay's choosing,
// and the answer comes back to the client with the client's id. It is the fast path for
// forwarded names; names that must be rewritten (short service names) take the full path.
type relay struct {
	up *net.UDPConn // nil for the shared relay: the loops' own sockets send and receive
	// resolver is where the shared relay's queries go, and whose packets are its answers.
	resolver   netip.AddrPort
	resolverUA *net.UDPAddr
	reply      *net.UDPConn // the socket clients wrote to
	timeout    time.Duration
	cache      *answerCache // keeps what may be kept of the answers (nil: nothing)

	mu      sync.Mutex
	pending map[uint16]pendingQuery
	ids     *rand.ChaCha8 // unpredictable ids, without a system call per query
	done    chan struct{}
}

type pendingQuery struct {
	clientID uint16
	from     netip.AddrPort
	question []byte // the question section, to check the answer is for it
	expires  time.Time
	header   [12]byte
	addr     net.Addr // from, as the batched writer needs it (nil: made from from)
}

func newRelay(resolver string, reply *net.UDPConn, timeout time.Duration, cache *answerCache) (*relay, error) {
	ra, err := net.ResolveUDPAddr("udp", resolver)
	if err != nil {
		return nil, err
	}
	up, err := net.DialUDP("udp", nil, ra)
	if err != nil {
		return nil, err
	}
	var seed [32]byte
	if _, err := crand.Read(seed[:]); err != nil {
		up.Close()
		return nil, err
	}
	r := &relay{up: up, reply: reply, timeout: timeout, cache: cache, pending: map[uint16]pendingQuery{}, ids: rand.NewChaCha8(seed), done: make(chan struct{})}
	go r.readAnswers()
	go r.expire()
	return r, nil
}

// newSharedRelay is the relay of the batched loops: no socket of its own (each loop sends its
// queries from the socket the clients wrote to, and reads the answers there too), one table of
// queries in flight for them all. reply writes the SERVFAILs of queries that time out.
func newSharedRelay(resolver string, reply *net.UDPConn, timeout time.Duration, cache *answerCache) (*relay, error) {
	ap, err := netip.ParseAddrPort(resolver)
	if err != nil {
		return nil, err
	}
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	if !ap.Addr().Is4() {
		return nil, net.InvalidAddrError("the shared relay serves IPv4 sockets: " + resolver)
	}
	var seed [32]byte
	if _, err := crand.Read(seed[:]); err != nil {
		return nil, err
	}
	r := &relay{resolver: ap, resolverUA: net.UDPAddrFromAddrPort(ap), reply: reply, timeout: timeout, cache: cache,
		pending: map[uint16]pendingQuery{}, ids: rand.NewChaCha8(seed), done: make(chan struct{})}
	go r.expire()
	return r, nil
}

func (r *relay) close() {
	select {
	case <-r.done:
	default:
		close(r.done)
	}
	if r.up != nil {
		r.up.Close()
	}
}

// reserve takes an id for a query for the client at from (to, for the batched writer) and
// remembers the query under it; false when too many are in flight.
func (r *relay) reserve(pkt []byte, qEnd int, from netip.AddrPort, to net.Addr) (uint16, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.pending) > 4096 {
		return 0, false // too many in flight: let the full path take it
	}
	id := uint16(r.ids.Uint64())
	for _, busy := r.pending[id]; busy; _, busy = r.pending[id] {
		id = uint16(r.ids.Uint64())
	}
	p := pendingQuery{clientID: binary.BigEndian.Uint16(pkt[0:2]), from: from, addr: to, question: append([]byte(nil), pkt[12:qEnd]...), expires: time.Now().Add(r.timeout)}
	copy(p.header[:], pkt[:12])
	r.pending[id] = p
	return id, true
}

// forward sends pkt (a query whose question ends at qEnd) upstream for the client at from.
func (r *relay) forward(pkt []byte, qEnd int, from netip.AddrPort) bool {
	id, ok := r.reserve(pkt, qEnd, from, nil)
	if !ok {
		return false
	}
	out := append([]byte(nil), pkt...)
	binary.BigEndian.PutUint16(out[0:2], id)
	if _, err := r.up.Write(out); err != nil {
		r.mu.Lock()
		delete(r.pending, id)
		r.mu.Unlock()
		return false
	}
	return true
}

// match takes the pending query resp answers (same id, same question), or says it is late,
// forged or not ours.
func (r *relay) match(resp []byte) (pendingQuery, bool) {
	id := binary.BigEndian.Uint16(resp[0:2])
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pending[id]
	if !ok || len(resp) < 12+len(p.question) || !bytes.Equal(resp[12:12+len(p.question)], p.question) {
		return pendingQuery{}, false
	}
	delete(r.pending, id)
	return p, true
}

func (r *relay) readAnswers() {
	buf := make([]byte, 65535)
	for {
		n, err := r.up.Read(buf)
		if err != nil {
			select {
			case <-r.done:
				return
			default:
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			// ICMP port unreachable and the like: keep reading; the queries expire.
			continue
		}
		if n < 12 {
			continue
		}
		resp := buf[:n]
		p, ok := r.match(resp)
		if !ok {
			continue // late, forged or not ours
		}
		r.cache.store(p.question, resp)
		binary.BigEndian.PutUint16(resp[0:2], p.clientID)
		_, _ = r.reply.WriteToUDPAddrPort(resp, p.from)
	}
}

// expire answers SERVFAIL to queries the resolver did not answer in time.
func (r *relay) expire() {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-r.done:
			return
		case now := <-t.C:
			var late []pendingQuery
			r.mu.Lock()
			for id, p := range r.pending {
				if now.After(p.expires) {
					late = append(late, p)
					delete(r.pending, id)
				}
			}
			r.mu.Unlock()
			for _, p := range late {
				out := append(append([]byte(nil), p.header[:]...), p.question...)
				flags := binary.BigEndian.Uint16(out[2:4])
				binary.BigEndian.PutUint16(out[2:4], 0x8000|flags&0x7900|0x0080|dns.RcodeServerFailure)
				binary.BigEndian.PutUint16(out[4:6], 1)
				for i := 6; i < 12; i++ {
					out[i] = 0
				}
				_, _ = r.reply.WriteToUDPAddrPort(out, p.from)
			}
		}
	}
}
