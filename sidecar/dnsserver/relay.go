package dnsserver

import (
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
//
// Identical queries in flight share one: a query whose question (bytes, case included) and
// answer-shaping flags (RD, AD, CD) are those of a query already sent and not yet answered
// waits for that query's answer instead of sending its own, up to maxJoin clients a query, as
// dnsmasq does. Each client gets the answer under its own id. Such an answer is at most one
// round trip older than the query that joined it; nothing is kept once it is sent (a TTL of 0
// is honoured), and a late, forged or foreign packet is refused for all of them alike.
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
	// inflight finds the query in flight a new one may join: pendingQuery.key to its id.
	inflight map[string]uint16
	clients  int           // clients waiting, joined ones included
	ids      *rand.ChaCha8 // unpredictable ids, without a system call per query
	done     chan struct{}
}

// maxJoin is how many clients share one query in flight at most; maxClients bounds the
// clients waiting for answers, in all.
const (
	maxJoin    = 64
	maxClients = 8192
)

// waiter is a client waiting for an answer.
type waiter struct {
	clientID uint16
	from     netip.AddrPort
	header   [12]byte // the query's header, for its SERVFAIL
	addr     net.Addr // from, as the batched writer needs it (nil: made from from)
}

type pendingQuery struct {
	waiter          // the client whose query was sent
	more   []waiter // clients whose identical queries joined it
	// key is the flags that shape an answer (2 bytes) and the question section: what a query
	// must share to join, and (key[2:]) what the answer's question must be.
	key     string
	expires time.Time
}

func (p *pendingQuery) question() string { return p.key[2:] }

// waiters calls f for every client of p.
func (p *pendingQuery) waiters(f func(w *waiter)) {
	f(&p.waiter)
	for i := range p.more {
		f(&p.more[i])
	}
}

// answerShaping are the header flags a query's answer depends on: RD, AD, CD.
const answerShaping = 0x0100 | 0x0020 | 0x0010

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
	r := &relay{up: up, reply: reply, timeout: timeout, cache: cache, pending: map[uint16]pendingQuery{}, inflight: map[string]uint16{},
		ids: rand.NewChaCha8(seed), done: make(chan struct{})}
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
		pending: map[uint16]pendingQuery{}, inflight: map[string]uint16{}, ids: rand.NewChaCha8(seed), done: make(chan struct{})}
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
// remembers the query under it. send says whether the query must go out under that id; false
// when it joined an identical one in flight. ok is false when too many clients wait.
func (r *relay) reserve(pkt []byte, qEnd int, from netip.AddrPort, to net.Addr) (id uint16, send, ok bool) {
	var kb [2 + 260]byte // flags and question on the stack: a lookup allocates nothing
	if qEnd-12 > len(kb)-2 {
		return 0, false, false
	}
	shaping := binary.BigEndian.Uint16(pkt[2:4]) & answerShaping
	key := append(binary.BigEndian.AppendUint16(kb[:0], shaping), pkt[12:qEnd]...)
	w := waiter{clientID: binary.BigEndian.Uint16(pkt[0:2]), from: from, addr: to}
	copy(w.header[:], pkt[:12])
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.clients >= maxClients {
		return 0, false, false // too many in flight: let the full path take it
	}
	if id, joined := r.inflight[string(key)]; joined {
		if p := r.pending[id]; len(p.more) < maxJoin-1 {
			p.more = append(p.more, w)
			r.pending[id] = p
			r.clients++
			return id, false, true
		}
	}
	id = uint16(r.ids.Uint64())
	for _, busy := r.pending[id]; busy; _, busy = r.pending[id] {
		id = uint16(r.ids.Uint64())
	}
	p := pendingQuery{waiter: w, key: string(key), expires: time.Now().Add(r.timeout)}
	r.pending[id] = p
	r.inflight[p.key] = id // a full query's later twins join the newest
	r.clients++
	return id, true, true
}

// take removes the query under id from the table, with every client waiting for it; the
// caller holds r.mu.
func (r *relay) take(id uint16, p pendingQuery) {
	delete(r.pending, id)
	if r.inflight[p.key] == id {
		delete(r.inflight, p.key)
	}
	r.clients -= 1 + len(p.more)
}

// forward sends pkt (a query whose question ends at qEnd) upstream for the client at from, or
// has it wait for an identical query in flight.
func (r *relay) forward(pkt []byte, qEnd int, from netip.AddrPort) bool {
	id, send, ok := r.reserve(pkt, qEnd, from, nil)
	if !ok {
		return false
	}
	if !send {
		return true
	}
	out := append([]byte(nil), pkt...)
	binary.BigEndian.PutUint16(out[0:2], id)
	if _, err := r.up.Write(out); err != nil {
		// The resolver cannot be written to: the client's query takes the full path, and any
		// that joined it meanwhile get SERVFAIL.
		r.mu.Lock()
		p, held := r.pending[id]
		if held {
			r.take(id, p)
		}
		r.mu.Unlock()
		for _, w := range p.more {
			_, _ = r.reply.WriteToUDPAddrPort(servfail(&w, p.question()), w.from)
		}
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
	if !ok || len(resp) < 12+len(p.key)-2 || string(resp[12:12+len(p.key)-2]) != p.question() {
		return pendingQuery{}, false
	}
	r.take(id, p)
	return p, true
}

// servfail is the SERVFAIL for w's query, whose question section is question.
func servfail(w *waiter, question string) []byte {
	out := append(append([]byte(nil), w.header[:]...), question...)
	flags := binary.BigEndian.Uint16(out[2:4])
	binary.BigEndian.PutUint16(out[2:4], 0x8000|flags&0x7900|0x0080|dns.RcodeServerFailure)
	binary.BigEndian.PutUint16(out[4:6], 1)
	for i := 6; i < 12; i++ {
		out[i] = 0
	}
	return out
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
		r.cache.store(resp[12:12+len(p.question())], resp)
		p.waiters(func(w *waiter) {
			binary.BigEndian.PutUint16(resp[0:2], w.clientID)
			_, _ = r.reply.WriteToUDPAddrPort(resp, w.from)
		})
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
					r.take(id, p)
				}
			}
			r.mu.Unlock()
			for _, p := range late {
				p.waiters(func(w *waiter) {
					_, _ = r.reply.WriteToUDPAddrPort(servfail(w, p.question()), w.from)
				})
			}
		}
	}
}
