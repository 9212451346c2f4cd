// Package apperr is the one error type of Tidings. Domain and store code
// return *Error values with a code from API.md section 7; only the HTTP
// layer turns them into status codes and the error envelope.
package apperr

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
)

// Error is a failure that a client may see.
type Error struct {
	Status  int
	Code    string
	Message string
	Details map[string]any
	// RetryAfter is set on RATE_LIMITED errors (whole seconds, at least 1).
	RetryAfter int
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// New builds an error with the given status, code and message.
func New(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
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

// Fields collects per-field validation messages; the zero value is ready.
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

// Validation builds a VALIDATION_ERROR with details.fields; its message
// names the first field so that a human reading only the message learns
// what to fix.
func Validation(f Fields) *Error {
	names := make([]string, 0, len(f))
	for k := range f {
		names = append(names, k)
	}
	sort.Strings(names)
	msg := "invalid request"
	if len(names) > 0 {
		msg = fmt.Sprintf("invalid request: %s %s", names[0], f[names[0]][0])
	}
	fields := make(map[string]any, len(f))
	for k, v := range f {
		fields[k] = v
	}
	return &Error{Status: http.StatusBadRequest, Code: "VALIDATION_ERROR", Message: msg,
		Details: map[string]any{"fields": fields}}
}

// Invalid is a VALIDATION_ERROR about one field.
func Invalid(field, msg string) *Error {
	var f Fields
	f.Add(field, msg)
	return Validation(f)
}

// InvalidRequest is a VALIDATION_ERROR that is not about one field.
func InvalidRequest(format string, args ...any) *Error {
	return New(http.StatusBadRequest, "VALIDATION_ERROR", format, args...)
}

// NotFound builds a 404 with a specific code such as CONTACT_NOT_FOUND.
func NotFound(code, what string) *Error {
	return New(http.StatusNotFound, code, "%s not found", what)
}

// Unauthorized is the 401 for a missing, invalid or revoked credential.
func Unauthorized(msg string) *Error {
	return New(http.StatusUnauthorized, "UNAUTHORIZED", "%s", msg)
}

// Forbidden is the 403 for operations the credential may not perform.
func Forbidden(msg string) *Error { return New(http.StatusForbidden, "FORBIDDEN", "%s", msg) }

// Conflict builds a 409 with the given code.
func Conflict(code, msg string) *Error { return New(http.StatusConflict, code, "%s", msg) }

// PlanLimit is the 402 raised when a plan's count limit is reached.
func PlanLimit(what string, limit int) *Error {
	return New(http.StatusPaymentRequired, "PLAN_LIMIT_EXCEEDED",
		"plan limit reached: at most %d %s", limit, what)
}

// RateLimited is the 429 with the seconds to wait.
func RateLimited(retryAfter int) *Error {
	if retryAfter < 1 {
		retryAfter = 1
	}
	e := New(http.StatusTooManyRequests, "RATE_LIMITED",
		"too many requests: retry after %d seconds", retryAfter)
	e.RetryAfter = retryAfter
	return e
}

// Internal hides err from clients; the HTTP layer logs it.
func Internal() *Error {
	return New(http.StatusInternalServerError, "INTERNAL_ERROR", "internal server error")
}

// Unprocessable builds a 422 with the given code.
func Unprocessable(code, msg string) *Error {
	return New(http.StatusUnprocessableEntity, code, "%s", msg)
}
