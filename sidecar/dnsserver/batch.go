package dnsserver

// The batched UDP loop: on Linux, queries are read up to batchSize at a time (recvmmsg) and
// what the loop answers or relays is written the same way (sendmmsg), so a busy socket pays
// one system call for many packets instead of one each; the relay reads the cluster
// resolver's answers and writes them back to the clients in batches too. Each packet is
// treated exactly as the one-at-a-time loop treats it.

import (
	"encoding/binary"
	"net"
	"net/netip"
	"runtime"
	"sync"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// batchSize is how many packets one system call reads or writes at most.
const batchSize = 32

// batchable says whether pc can take the batched loop, whose relay sends from pc itself: on
// Linux, when pc can reach the cluster resolver, an IPv4 address — pc is an IPv4 socket, or the
// dual-stack socket ":53" opens (IPv4 clients arrive there as mapped addresses and are answered
// with IPv4 ones, which Linux sends on such a socket). Anything else keeps the plain loop and
// its relay's own socket.
func batchable(pc *net.UDPConn, resolver string) bool {
	a, ok := pc.LocalAddr().(*net.UDPAddr)
	if runtime.GOOS != "linux" || !ok {
		return false
	}
	r, err := netip.ParseAddrPort(resolver)
	if err != nil || !r.Addr().Unmap().Is4() {
		return false
	}
	return a.IP.To4() != nil || a.IP.IsUnspecified()
}

// batchConn reads and writes many datagrams per system call: ipv4.PacketConn or
// ipv6.PacketConn, by the socket's family (their messages are one type).
type batchConn interface {
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
	WriteBatch(ms []ipv4.Message, flags int) (int, error)
}

func newBatchConn(pc *net.UDPConn) batchConn {
	if a, ok := pc.LocalAddr().(*net.UDPAddr); ok && a.IP.To4() != nil {
		return ipv4.NewPacketConn(pc)
	}
	return ipv6.NewPacketConn(pc)
}

// outBatch collects packets to write with one sendmmsg (to each message's Addr, or on a
// connected socket to its peer).
type outBatch struct {
	pc   batchConn
	ms   []ipv4.Message
	bufs [][]byte
}

func newOutBatch(pc batchConn) *outBatch {
	b := &outBatch{pc: pc, ms: make([]ipv4.Message, 0, batchSize), bufs: make([][]byte, batchSize)}
	for i := range b.bufs {
		b.bufs[i] = make([]byte, 0, 512)
	}
	return b
}

// slot returns the buffer of the next message, emptied; add queues what was written into it.
func (b *outBatch) slot() []byte { return b.bufs[len(b.ms)][:0] }

func (b *outBatch) add(p []byte, to net.Addr) {
	i := len(b.ms)
	b.bufs[i] = p[:0] // keep what it grew to
	b.ms = append(b.ms, ipv4.Message{Buffers: [][]byte{p}, Addr: to})
	if len(b.ms) == cap(b.ms) {
		b.flush()
	}
}

// flush writes what is queued; a packet the kernel refuses is dropped, as a lost datagram.
func (b *outBatch) flush() {
	for ms := b.ms; len(ms) > 0; {
		n, err := b.pc.WriteBatch(ms, 0)
		switch {
		case n > 0:
			ms = ms[n:]
		case err != nil:
			ms = ms[1:] // the first one refused: drop it, send the rest
		default:
			ms = nil
		}
	}
	for i := range b.ms {
		b.ms[i] = ipv4.Message{}
	}
	b.ms = b.ms[:0]
}

// sharedRelay returns the relay of the batched loops, made with the first loop (nil when the
// cluster resolver is not an IPv4 address and port: those loops forward on the full path), and
// a release for the loop to call as it ends: the last one stops the relay.
func (s *Server) sharedRelay(pc *net.UDPConn) (*relay, func()) {
	s.sharedMu.Lock()
	defer s.sharedMu.Unlock()
	if s.loops == 0 {
		s.shared = nil
		if rl, err := newSharedRelay(s.cfg.ClusterResolver, pc, s.cfg.ForwardTimeout, s.cache); err == nil {
			s.shared = rl
		}
	}
	s.loops++
	rl := s.shared
	return rl, func() {
		s.sharedMu.Lock()
		defer s.sharedMu.Unlock()
		if s.loops--; s.loops == 0 && s.shared != nil {
			s.shared.close()
			s.shared = nil
		}
	}
}

// serveBatched is ServeUDP's loop on a batchable socket: it reads queries and the cluster
// resolver's answers alike, one goroutine for both. A packet from the resolver's address is an
// answer to a relayed query (matched by id and question, as a relay must); any other is a
// query.
func (s *Server) serveBatched(pc *net.UDPConn, wg *sync.WaitGroup) error {
	bc := newBatchConn(pc)
	in := make([]ipv4.Message, batchSize)
	for i := range in {
		in[i].Buffers = [][]byte{make([]byte, 65535)}
	}
	out := newOutBatch(bc)
	cache := s.cache
	rl, release := s.sharedRelay(pc)
	defer release()
	for {
		n, err := bc.ReadBatch(in, 0)
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			m := &in[i]
			ua, ok := m.Addr.(*net.UDPAddr)
			if !ok {
				continue
			}
			from := ua.AddrPort()
			from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
			pkt := m.Buffers[0][:m.N]
			if rl != nil && from == rl.resolver {
				if len(pkt) < 12 {
					continue
				}
				p, ok := rl.match(pkt)
				if !ok {
					continue // late, forged or not ours
				}
				cache.store(pkt[12:12+len(p.question())], pkt)
				p.waiters(func(w *waiter) {
					a := append(out.slot(), pkt...)
					binary.BigEndian.PutUint16(a[0:2], w.clientID)
					out.add(a, w.addr)
				})
				continue
			}
			if len(pkt) > 4096 {
				continue // no query is this long; the buffer is sized for answers
			}
			resp, verdict, qEnd := s.fast(pkt, out.slot(), from.Addr())
			if verdict == fastAnswered {
				out.add(resp, ua)
				continue
			}
			if verdict == fastForward && rl != nil {
				if resp := cache.answer(pkt, qEnd, out.slot()); resp != nil {
					out.add(resp, ua)
					continue
				}
				if id, send, ok := rl.reserve(pkt, qEnd, from, ua); ok {
					if send {
						q := append(out.slot(), pkt...)
						binary.BigEndian.PutUint16(q[0:2], id)
						out.add(q, rl.resolverUA)
					}
					continue
				}
			}
			s.goSlow(wg, pc, pkt, from)
		}
		out.flush()
	}
}
