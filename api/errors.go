package api

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/apperr"
)

type errorBody struct {
	Error errorPayload `json:"error"`
}

type errorPayload struct {
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details"`
}

// errorHandler is the one place where errors become HTTP: every failure,
// from handlers, middleware, the router (404/405) and fasthttp (413), leaves
// in the envelope of API.md section 7.
func (s *Server) errorHandler(c *fiber.Ctx, err error) error {
	e := s.toAppError(c, err)
	// Every /api answer carries the limit headers (ADDENDUM 2), also those
	// decided before the limiter ran (unknown route, wrong method, body too
	// large, failed authentication): such requests spend nothing, so the
	// whole budget is shown.
	if strings.HasPrefix(c.Path(), "/api") && len(c.Response().Header.Peek("X-RateLimit-Limit")) == 0 {
		c.Set("X-RateLimit-Limit", strconv.Itoa(s.limiter.Limit()))
		c.Set("X-RateLimit-Remaining", strconv.Itoa(s.limiter.Limit()))
	}
	if e.RetryAfter > 0 {
		// Only Retry-After: the request budget's headers are the limiter's
		// (a segment compute's 429 leaves the budget as it is).
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(e.RetryAfter))
	}
	details := e.Details
	if details == nil || e.Status >= 500 {
		details = map[string]any{}
	}
	return c.Status(e.Status).JSON(errorBody{Error: errorPayload{Code: e.Code, Message: e.Message, Details: details}})
}

func (s *Server) toAppError(c *fiber.Ctx, err error) *apperr.Error {
	if e, ok := apperr.As(err); ok {
		return e
	}
	var fe *fiber.Error
	if errors.As(err, &fe) {
		switch fe.Code {
		case http.StatusNotFound:
			return apperr.New(fe.Code, "NOT_FOUND", "no route for %s %s", c.Method(), c.Path())
		case http.StatusMethodNotAllowed:
			return apperr.New(fe.Code, "METHOD_NOT_ALLOWED", "method %s is not allowed on %s", c.Method(), c.Path())
		case http.StatusRequestEntityTooLarge:
			return apperr.New(fe.Code, "PAYLOAD_TOO_LARGE", "request body exceeds %d bytes", bodyLimit)
		case http.StatusBadRequest, http.StatusUnprocessableEntity:
			return apperr.InvalidRequest("invalid request: %s", fe.Message)
		case http.StatusRequestHeaderFieldsTooLarge, http.StatusRequestTimeout:
			return apperr.New(fe.Code, http.StatusText(fe.Code), "%s", fe.Message)
		}
		if fe.Code < 500 {
			return apperr.New(fe.Code, "ERROR", "%s", fe.Message)
		}
	}
	s.log.Error("request failed", "err", err, "method", c.Method(), "path", c.Path(),
		"request_id", requestID(c))
	return apperr.Internal()
}

func requestID(c *fiber.Ctx) string {
	id, _ := c.Locals("requestid").(string)
	return id
}

// logPanic is the recover middleware's stack trace hook.
func logPanic(log *slog.Logger) func(*fiber.Ctx, any) {
	return func(c *fiber.Ctx, e any) {
		log.Error("panic", "panic", e, "method", c.Method(), "path", c.Path(), "request_id", requestID(c))
	}
}
