package api

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/apperr"
	"tidings/internal/delivery"
	"tidings/internal/store"
)

type errorBody struct {
	Error errorPayload `json:"error"`
}

type errorPayload struct {
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details"`
}

// statusOf is the one mapping from error kinds to HTTP status codes; a
// kind it lacks is a 500.
var statusOf = map[apperr.Kind]int{
	apperr.KindInvalid:       http.StatusBadRequest,
	apperr.KindUnauthorized:  http.StatusUnauthorized,
	apperr.KindPlanLimit:     http.StatusPaymentRequired,
	apperr.KindForbidden:     http.StatusForbidden,
	apperr.KindNotFound:      http.StatusNotFound,
	apperr.KindConflict:      http.StatusConflict,
	apperr.KindUnprocessable: http.StatusUnprocessableEntity,
	apperr.KindRateLimited:   http.StatusTooManyRequests,
	apperr.KindUpstream:      http.StatusBadGateway,
	apperr.KindUnavailable:   http.StatusServiceUnavailable,
	apperr.KindTooLarge:      http.StatusRequestEntityTooLarge,
}

// failure is an error as the client sees it.
type failure struct {
	status     int
	code, msg  string
	details    map[string]any
	retryAfter int
}

// Locals under which the error handler leaves the error code and the
// invalid fields for the request log.
const (
	errorCodeKey   = "error_code"
	errorFieldsKey = "error_fields"
)

// errorHandler is the one place where errors become HTTP: every failure,
// from handlers, middleware, the router (404/405) and fasthttp (413), leaves
// in the envelope of API.md section 7.
func (s *Server) errorHandler(c *fiber.Ctx, err error) error {
	f := s.failure(c, err)
	// Every /api answer carries the limit headers (ADDENDUM 2), also those
	// decided before the limiter ran (unknown route, wrong method, body too
	// large, failed authentication): such requests spend nothing, so the
	// whole budget is shown.
	if strings.HasPrefix(c.Path(), "/api") && len(c.Response().Header.Peek("X-RateLimit-Limit")) == 0 {
		c.Set("X-RateLimit-Limit", strconv.Itoa(s.limiter.Limit()))
		c.Set("X-RateLimit-Remaining", strconv.Itoa(s.limiter.Limit()))
	}
	if f.retryAfter > 0 {
		// Only Retry-After: the request budget's headers are the limiter's
		// (a segment compute's 429 leaves the budget as it is).
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(f.retryAfter))
	}
	// API.md: a 5xx carries no details, save the one ADDENDUM 12 pins: a
	// send in doubt names its record ({sendId, inDoubt}).
	if f.details == nil || (f.status >= 500 && !delivery.IsInDoubt(err)) {
		f.details = map[string]any{}
	}
	c.Locals(errorCodeKey, f.code)
	if fields, ok := f.details["fields"].(map[string]any); ok {
		c.Locals(errorFieldsKey, slices.Sorted(maps.Keys(fields)))
	}
	return c.Status(f.status).JSON(errorBody{Error: errorPayload{Code: f.code, Message: f.msg, Details: f.details}})
}

func (s *Server) failure(c *fiber.Ctx, err error) failure {
	if e, ok := apperr.As(err); ok && statusOf[e.Kind] != 0 {
		// An overload refusal has no cause: under overload a warning per
		// refused request would only add to the load.
		if e.Kind == apperr.KindUpstream || (e.Kind == apperr.KindUnavailable && e.Err != nil) {
			s.log.Warn("upstream failed", "code", e.Code, "err", e.Err, "method", c.Method(),
				logPath(c), "request_id", requestID(c))
		}
		if code := store.SQLState(err); code != "" && e.Kind == apperr.KindInvalid {
			// The database refused input that validation let through: the
			// client is told it is invalid, and the log says what to fix.
			s.log.Warn("database refused input", "sqlstate", code, "err", err, "method", c.Method(),
				logPath(c), "request_id", requestID(c))
		}
		return failure{status: statusOf[e.Kind], code: e.Code, msg: e.Message, details: e.Details, retryAfter: e.RetryAfter}
	}
	var fe *fiber.Error
	if errors.As(err, &fe) {
		switch fe.Code {
		case http.StatusNotFound:
			return failure{status: fe.Code, code: "NOT_FOUND", msg: fmt.Sprintf("no route for %s %s", c.Method(), c.Path())}
		case http.StatusMethodNotAllowed:
			return failure{status: fe.Code, code: "METHOD_NOT_ALLOWED",
				msg: fmt.Sprintf("method %s is not allowed on %s", c.Method(), c.Path())}
		case http.StatusRequestEntityTooLarge:
			return failure{status: fe.Code, code: "PAYLOAD_TOO_LARGE", msg: fmt.Sprintf("request body exceeds %d bytes", bodyLimit)}
		case http.StatusBadRequest, http.StatusUnprocessableEntity:
			return s.failure(c, apperr.InvalidRequest("invalid request: %s", fe.Message))
		case http.StatusRequestHeaderFieldsTooLarge, http.StatusRequestTimeout:
			return failure{status: fe.Code, code: http.StatusText(fe.Code), msg: fe.Message}
		}
		if fe.Code < 500 {
			return failure{status: fe.Code, code: "ERROR", msg: fe.Message}
		}
	}
	s.log.Error("request failed", "err", err, "sqlstate", store.SQLState(err), "method", c.Method(),
		logPath(c), "request_id", requestID(c))
	e := apperr.Internal()
	return failure{status: http.StatusInternalServerError, code: e.Code, msg: e.Message}
}

func requestID(c *fiber.Ctx) string {
	id, _ := c.Locals("requestid").(string)
	return id
}

// logPath is the path attribute of a log line about a request: loggedPath,
// the token's hash in it under /t/ (never the token).
func logPath(c *fiber.Ctx) slog.Attr {
	path, hash := loggedPath(c)
	if hash != "" {
		path += " token_hash=" + hash
	}
	return slog.String("path", path)
}

// logPanic is the recover middleware's stack trace hook.
func logPanic(log *slog.Logger) func(*fiber.Ctx, any) {
	return func(c *fiber.Ctx, e any) {
		log.Error("panic", "panic", e, "method", c.Method(), logPath(c), "request_id", requestID(c))
	}
}
