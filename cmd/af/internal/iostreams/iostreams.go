// Package iostreams holds the input and output streams a command uses, and how it should
// write to them: colour or not, quiet or not, text or JSON. Commands never touch os.Stdout
// directly, so tests give them buffers.
package iostreams

import (
	"bytes"
	"io"
	"os"
	"sync"
)

// IOStreams is where a command reads and writes.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	outTTY bool
	color  bool
	quiet  bool
	json   bool

	errMu sync.Mutex // ErrLine's: lines from several goroutines never interleave or race
}

// System returns the process's streams. Colour is on when standard output is a terminal and
// NO_COLOR is unset or empty.
func System(getenv func(string) string) *IOStreams {
	tty := isTerminal(os.Stdout)
	return &IOStreams{
		In:     os.Stdin,
		Out:    os.Stdout,
		ErrOut: os.Stderr,
		outTTY: tty,
		color:  tty && getenv("NO_COLOR") == "",
	}
}

// Test returns streams backed by buffers: no input, no terminal, no colour.
func Test() (ios *IOStreams, in, out, errOut *bytes.Buffer) {
	in, out, errOut = &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: in, Out: out, ErrOut: errOut}, in, out, errOut
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// IsTerminal reports whether standard output is a terminal.
func (s *IOStreams) IsTerminal() bool { return s.outTTY }

// SetColor turns colour on or off.
func (s *IOStreams) SetColor(on bool) { s.color = on }

// ColorEnabled reports whether output may carry colour.
func (s *IOStreams) ColorEnabled() bool { return s.color && !s.json }

// SetQuiet turns informational output and progress off.
func (s *IOStreams) SetQuiet(on bool) { s.quiet = on }

// Quiet reports whether informational output and progress are off.
func (s *IOStreams) Quiet() bool { return s.quiet }

// SetJSON makes results machine-readable JSON on Out.
func (s *IOStreams) SetJSON(on bool) { s.json = on }

// JSON reports whether results are written as JSON.
func (s *IOStreams) JSON() bool { return s.json }

// Color wraps text in an ANSI colour when colour is enabled.
func (s *IOStreams) Color(code, text string) string {
	if !s.ColorEnabled() {
		return text
	}
	return "\x1b[" + code + "m" + text + "\x1b[0m"
}

// ErrLine writes line and a newline to ErrOut as one write, under a lock: a runtime reports
// progress from several goroutines at once (the sidecar's wait beside the probe), and ErrOut
// may be a plain buffer.
func (s *IOStreams) ErrLine(line string) {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	io.WriteString(s.ErrOut, line+"\n")
}

// Colour codes for Color.
const (
	Red    = "31"
	Green  = "32"
	Yellow = "33"
	Cyan   = "36"
)
