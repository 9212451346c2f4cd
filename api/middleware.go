package api

import (
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/apperr"
	"tidings/internal/auth"
	"tidings/internal/telemetry"
)

// Principal is who made a request: a tenant, through either an API key or
// a dashboard session.
type Principal struct {
	TenantID string
	Session  bool
	UserID   string // session only
	KeyID    string // API key only
}

const principalKey = "principal"

func principal(c *fiber.Ctx) *Principal {
	p, _ := c.Locals(principalKey).(*Principal)
	return p
}

func tenantID(c *fiber.Ctx) string { return principal(c).TenantID }

// credential names the credential of the request: the API key's id, or
// the session's subject (Idempotency-Keys are kept per credential).
func (p *Principal) credential() string {
	if p.Session {
		return "session:" + p.UserID
	}
	return "key:" + p.KeyID
}

// logRequests writes one structured line per request: method, path, route
// template, status, duration, request id, and the tenant and error code
// when there are some. The attributes are built as slog.Attr values in an
// array on the stack (no boxing into []any), only when the line will be
// written (not at LOG_LEVEL=warn), and the record goes straight to the
// handler: slog.Logger would also look up the caller's program counter,
// which no handler here uses.
func (s *Server) logRequests(c *fiber.Ctx) error {
	start := time.Now()
	err := c.Next()
	if err != nil {
		// Let the error handler write the response now so the status logged
		// is the status sent.
		if herr := s.errorHandler(c, err); herr != nil {
			s.log.Error("error handler failed", "err", herr)
		}
	}
	end := time.Now()
	took := end.Sub(start)
	route, status := routeLabel(c), c.Response().StatusCode()
	telemetry.ObserveHTTP(route, c.Method(), status, took)
	ctx := c.UserContext()
	if !s.log.Enabled(ctx, slog.LevelInfo) {
		return nil
	}
	var buf [9]slog.Attr
	attrs := append(buf[:0], slog.String("method", c.Method()), slog.String("path", c.Path()),
		slog.String("route", route), slog.Int("status", status),
		slog.Float64("duration_ms", float64(took.Microseconds())/1000), slog.String("request_id", requestID(c)))
	if p := principal(c); p != nil {
		attrs = append(attrs, slog.String("tenant_id", p.TenantID))
	}
	if code, ok := c.Locals(errorCodeKey).(string); ok {
		attrs = append(attrs, slog.String("code", code))
	}
	if fields, ok := c.Locals(errorFieldsKey).([]string); ok {
		attrs = append(attrs, slog.String("fields", strings.Join(fields, ",")))
	}
	r := slog.NewRecord(end, slog.LevelInfo, "request", 0)
	r.AddAttrs(attrs...)
	_ = s.log.Handler().Handle(ctx, r)
	return nil
}

// routeLabel is the route template that answered (`/api/contacts/:id`),
// or "unmatched" for a path no route has: never the raw path, whose
// values (ids, tokens) would make a series per request.
func routeLabel(c *fiber.Ctx) string {
	r := c.Route()
	if r == nil || r.Method == "USE" || r.Path == "/" || r.Path == "" {
		return "unmatched"
	}
	return r.Path
}

// authenticate resolves the bearer credential to a Principal. Failures are
// 401 and never touch any tenant's rate budget.
func (s *Server) authenticate(c *fiber.Ctx) error {
	h := c.Get(fiber.HeaderAuthorization)
	// The scheme name is case-insensitive (RFC 7235).
	scheme, tok, _ := strings.Cut(strings.TrimSpace(h), " ")
	tok = strings.TrimSpace(tok)
	if !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return apperr.Unauthorized("missing bearer credential")
	}
	if auth.IsSessionToken(tok) {
		sess, err := s.sessions.Verify(c.UserContext(), tok)
		if err != nil {
			return apperr.Unauthorized("invalid or expired session token")
		}
		c.Locals(principalKey, &Principal{TenantID: sess.OrgID, Session: true, UserID: sess.UserID})
		return c.Next()
	}
	if !auth.LooksLikeKey(tok) {
		return apperr.Unauthorized("invalid API key")
	}
	k, err := s.keys.Lookup(c.UserContext(), auth.HashKey(tok))
	if err != nil {
		if apperr.IsKind(err, apperr.KindNotFound) {
			return apperr.Unauthorized("invalid API key")
		}
		return err
	}
	if k.Revoked {
		return apperr.Unauthorized("API key has been revoked")
	}
	c.Locals(principalKey, &Principal{TenantID: k.TenantID, KeyID: k.ID})
	return c.Next()
}

var (
	headerLimit     = []byte("X-Ratelimit-Limit")
	headerRemaining = []byte("X-Ratelimit-Remaining")
)

// rateLimit spends one request of the tenant's shared budget.
func (s *Server) rateLimit(c *fiber.Ctx) error {
	res, err := s.limiter.Allow(c.UserContext(), tenantID(c))
	if err != nil {
		return err
	}
	// The names as fasthttp writes them anyway, so they need no
	// normalising, and the numbers formatted on the stack: this runs for
	// every request.
	h := &c.Response().Header
	var buf [20]byte
	h.SetCanonical(headerLimit, strconv.AppendInt(buf[:0], int64(res.Limit), 10))
	h.SetCanonical(headerRemaining, strconv.AppendInt(buf[:0], int64(res.Remaining), 10))
	if !res.Allowed {
		return apperr.RateLimited(res.RetryAfter)
	}
	return c.Next()
}

// requireTenant answers 404 for a session whose organisation has not been
// provisioned yet. API keys exist only inside a tenant, so they pass.
func (s *Server) requireTenant(c *fiber.Ctx) error {
	p := principal(c)
	if p.Session {
		ok, err := s.tenants.Exists(c.UserContext(), p.TenantID)
		if err != nil {
			return err
		}
		if !ok {
			return apperr.NotFound("NOT_FOUND", "tenant (provision it with POST /api/tenant)")
		}
	}
	return c.Next()
}

// sessionOnly is the route middleware of the operations an API key may not
// perform (provisioning the tenant, creating and revoking keys): they need
// a dashboard session.
func sessionOnly(c *fiber.Ctx) error {
	if !principal(c).Session {
		return apperr.Forbidden("this operation requires a dashboard session, not an API key")
	}
	return c.Next()
}
