package api

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/apperr"
	"tidings/internal/storable"
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

func decodeBytes(body []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err, body, dst)
	}
	if _, err := dec.Token(); err != io.EOF {
		return apperr.Invalid("body", "must contain a single JSON object")
	}
	// Text that PostgreSQL cannot hold is refused here, naming the field,
	// before Go's decoder has replaced it with U+FFFD or it reaches the
	// database as raw JSON (properties are stored as sent).
	if path, problem, ok := storable.JSON(body); !ok {
		return apperr.Invalid(cmp.Or(path, "body"), problem)
	}
	return nil
}

func jsonError(err error, body []byte, dst any) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return apperr.Invalid("body", "must be a JSON object")
		}
		return apperr.Invalid(te.Field, "must be "+jsonTypeName(te.Type.Kind().String()))
	}
	// encoding/json says `json: unknown field "name"` and has no type for it.
	if name, ok := strings.CutPrefix(err.Error(), `json: unknown field "`); ok {
		name = strings.TrimSuffix(name, `"`)
		return unknownName("field", name, jsonFields(reflect.TypeOf(dst)))
	}
	offset := int64(len(body))
	var se *json.SyntaxError
	msg := "the body ends before the JSON does"
	if errors.As(err, &se) {
		offset, msg = se.Offset, strings.TrimPrefix(se.Error(), "json: ")
		// The offset is past the byte that broke the syntax.
		offset = max(offset-1, 0)
	}
	line, col := position(body, offset)
	return apperr.Invalid("body", fmt.Sprintf("is not valid JSON: %s (line %d, column %d)", msg, line, col))
}

// position is the 1-based line and column (in characters) of byte offset
// off of body.
func position(body []byte, off int64) (line, col int) {
	if off > int64(len(body)) {
		off = int64(len(body))
	}
	before := body[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	lineStart := bytes.LastIndexByte(before, '\n') + 1
	return line, utf8.RuneCount(before[lineStart:]) + 1
}

func jsonTypeName(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "int", "int32", "int64", "uint", "uint32", "uint64", "float32", "float64":
		return "a number"
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	}
	return "of another type"
}

// Opt is a JSON field that distinguishes absent, null and a value, as PATCH
// semantics need.
type Opt[T any] struct {
	Set  bool
	Null bool
	V    T
}

// UnmarshalJSON records presence; null is kept apart from a value.
func (o *Opt[T]) UnmarshalJSON(b []byte) error {
	o.Set = true
	if string(b) == "null" {
		o.Null = true
		return nil
	}
	return json.Unmarshal(b, &o.V)
}

// Value returns the value when one was given (not null).
func (o Opt[T]) Value() (T, bool) { return o.V, o.Set && !o.Null }

// Ptr is the value as a nullable query argument: nil when absent or null.
func (o Opt[T]) Ptr() *T {
	if v, ok := o.Value(); ok {
		return &v
	}
	return nil
}

// Sent is the value when the field was sent, null as the zero value: for
// fields the domain validates, so that a null is judged like an empty value.
func (o Opt[T]) Sent() *T {
	if !o.Set {
		return nil
	}
	v := o.V
	return &v
}

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
