// Package apperr is the one error type of Tidings. Domain and store code
// return *Error values: a Kind that says what went wrong (not found,
// invalid, conflict...) and a code from API.md section 7 that clients read.
// Nothing here knows about HTTP: api/errors.go alone turns a kind into a
// status code and the error into the envelope.
package apperr

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Kind classifies an error by what the caller can do about it.
type Kind int

// The kinds. The zero value is Internal, so an Error built without a kind
// is never mistaken for the client's fault.
const (
	KindInternal      Kind = iota // a fault of the service; details are hidden
	KindInvalid                   // the request is malformed or breaks a rule
	KindUnauthorized              // no valid credential
	KindForbidden                 // the credential may not do this
	KindNotFound                  // the thing named does not exist in the tenant
	KindConflict                  // the request clashes with the current state
	KindPlanLimit                 // the tenant's plan allows no more
	KindUnprocessable             // well-formed, but its meaning cannot be applied (a cycle)
	KindRateLimited               // too many requests; RetryAfter says when to come back
	KindUpstream                  // a service we depend on (the email provider) failed
	KindUnavailable               // a service we depend on could not be reached at all; try again later
	KindTooLarge                  // the request is larger than the service takes (a body, an import)
)

var kindNames = [...]string{"internal", "invalid", "unauthorized", "forbidden", "not found",
	"conflict", "plan limit", "unprocessable", "rate limited", "upstream", "unavailable", "too large"}

func (k Kind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return fmt.Sprintf("kind(%d)", int(k))
	}
	return kindNames[k]
}

// Error is a failure that a client may see.
type Error struct {
	Kind    Kind
	Code    string
	Message string
	Details map[string]any
	// RetryAfter is set on RATE_LIMITED and Overloaded errors (whole
	// seconds, at least 1): the Retry-After header.
	RetryAfter int
	// Err is the cause, when the error translates a lower-level one (a
	// driver error at the store boundary); errors.Is and As see it.
	Err error
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// newError builds an error of kind k.
func newError(k Kind, code, format string, args ...any) *Error {
	return &Error{Kind: k, Code: code, Message: fmt.Sprintf(format, args...)}
}

// As extracts an *Error from err.
func As(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// IsCode reports whether err is an *Error with the given code.
func IsCode(err error, code string) bool {
	e, ok := As(err)
	return ok && e.Code == code
}

// KindOf is err's kind; an error that is not an *Error is KindInternal.
func KindOf(err error) Kind {
	if e, ok := As(err); ok {
		return e.Kind
	}
	return KindInternal
}

// IsKind reports whether err is an *Error of kind k.
func IsKind(err error, k Kind) bool {
	e, ok := As(err)
	return ok && e.Kind == k
}

// Specific replaces an error of kind k (typically the store's generic
// NotFound or Conflict) by the caller's specific one, such as
// CONTACT_NOT_FOUND, keeping the original as its cause. Other errors,
// and nil, pass unchanged.
func Specific(err error, k Kind, specific *Error) error {
	if err == nil || !IsKind(err, k) {
		return err
	}
	out := *specific
	out.Err = err
	return &out
}

// Fields collects per-field validation messages; the zero value is ready.
// Messages complete a sentence that starts with the field's name ("email"
// + "must be a valid email address"), so every validation error reads the
// same way.
type Fields map[string][]string

// Add records a message for field.
func (f *Fields) Add(field, msg string) {
	if *f == nil {
		*f = Fields{}
	}
	(*f)[field] = append((*f)[field], msg)
}

// Check records msg for field unless ok holds.
func (f *Fields) Check(ok bool, field, msg string) {
	if !ok {
		f.Add(field, msg)
	}
}

// Err returns a VALIDATION_ERROR carrying the fields, or nil when empty.
func (f Fields) Err() error {
	if len(f) == 0 {
		return nil
	}
	return Validation(f)
}

// Merge copies the fields of a VALIDATION_ERROR into f; any other error,
// and nil, adds nothing.
func (f *Fields) Merge(err error) {
	e, ok := As(err)
	if !ok {
		return
	}
	fields, _ := e.Details["fields"].(map[string]any)
	for k, v := range fields {
		msgs, _ := v.([]string)
		for _, m := range msgs {
			f.Add(k, m)
		}
	}
}

// Names returns the fields' names, sorted.
func (f Fields) Names() []string {
	names := make([]string, 0, len(f))
	for k := range f {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// Bounds of a VALIDATION_ERROR's details, so that a body full of mistakes
// gets a short answer: the first MaxFields fields by name, each with at
// most MaxMessages messages; details.omittedFields counts the rest.
const (
	MaxFields   = 20
	MaxMessages = 5
)

// Validation builds a VALIDATION_ERROR with details.fields; its message
// names the first field so that a human reading only the message learns
// what to fix. Past MaxFields fields the rest are counted in
// details.omittedFields and the message says so.
func Validation(f Fields) *Error {
	msg := "invalid request"
	names := f.Names()
	if len(names) > 0 {
		msg = fmt.Sprintf("invalid request: %s %s", names[0], f[names[0]][0])
	}
	details := map[string]any{}
	if len(names) > MaxFields {
		details["omittedFields"] = len(names) - MaxFields
		msg += fmt.Sprintf(" (%d fields are invalid; details list the first %d)", len(names), MaxFields)
		names = names[:MaxFields]
	}
	fields := make(map[string]any, len(names))
	for _, k := range names {
		fields[k] = f[k][:min(len(f[k]), MaxMessages)]
	}
	details["fields"] = fields
	return &Error{Kind: KindInvalid, Code: "VALIDATION_ERROR", Message: msg, Details: details}
}

// Invalid is a VALIDATION_ERROR about one field.
func Invalid(field, msg string) *Error {
	var f Fields
	f.Add(field, msg)
	return Validation(f)
}

// AtLeastOne is the VALIDATION_ERROR of an update that sets nothing: the
// body must carry at least one of the names.
func AtLeastOne(names ...string) *Error {
	return Invalid("body", "must contain at least one of "+strings.Join(names, ", "))
}

// InvalidRequest is a VALIDATION_ERROR that is not about one field.
func InvalidRequest(format string, args ...any) *Error {
	return newError(KindInvalid, "VALIDATION_ERROR", format, args...)
}

// NotFound builds a not-found error with a specific code such as
// CONTACT_NOT_FOUND.
func NotFound(code, what string) *Error {
	return newError(KindNotFound, code, "%s not found", what)
}

// Unauthorized is the error for a missing, invalid or revoked credential.
func Unauthorized(msg string) *Error {
	return newError(KindUnauthorized, "UNAUTHORIZED", "%s", msg)
}

// Forbidden is the error for operations the credential may not perform.
func Forbidden(msg string) *Error { return newError(KindForbidden, "FORBIDDEN", "%s", msg) }

// Conflict builds a conflict with the given code.
func Conflict(code, msg string) *Error { return newError(KindConflict, code, "%s", msg) }

// Unprocessable builds an error for a well-formed request whose meaning
// cannot be applied, such as a segment cycle.
func Unprocessable(code, msg string) *Error { return newError(KindUnprocessable, code, "%s", msg) }

// PlanLimit is raised when a plan's count limit is reached.
func PlanLimit(what string, limit int) *Error {
	return newError(KindPlanLimit, "PLAN_LIMIT_EXCEEDED", "plan limit reached: at most %d %s", limit, what)
}

// TooLarge is PAYLOAD_TOO_LARGE: the request is larger than the service
// takes; msg says which bound it passed.
func TooLarge(msg string) *Error { return newError(KindTooLarge, "PAYLOAD_TOO_LARGE", "%s", msg) }

// RateLimited says how many seconds to wait.
func RateLimited(retryAfter int) *Error {
	if retryAfter < 1 {
		retryAfter = 1
	}
	e := newError(KindRateLimited, "RATE_LIMITED", "too many requests: retry after %d seconds", retryAfter)
	e.RetryAfter = retryAfter
	return e
}

// Internal hides a fault from clients; the HTTP layer logs the cause.
func Internal() *Error {
	return newError(KindInternal, "INTERNAL_ERROR", "internal server error")
}

// Upstream is the failure of a service we depend on, such as the email
// provider refusing or not answering (ADDENDUM section 8: 502
// PROVIDER_ERROR). The message may name the provider's reason; the cause
// stays in Err for the log.
func Upstream(code, msg string, cause error) *Error {
	e := newError(KindUpstream, code, "%s", msg)
	e.Err = cause
	return e
}

// Unavailable is a dependency that could not be reached at all, so the
// request learnt nothing and changed nothing (the DNS resolver of a domain
// check): the client may simply try again later. The cause stays in Err for
// the log.
func Unavailable(code, msg string, cause error) *Error {
	e := newError(KindUnavailable, code, "%s", msg)
	e.Err = cause
	return e
}

// Overloaded is a request refused unprocessed because too much work waits
// already (the events' ingest queue is full): nothing changed, and the
// client may try again after retryAfter seconds. KindUnavailable (503),
// with Retry-After; it has no cause to log (the request log has it).
func Overloaded(code, msg string, retryAfter int) *Error {
	e := newError(KindUnavailable, code, "%s", msg)
	e.RetryAfter = max(retryAfter, 1)
	return e
}
