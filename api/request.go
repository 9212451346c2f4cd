package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/apperr"
)

// decodeJSON decodes a request body into dst, which must be a pointer to a
// struct. It is strict about syntax and types (wrong types name the field in
// details.fields) and tolerant of fields it does not know, so clients may
// send more than a handler reads.
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
	if err := dec.Decode(dst); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return apperr.Invalid("body", "must contain a single JSON object")
	}
	if bytes.Contains(body, []byte(`\u0000`)) {
		return nulError(body)
	}
	return nil
}

// nulError names the field holding a NUL character: PostgreSQL stores none
// in text or jsonb, so it is bad input, not a server error.
func nulError(body []byte) error {
	var v any
	_ = json.Unmarshal(body, &v)
	path := nulPath("", v)
	if path == "" {
		path = "body"
	}
	return apperr.Invalid(path, "must not contain NUL characters")
}

func nulPath(at string, v any) string {
	join := func(k string) string {
		if at == "" {
			return k
		}
		return at + "." + k
	}
	switch x := v.(type) {
	case string:
		if strings.ContainsRune(x, 0) {
			return at
		}
	case map[string]any:
		for k, e := range x {
			if strings.ContainsRune(k, 0) {
				return join(strings.ReplaceAll(k, "\x00", ""))
			}
			if p := nulPath(join(k), e); p != "" {
				return p
			}
		}
	case []any:
		for i, e := range x {
			if p := nulPath(fmt.Sprintf("%s[%d]", at, i), e); p != "" {
				return p
			}
		}
	}
	return ""
}

func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return apperr.Invalid("body", "must be a JSON object")
		}
		return apperr.Invalid(te.Field, "must be "+jsonTypeName(te.Type.Kind().String()))
	}
	return apperr.Invalid("body", "is not valid JSON")
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
// (RFC 3986), unlike query-string decoding.
func pathParam(c *fiber.Ctx, name string) (string, error) {
	v, err := url.PathUnescape(c.Params(name))
	if err != nil {
		return "", apperr.Invalid(name, "is not a valid percent-encoded path segment")
	}
	return v, nil
}
