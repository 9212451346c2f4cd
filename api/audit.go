package api

import (
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/utils"

	"tidings/internal/apperr"
	"tidings/internal/audit"
	"tidings/internal/page"
	"tidings/internal/storable"
	"tidings/internal/store"
	"tidings/queries"
)

// act names a write route for the audit log (ADDENDUM 25): every POST,
// PUT, PATCH and DELETE of the route table has one (routes.post and the
// others take it), so a new write cannot be added without it.
type act struct {
	resourceType, verb string
	// param is the path parameter holding the resource's id. Without one
	// the resource is the tenant (onTenant) or the write makes it, and its
	// transaction names it (store.Tx.AuditResource).
	param  string
	tenant bool
	// nothing says the write changes nothing in the database (a preview,
	// a dry run), so no transaction of its can hold the entry: the request
	// writes it once the handler succeeded.
	nothing bool
}

// makes is a write that creates its resource.
func makes(resourceType, verb string) act { return act{resourceType: resourceType, verb: verb} }

// on is a write on the resource whose id is the path parameter param.
func on(resourceType, verb, param string) act {
	return act{resourceType: resourceType, verb: verb, param: param}
}

// onTenant is a write on the tenant itself.
func onTenant(verb string) act { return act{resourceType: "tenant", verb: verb, tenant: true} }

// changingNothing marks a write route that writes nothing to the database.
func (a act) changingNothing() act {
	a.nothing = true
	return a
}

func (a act) action() string { return a.resourceType + "." + a.verb }

// audited gives the request its audit entry (store.Audit) in its context:
// the write's transaction writes it there and then, and commits or rolls
// back with it. It runs after Idempotency-Key, so a replayed answer (no
// new write) records nothing, and before the handler.
//
// A write that succeeded with its entry unwritten ran no transaction that
// took it: one that writes nothing (changingNothing), or found nothing to
// change (a repeated PUT), has it written here, after. For any other route
// that is a gap (the entry is not atomic with the write) and is logged.
func (s *Server) audited(a act) fiber.Handler {
	if s.noAudit {
		return func(c *fiber.Ctx) error { return c.Next() }
	}
	return func(c *fiber.Ctx) error {
		p := principal(c)
		e := &store.Audit{TenantID: p.TenantID, ActorType: audit.ActorAPIKey, ActorID: p.KeyID,
			Action: a.action(), ResourceType: a.resourceType, RequestID: auditedRequestID(c), IP: c.IP()}
		if p.Session {
			e.ActorType, e.ActorID = audit.ActorSession, storableText(p.UserID)
		}
		switch {
		case a.param != "":
			id, err := pathParam(c, a.param)
			if err != nil {
				return err
			}
			e.ResourceID = id
		case a.tenant:
			e.ResourceID = p.TenantID
		}
		ctx := c.UserContext()
		c.SetUserContext(store.WithAudit(ctx, e))
		err := c.Next()
		c.SetUserContext(ctx)
		if err != nil || c.Response().StatusCode() >= fiber.StatusBadRequest || e.Written() {
			return err
		}
		if !a.nothing {
			s.log.Warn("audit entry written after its write, not in the write's transaction",
				"route", routeLabel(c), "method", c.Method(), "request_id", e.RequestID)
		}
		return s.audit.WriteAfter(ctx, e)
	}
}

type auditActorJSON struct {
	Type string `json:"type" doc:"session or apiKey"`
	ID   string `json:"id" doc:"the API key's keyId, or the session's subject"`
}

type auditEntryJSON struct {
	AuditID      string         `json:"auditId"`
	At           string         `json:"at"`
	Actor        auditActorJSON `json:"actor"`
	Action       string         `json:"action" doc:"<resourceType>.<verb>, e.g. contact.create"`
	ResourceType string         `json:"resourceType"`
	ResourceID   string         `json:"resourceId"`
	RequestID    string         `json:"requestId" doc:"the X-Request-Id the write was answered with"`
	IP           string         `json:"ip"`
}

func auditView(r queries.AuditLog) auditEntryJSON {
	return auditEntryJSON{AuditID: r.ID, At: formatTime(r.At), Actor: auditActorJSON{Type: r.ActorType, ID: r.ActorID},
		Action: r.Action, ResourceType: r.ResourceType, ResourceID: r.ResourceID, RequestID: r.RequestID, IP: r.Ip}
}

// auditList is GET /api/audit-log: the tenant's entries, newest first.
func (s *Server) auditList(c *fiber.Ctx) error {
	p, err := s.pages.Parse(c.Query("cursor"), c.Query("limit"), page.DefaultLimit, page.MaxLimit)
	if err != nil {
		return err
	}
	f := audit.Filter{ActorID: c.Query("actor"), Action: c.Query("action"), ResourceType: c.Query("resourceType")}
	if v := c.Query("since"); v != "" {
		if f.Since, err = parseTime(v); err != nil {
			return apperr.Invalid("since", "must be an ISO 8601 timestamp")
		}
	}
	if err := audit.CheckFilter(f); err != nil {
		return err
	}
	rows, next, err := s.audit.List(c.UserContext(), tenantID(c), f, p)
	if err != nil {
		return err
	}
	items := make([]auditEntryJSON, len(rows))
	for i, r := range rows {
		items[i] = auditView(r)
	}
	return c.JSON(list(items, s.pages.Next(next)))
}

// maxRequestIDLen bounds a client's X-Request-Id kept as it came.
const maxRequestIDLen = 128

// auditedRequestID is the request's X-Request-Id, which its entry records.
// A client's own id that PostgreSQL could not hold (invalid UTF-8, NUL) or
// longer than maxRequestIDLen is replaced by a fresh one, answered in its
// place, so the id answered is still the id recorded and the write does
// not fail on it.
func auditedRequestID(c *fiber.Ctx) string {
	rid := requestID(c)
	if rid != "" && len(rid) <= maxRequestIDLen && storable.Text(rid) == "" {
		return rid
	}
	rid = utils.UUIDv4()
	c.Locals("requestid", rid)
	c.Set(fiber.HeaderXRequestID, rid)
	return rid
}

// storableText makes text from outside (a session's subject) storable.
func storableText(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
}
