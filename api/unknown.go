package api

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/apperr"
)

// Unknown body fields and query parameters are refused (ADDENDUM 3): a
// misspelled "enabeld" or "?since=" would otherwise be silently ignored and
// the request do something else than meant. The error names the closest
// known name when one is close enough to be a typo.

// queryParams are the query parameters each route reads, by "METHOD path"
// as in the route table; a route not listed reads none.
var queryParams = map[string][]string{
	"GET /api/contacts":                  {"cursor", "limit", "email"},
	"GET /api/contacts/:id/sends":        {"cursor", "limit", "status", "from", "to", "templateId", "sequenceId", "broadcastId", "inDoubt"},
	"GET /api/contacts/:id/scheduled":    {"limit"},
	"GET /api/contacts/:id/timeline":     {"cursor", "limit", "from", "to"},
	"GET /api/sends":                     {"cursor", "limit", "status", "from", "to", "contactId", "templateId", "sequenceId", "broadcastId", "inDoubt"},
	"GET /api/broadcasts":                {"cursor", "limit", "status"},
	"GET /api/webhooks":                  {"cursor", "limit"},
	"GET /api/topics":                    {"cursor", "limit"},
	"GET /api/suppressions":              {"cursor", "limit", "reason"},
	"GET /api/webhooks/:id/deliveries":   {"cursor", "limit", "status"},
	"GET /api/broadcasts/:id/recipients": {"cursor", "limit", "status"},
	"GET /api/events":                    {"cursor", "limit", "name"},
	"GET /api/events/contacts/:id":       {"cursor", "limit", "name"},
	"GET /api/sequences":                 {"cursor", "limit"},
	"GET /api/sequences/:id/contacts":    {"cursor", "limit"},
	"GET /api/sequences/:id/sends":       {"cursor", "limit"},
	"GET /api/scheduled":                 {"status", "contactId", "cancelReason", "limit"},
	"GET /api/scheduled/:id":             {"scheduledFor"},
	"GET /api/templates":                 {"cursor", "limit"},
	"GET /api/segments":                  {"cursor", "limit"},
	"GET /api/segments/:id/members":      {"cursor", "limit"},
	"GET /api/campaigns":                 {"cursor", "limit", "status"},
	"GET /api/domains":                   {"cursor", "limit"},
	"GET /api/metrics":                   {"period", "yearMonth", "date", "startDate", "endDate"},
	"GET /api/metrics/sequences":         {"cursor", "limit", "yearMonth"},
	"GET /api/metrics/sequences/:id":     {"yearMonth"},
	"GET /api/metrics/templates":         {"cursor", "limit", "yearMonth"},
	"GET /api/metrics/templates/:id":     {"yearMonth"},
}

// unknownQuery refuses a query parameter the route does not read.
func unknownQuery(c *fiber.Ctx) error {
	known := queryParams[c.Method()+" "+c.Route().Path]
	var err error
	c.Request().URI().QueryArgs().VisitAll(func(k, _ []byte) {
		if name := string(k); err == nil && !slices.Contains(known, name) {
			err = unknownName("query parameter", name, known)
		}
	})
	return err
}

// unknownName is the VALIDATION_ERROR of a field or query parameter the
// request may not carry, naming the closest known one.
func unknownName(what, name string, known []string) error {
	msg := "is not a known " + what
	if len(known) == 0 {
		msg += "; this route takes none"
	} else if near := closest(name, known); near != "" {
		msg += fmt.Sprintf("; did you mean %s?", near)
	}
	return apperr.Invalid(storableName(name), msg)
}

// storableName bounds a client's field name before it is echoed (a 1 MiB
// key must not make a 1 MiB answer).
func storableName(name string) string {
	if len(name) > 64 {
		return name[:64]
	}
	return name
}

// jsonFields lists the JSON names of a struct type's fields, and of the
// structs it holds (not of maps or raw JSON: those are free-form).
func jsonFields(t reflect.Type) []string {
	var out []string
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			out = append(out, name)
			walk(f.Type)
		}
	}
	walk(t)
	return out
}

// closest is the known name a misspelling most likely meant: the same
// but for case, or within a small edit distance; "" when none is close.
func closest(name string, known []string) string {
	best, bestD := "", 1<<30
	for _, k := range known {
		if strings.EqualFold(k, name) {
			return k
		}
		d := editDistance(strings.ToLower(name), strings.ToLower(k))
		if d < bestD {
			best, bestD = k, d
		}
	}
	if bestD <= max(1, min(len(name), len(best))/3) {
		return best
	}
	return ""
}

// editDistance is the optimal string alignment distance of a and b
// (Levenshtein plus the transposition of two neighbours, the commonest
// typo), on bytes: names are ASCII. Bounded by the 64-byte names passed.
func editDistance(a, b string) int {
	if len(a) > 64 {
		a = a[:64]
	}
	if len(b) > 64 {
		b = b[:64]
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
