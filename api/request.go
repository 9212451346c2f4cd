package api

import (
	"bytes"
	"net/url"
	"strings"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/apperr"
	"tidings/internal/storable"
	"tidings/internal/strictjson"
)

// decodeJSON decodes a request body into dst, which must be a pointer to a
// struct. It is strict about syntax (malformed JSON names its line and
// column), types (wrong types name the field in details.fields) and names:
// a field the request type does not have is VALIDATION_ERROR naming the
// closest known one (ADDENDUM 3). Free-form objects (properties,
// variables, rule trees) are maps or raw JSON and take any key.
func decodeJSON(c *fiber.Ctx, dst any) error {
	body := c.Body()
	if len(bytes.TrimSpace(body)) == 0 {
		return apperr.Invalid("body", "must be a JSON object")
	}
	ct := strings.ToLower(c.Get(fiber.HeaderContentType))
	if ct != "" && !strings.Contains(ct, "json") {
		return apperr.Invalid("body", "must be sent as application/json")
	}
	return decodeBytes(body, dst)
}

// decodeBytes is strictjson.Decode: the same rules for every body.
func decodeBytes(body []byte, dst any) error { return strictjson.Decode(body, dst) }

// Opt is a JSON field that distinguishes absent, null and a value
// (strictjson.Opt).
type Opt[T any] = strictjson.Opt[T]

// pathParam returns a percent-decoded path parameter; "+" stays a plus
// (RFC 3986), unlike query-string decoding. Every handler reads its path
// parameters through it, so text PostgreSQL cannot hold (NUL, invalid
// UTF-8: /api/contacts/%00, /api/segments/%ff) is a VALIDATION_ERROR naming
// the parameter rather than a database error.
func pathParam(c *fiber.Ctx, name string) (string, error) {
	v, err := url.PathUnescape(c.Params(name))
	if err != nil {
		return "", apperr.Invalid(name, "is not a valid percent-encoded path segment")
	}
	if problem := storable.Text(v); problem != "" {
		return "", apperr.Invalid(name, problem)
	}
	return v, nil
}

// checkQuery refuses query parameters that PostgreSQL could not hold, for
// every route at once (filters such as ?name= reach SQL): each key and
// value must be valid UTF-8 without NUL. The error names the parameter.
func checkQuery(c *fiber.Ctx) error {
	if c.Request().URI().QueryArgs().Len() == 0 {
		return c.Next()
	}
	var err error
	c.Request().URI().QueryArgs().VisitAll(func(k, v []byte) {
		if err != nil {
			return
		}
		if problem := storable.Text(string(k)); problem != "" {
			err = apperr.Invalid("query", "parameter names "+problem)
		} else if problem := storable.Text(string(v)); problem != "" {
			err = apperr.Invalid(string(k), problem)
		}
	})
	if err != nil {
		return err
	}
	if err := unknownQuery(c); err != nil {
		return err
	}
	return c.Next()
}
