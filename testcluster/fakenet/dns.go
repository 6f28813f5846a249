package fakenet

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log"
	"net"
)

// ServeDNS answers A queries for hosts on addr over UDP and TCP until ctx ends.
// Unknown names get NXDOMAIN. Each query is logged.
func ServeDNS(ctx context.Context, addr string, hosts map[string]string, logger *log.Logger) error {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return fmt.Errorf("dns: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		pc.Close()
		return fmt.Errorf("dns: %w", err)
	}
	go func() { <-ctx.Done(); pc.Close(); ln.Close() }()
	go serveDNSTCP(ln, hosts, logger)
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("dns: %w", err)
		}
		logQuery(logger, "udp", from, buf[:n])
		if resp := answer(buf[:n], hosts); resp != nil {
			_, _ = pc.WriteTo(resp, from)
		}
	}
}

func serveDNSTCP(ln net.Listener, hosts map[string]string, logger *log.Logger) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			var l [2]byte
			if _, err := io.ReadFull(c, l[:]); err != nil {
				return
			}
			msg := make([]byte, binary.BigEndian.Uint16(l[:]))
			if _, err := io.ReadFull(c, msg); err != nil {
				return
			}
			logQuery(logger, "tcp", c.RemoteAddr(), msg)
			if resp := answer(msg, hosts); resp != nil {
				_, _ = c.Write(binary.BigEndian.AppendUint16(nil, uint16(len(resp))))
				_, _ = c.Write(resp)
			}
		}()
	}
}

func logQuery(logger *log.Logger, proto string, from net.Addr, msg []byte) {
	if logger == nil {
		return
	}
	if q, err := parseQuestion(msg); err == nil {
		logger.Printf("dns %s query from %s: %s type %d", proto, from, q.name, q.qtype)
	}
}
