package api

import (
	"slices"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/strictjson"
)

// Unknown body fields and query parameters are refused (ADDENDUM 3): a
// misspelled "enabeld" or "?since=" would otherwise be silently ignored and
// the request do something else than meant. The error names the closest
// known name when one is close enough to be a typo.

// queryParams are the query parameters each route reads, by "METHOD path"
// as in the route table; a route not listed reads none.
var queryParams = map[string][]string{
	"GET /api/contacts":                   {"cursor", "limit", "email"},
	"GET /api/contacts/:id/sends":         {"cursor", "limit", "status", "from", "to", "templateId", "sequenceId", "broadcastId", "inDoubt"},
	"GET /api/contacts/:id/scheduled":     {"limit"},
	"GET /api/contacts/import/:id/errors": {"format"},
	"GET /api/contacts/:id/timeline":      {"cursor", "limit", "from", "to"},
	"GET /api/sends":                      {"cursor", "limit", "status", "from", "to", "contactId", "templateId", "sequenceId", "broadcastId", "inDoubt"},
	"GET /api/broadcasts":                 {"cursor", "limit", "status"},
	"GET /api/webhooks":                   {"cursor", "limit"},
	"GET /api/topics":                     {"cursor", "limit"},
	"GET /api/suppressions":               {"cursor", "limit", "reason"},
	"GET /api/audit-log":                  {"cursor", "limit", "actor", "action", "resourceType", "since"},
	"GET /api/webhooks/:id/deliveries":    {"cursor", "limit", "status"},
	"GET /api/broadcasts/:id/recipients":  {"cursor", "limit", "status"},
	"GET /api/events":                     {"cursor", "limit", "name"},
	"GET /api/events/contacts/:id":        {"cursor", "limit", "name"},
	"GET /api/sequences":                  {"cursor", "limit"},
	"GET /api/sequences/:id/contacts":     {"cursor", "limit"},
	"GET /api/sequences/:id/sends":        {"cursor", "limit"},
	"GET /api/scheduled":                  {"status", "contactId", "cancelReason", "limit"},
	"GET /api/scheduled/:id":              {"scheduledFor"},
	"GET /api/templates":                  {"cursor", "limit"},
	"GET /api/partials":                   {"cursor", "limit"},
	"GET /api/segments":                   {"cursor", "limit"},
	"GET /api/segments/:id/members":       {"cursor", "limit"},
	"GET /api/segments/:id/explain":       {"contactId"},
	"GET /api/campaigns":                  {"cursor", "limit", "status"},
	"GET /api/domains":                    {"cursor", "limit"},
	"GET /api/metrics":                    {"period", "yearMonth", "date", "startDate", "endDate"},
	"GET /api/metrics/sequences":          {"cursor", "limit", "yearMonth"},
	"GET /api/metrics/sequences/:id":      {"yearMonth"},
	"GET /api/metrics/templates":          {"cursor", "limit", "yearMonth"},
	"GET /api/metrics/templates/:id":      {"yearMonth"},
}

// unknownQuery refuses a query parameter the route does not read.
func unknownQuery(c *fiber.Ctx) error {
	known := queryParams[c.Method()+" "+c.Route().Path]
	var err error
	c.Request().URI().QueryArgs().VisitAll(func(k, _ []byte) {
		if name := string(k); err == nil && !slices.Contains(known, name) {
			err = strictjson.UnknownName("query parameter", name, known)
		}
	})
	return err
}
