package fakenet

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"time"
)

// ServeTCPEcho echoes whatever each TCP connection on addr sends, until ctx ends.
func ServeTCPEcho(ctx context.Context, addr string, logger *log.Logger) error {
	return ServeTCP(ctx, addr, "tcp echo", func(c net.Conn) {
		if logger != nil {
			logger.Printf("tcp %s: connection from %s", addr, c.RemoteAddr())
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		_, _ = io.Copy(c, c)
	})
}

// ServeTCP listens on addr and hands each connection to handle in its own goroutine until
// ctx ends; what names the server in errors.
func ServeTCP(ctx context.Context, addr, what string, handle func(net.Conn)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	go func() { <-ctx.Done(); ln.Close() }()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("%s: %w", what, err)
		}
		go handle(c)
	}
}

// ServeUDPEcho sends every UDP datagram on addr back to its sender, until ctx ends.
func ServeUDPEcho(ctx context.Context, addr string, logger *log.Logger) error {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return fmt.Errorf("udp echo: %w", err)
	}
	go func() { <-ctx.Done(); pc.Close() }()
	buf := make([]byte, 65536)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("udp echo: %w", err)
		}
		if logger != nil {
			logger.Printf("udp %s: datagram from %s", addr, from)
		}
		_, _ = pc.WriteTo(buf[:n], from)
	}
}
