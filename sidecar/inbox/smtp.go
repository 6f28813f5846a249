package inbox

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/mail"
	"net/netip"
	"strings"
	"time"
)

// SMTP limits.
const (
	maxLine       = 4096
	maxRecipients = 100
	maxMessage    = 10 << 20
)

// SMTPServer accepts mail and stores it; nothing is relayed. STARTTLS is refused with 502 and
// never advertised; AUTH PLAIN and LOGIN are accepted with any credentials, which are discarded.
type SMTPServer struct {
	Store    *Store
	Hostname string
	// IdleTimeout bounds the wait for each command.
	IdleTimeout time.Duration
	// OnMessage, when set, is called for every stored message (the decision log).
	OnMessage func(Message)
}

// ServeConn handles one SMTP session until QUIT, an error, or ctx ends.
func (s *SMTPServer) ServeConn(ctx context.Context, c net.Conn) {
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	idle := s.IdleTimeout
	if idle == 0 {
		idle = 2 * time.Minute
	}
	r := bufio.NewReaderSize(c, maxLine)
	w := bufio.NewWriter(c)
	reply := func(lines ...string) error {
		for _, l := range lines {
			if _, err := w.WriteString(l + "\r\n"); err != nil {
				return err
			}
		}
		return w.Flush()
	}
	readLine := func() (string, error) {
		_ = c.SetReadDeadline(time.Now().Add(idle))
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return "", errLineTooLong
		}
		if err != nil {
			return "", err
		}
		return strings.TrimRight(string(line), "\r\n"), nil
	}
	host := s.Hostname
	if host == "" {
		host = "af-sidecar"
	}
	if reply("220 "+host+" ESMTP af sidecar: mail is captured, never delivered") != nil {
		return
	}
	var from string
	var to []string
	haveFrom := false
	for {
		line, err := readLine()
		if errors.Is(err, errLineTooLong) {
			_ = reply("500 5.5.2 line too long")
			return
		}
		if err != nil {
			return
		}
		verb, arg, _ := strings.Cut(line, " ")
		switch strings.ToUpper(verb) {
		case "EHLO":
			err = reply("250-"+host, "250-PIPELINING", "250-8BITMIME", fmt.Sprintf("250-SIZE %d", maxMessage), "250 AUTH PLAIN LOGIN")
		case "HELO":
			err = reply("250 " + host)
		case "STARTTLS":
			err = reply("502 5.5.1 STARTTLS not supported: the sidecar captures mail in plain text and never delivers it")
		case "AUTH":
			err = s.auth(arg, reply, readLine)
		case "MAIL":
			addr, ok := pathArg(arg, "FROM:")
			if !ok {
				err = reply("501 5.5.4 syntax: MAIL FROM:<address>")
				break
			}
			from, to, haveFrom = addr, nil, true
			err = reply("250 2.1.0 Ok")
		case "RCPT":
			addr, ok := pathArg(arg, "TO:")
			switch {
			case !haveFrom:
				err = reply("503 5.5.1 MAIL first")
			case !ok || addr == "":
				err = reply("501 5.5.4 syntax: RCPT TO:<address>")
			case len(to) >= maxRecipients:
				err = reply("452 4.5.3 too many recipients")
			default:
				to = append(to, addr)
				err = reply("250 2.1.5 Ok")
			}
		case "DATA":
			if len(to) == 0 {
				err = reply("503 5.5.1 RCPT first")
				break
			}
			if err = reply("354 End data with <CR><LF>.<CR><LF>"); err != nil {
				break
			}
			body, tooBig, derr := readData(r, c, idle)
			if derr != nil {
				return
			}
			if tooBig {
				err = reply(fmt.Sprintf("552 5.3.4 message larger than %d bytes", maxMessage))
			} else {
				m := s.store(peerAddr(c.RemoteAddr()), from, to, body)
				err = reply("250 2.0.0 Ok: captured as " + m.ID)
			}
			from, to, haveFrom = "", nil, false
		case "RSET":
			from, to, haveFrom = "", nil, false
			err = reply("250 2.0.0 Ok")
		case "NOOP":
			err = reply("250 2.0.0 Ok")
		case "VRFY":
			err = reply("252 2.5.0 Cannot verify, but will capture")
		case "QUIT":
			_ = reply("221 2.0.0 Bye")
			return
		default:
			err = reply("500 5.5.2 command not recognized")
		}
		if err != nil {
			return
		}
	}
}

var errLineTooLong = errors.New("line too long")

func (s *SMTPServer) auth(arg string, reply func(...string) error, readLine func() (string, error)) error {
	mech, initial, _ := strings.Cut(arg, " ")
	switch strings.ToUpper(mech) {
	case "PLAIN":
		if initial == "" {
			if err := reply("334 "); err != nil {
				return err
			}
			if _, err := readLine(); err != nil {
				return err
			}
		}
	case "LOGIN":
		steps := []string{"334 VXNlcm5hbWU6", "334 UGFzc3dvcmQ6"}
		if initial != "" {
			steps = steps[1:]
		}
		for _, p := range steps {
			if err := reply(p); err != nil {
				return err
			}
			if _, err := readLine(); err != nil {
				return err
			}
		}
	default:
		return reply("504 5.5.4 mechanism not supported: use PLAIN or LOGIN")
	}
	return reply("235 2.7.0 Authentication accepted (credentials discarded)")
}

// pathArg extracts the address from "FROM:<a@b> SIZE=10".
func pathArg(arg, prefix string) (string, bool) {
	if len(arg) < len(prefix) || !strings.EqualFold(arg[:len(prefix)], prefix) {
		return "", false
	}
	rest := strings.TrimSpace(arg[len(prefix):])
	if !strings.HasPrefix(rest, "<") {
		addr, _, _ := strings.Cut(rest, " ")
		return addr, addr != ""
	}
	end := strings.IndexByte(rest, '>')
	if end < 0 {
		return "", false
	}
	return rest[1:end], true
}

// readData reads the DATA section up to the lone dot, undoing dot-stuffing. A message larger
// than maxMessage is read to its end and discarded.
func readData(r *bufio.Reader, c net.Conn, idle time.Duration) ([]byte, bool, error) {
	var buf bytes.Buffer
	tooBig := false
	for {
		_ = c.SetReadDeadline(time.Now().Add(idle))
		line, err := r.ReadSlice('\n')
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return nil, false, err
		}
		if err == nil && (string(line) == ".\r\n" || string(line) == ".\n") {
			return buf.Bytes(), tooBig, nil
		}
		if err == nil && bytes.HasPrefix(line, []byte("..")) {
			line = line[1:]
		}
		if buf.Len()+len(line) > maxMessage {
			tooBig = true
			buf.Reset()
			continue
		}
		if !tooBig {
			buf.Write(line)
		}
	}
}

// peerAddr is a connection's remote address without its port ("" when it has none).
func peerAddr(a net.Addr) string {
	if a == nil {
		return ""
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return ""
	}
	return ap.Addr().Unmap().String()
}

func (s *SMTPServer) store(client, from string, to []string, data []byte) Message {
	m := Message{Kind: KindSMTP, Client: client, From: from, To: to}
	if msg, err := mail.ReadMessage(bytes.NewReader(data)); err == nil {
		dec := new(mime.WordDecoder)
		subject := msg.Header.Get("Subject")
		if d, err := dec.DecodeHeader(subject); err == nil {
			subject = d
		}
		m.Subject = subject
		m.Header = Redact(httpHeader(msg.Header))
		body, _ := io.ReadAll(io.LimitReader(msg.Body, int64(s.Store.MaxBody())+1))
		m.Body = string(body)
	} else {
		m.Body = string(data)
	}
	stored := s.Store.Add(m)
	if s.OnMessage != nil {
		s.OnMessage(stored)
	}
	return stored
}

func httpHeader(h mail.Header) map[string][]string {
	out := make(map[string][]string, len(h))
	for k, v := range h {
		out[k] = v
	}
	return out
}
