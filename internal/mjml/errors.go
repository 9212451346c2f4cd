package mjml

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrClosed is returned by Compile after Close.
	ErrClosed = errors.New("mjml: pool closed")

	// ErrWorkerExited is wrapped by the error of a compile whose node process
	// died before answering. Compiling is pure, so the caller may retry.
	ErrWorkerExited = errors.New("mjml: worker process exited")

	// ErrTimeout is wrapped by the error of a compile that took longer than
	// Options.Timeout, or that found no free worker within it.
	ErrTimeout = errors.New("mjml: timed out")
)

// Message is one problem MJML found in a template, in MJML's own words.
type Message struct {
	// Line is the 1-based line of the source MJML reports, 0 when it names none
	// (e.g. for a document without an <mjml> root).
	Line int `json:"line"`
	// Message is MJML's text, e.g. "Attribute foo is illegal".
	Message string `json:"message"`
	// TagName is the element the message is about, when MJML names one.
	TagName string `json:"tagName"`
}

// String formats m the way MJML's CLI does, without the file name.
func (m Message) String() string {
	var b strings.Builder
	if m.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", m.Line)
	}
	if m.TagName != "" {
		fmt.Fprintf(&b, "%s: ", m.TagName)
	}
	b.WriteString(m.Message)
	return b.String()
}

// ValidationError is returned by Compile when MJML rejects the source.
type ValidationError struct {
	Messages []Message
}

// Error joins the messages.
func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Messages))
	for i, m := range e.Messages {
		parts[i] = m.String()
	}
	return "mjml: invalid MJML: " + strings.Join(parts, "; ")
}
