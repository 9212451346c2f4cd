package api

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net/netip"
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
	var buf [10]slog.Attr
	path, tokenHash := loggedPath(c)
	attrs := append(buf[:0], slog.String("method", c.Method()), slog.String("path", path),
		slog.String("route", route), slog.Int("status", status),
		slog.Float64("duration_ms", float64(took.Microseconds())/1000), slog.String("request_id", requestID(c)))
	if tokenHash != "" {
		attrs = append(attrs, slog.String("token_hash", tokenHash))
	}
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

// trackingPrefix starts the paths whose last segment is a capability
// (api/tracking.go): an unsubscribe token works for good, a click token
// carries its destination.
const trackingPrefix = "/t/"

// loggedPath is the path as every log line shows it: the path itself, but
// under /t/ the route template (or "unmatched") and, apart, a short hash of
// the token, which ties the lines of one token together without being it.
func loggedPath(c *fiber.Ctx) (path, tokenHash string) {
	path = c.Path()
	if !strings.HasPrefix(path, trackingPrefix) {
		return path, ""
	}
	// /t/<kind>/<token>: the token is what follows the kind, whole.
	rest := path[len(trackingPrefix):]
	if _, tok, ok := strings.Cut(rest, "/"); ok {
		rest = tok
	}
	sum := sha256.Sum256([]byte(rest))
	return routeLabel(c), hex.EncodeToString(sum[:6])
}

// authenticate resolves the bearer credential to a Principal. Failures are
// 401 and never touch any tenant's rate budget; they spend the client
// address's budget of unauthenticated requests instead (unauthenticated).
func (s *Server) authenticate(c *fiber.Ctx) error {
	p, err := s.principalOf(c)
	if err != nil {
		if apperr.IsKind(err, apperr.KindUnauthorized) {
			return s.unauthenticated(c, err)
		}
		return err
	}
	c.Locals(principalKey, p)
	return c.Next()
}

func (s *Server) principalOf(c *fiber.Ctx) (*Principal, error) {
	h := c.Get(fiber.HeaderAuthorization)
	// The scheme name is case-insensitive (RFC 7235).
	scheme, tok, _ := strings.Cut(strings.TrimSpace(h), " ")
	tok = strings.TrimSpace(tok)
	if !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return nil, apperr.Unauthorized("missing bearer credential")
	}
	if auth.IsSessionToken(tok) {
		sess, err := s.sessions.Verify(c.UserContext(), tok)
		if err != nil {
			return nil, apperr.Unauthorized("invalid or expired session token")
		}
		return &Principal{TenantID: sess.OrgID, Session: true, UserID: sess.UserID}, nil
	}
	if !auth.LooksLikeKey(tok) {
		return nil, apperr.Unauthorized("invalid API key")
	}
	k, err := s.keys.Lookup(c.UserContext(), auth.HashKey(tok))
	if err != nil {
		if apperr.IsKind(err, apperr.KindNotFound) {
			return nil, apperr.Unauthorized("invalid API key")
		}
		return nil, err
	}
	if k.Revoked {
		return nil, apperr.Unauthorized("API key has been revoked")
	}
	return &Principal{TenantID: k.TenantID, KeyID: k.ID}, nil
}

// unauthenticated answers a request under /api without a valid credential:
// refusal (401), or 429 once the client address has spent its budget of
// such requests (UNAUTH_RATE_LIMIT_PER_MINUTE, ADDENDUM 25), which bounds
// what guessing credentials from one address can cost. Should Redis fail,
// the request is refused all the same, with its 401.
func (s *Server) unauthenticated(c *fiber.Ctx, refusal error) error {
	if s.unauthLimiter == nil {
		return refusal
	}
	res, err := s.unauthLimiter.Allow(c.UserContext(), clientKey(c.IP()))
	if err != nil || res.Allowed {
		return refusal
	}
	h := &c.Response().Header
	var buf [20]byte
	h.SetCanonical(headerLimit, strconv.AppendInt(buf[:0], int64(res.Limit), 10))
	h.SetCanonical(headerRemaining, []byte("0"))
	return apperr.RateLimited(res.RetryAfter)
}

// clientKey is the client address as the unauthenticated budget counts
// it: an IPv4 address, or an IPv6 address's /64 (a host is commonly given
// a whole /64 and could rotate through it).
func clientKey(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return strings.Clone(ip)
	}
	a = a.Unmap()
	if a.Is4() {
		return a.String()
	}
	p, _ := a.Prefix(64)
	return p.String()
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
