// Package failure is af's catalogue of user-facing failures.
//
// Every failure af reports to a person or a program carries a code from this catalogue
// (AF-RUN-0xx for the engine and its runtimes, AF-GH-0xx for the GitHub side), a title, an exit
// code, what the failure means and what to do about it. The catalogue is one Go table
// (catalogue.go); docs/errors.md is generated from it.
//
// Errors are ordinary Go values: they wrap their causes, so errors.Is and errors.As see through
// them, and errors.Is(err, failure.ManifestInvalid) asks whether err carries that code.
package failure

import (
	"errors"
	"fmt"
	"strings"
)

// Code is a catalogue code such as "AF-RUN-043".
type Code string

// Entry is one catalogue entry. Entries are comparable sentinels: errors.Is(err, entry) is true
// when err, or anything it wraps, is an *Error carrying that entry's code.
type Entry struct {
	Code  Code
	Title string
	// Exit is the process exit status af uses when this failure ends a command.
	Exit int
	// Means says what the failure means for the user.
	Means string
	// Do says what to do about it.
	Do string
}

// Error makes an Entry usable as an errors.Is target.
func (e *Entry) Error() string { return string(e.Code) + ": " + e.Title }

// Error is a catalogued failure: what happened, the entry that explains it, and the cause.
type Error struct {
	Entry *Entry
	// Detail says what happened, in this instance: which file, which service, which route.
	Detail string
	// Hint is an optional instance-specific addition to the entry's "what to do".
	Hint string
	// Cause is the underlying error, if any.
	Cause error
	// Status, when not zero, replaces the entry's exit status (the gate's "no answer" is 4).
	Status int
}

// New returns a catalogued failure. detail says what happened; cause may be nil.
func New(entry *Entry, detail string, cause error) *Error {
	return &Error{Entry: entry, Detail: detail, Cause: cause}
}

// Newf is New with a formatted detail and no cause. A %w verb in format wraps its operand as
// the cause.
func Newf(entry *Entry, format string, args ...any) *Error {
	wrapped := fmt.Errorf(format, args...)
	return &Error{Entry: entry, Detail: wrapped.Error(), Cause: errors.Unwrap(wrapped)}
}

// WithHint returns e with an instance-specific hint added to what to do.
func (e *Error) WithHint(hint string) *Error {
	e.Hint = hint
	return e
}

// Error returns one line: code, title, what happened, and the cause when the detail does not
// already say it.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(string(e.Entry.Code))
	b.WriteString(": ")
	b.WriteString(e.Entry.Title)
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	if e.Cause != nil && !strings.Contains(e.Detail, e.Cause.Error()) {
		b.WriteString(": ")
		b.WriteString(e.Cause.Error())
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Cause }

// Is reports whether target is this error's catalogue entry.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Entry)
	return ok && t.Code == e.Entry.Code
}

// Exit returns the process exit status for this failure.
func (e *Error) Exit() int {
	if e.Status != 0 {
		return e.Status
	}
	return e.Entry.Exit
}

// As returns the outermost catalogued failure in err's chain, or nil.
func As(err error) *Error {
	var fe *Error
	if errors.As(err, &fe) {
		return fe
	}
	return nil
}

// CodeOf returns the code of the outermost catalogued failure in err's chain, or "".
func CodeOf(err error) Code {
	if fe := As(err); fe != nil {
		return fe.Entry.Code
	}
	return ""
}

// Ensure returns err as a catalogued failure: err itself when it already carries a code, else
// err wrapped in Internal. A nil err stays nil.
func Ensure(err error) *Error {
	if err == nil {
		return nil
	}
	if fe := As(err); fe != nil {
		return fe
	}
	return New(Internal, "", err)
}

// Lookup returns the catalogue entry for code.
func Lookup(code Code) (*Entry, bool) {
	for _, e := range Catalogue() {
		if e.Code == code {
			return e, true
		}
	}
	return nil, false
}
