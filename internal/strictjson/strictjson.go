// Package strictjson decodes a JSON request document strictly: malformed
// JSON names the line and column where it broke, a wrong type names the
// field, and a field the target type does not have is refused naming the
// closest known one (ADDENDUM 3). Text PostgreSQL cannot hold is refused
// naming its field (storable). Every error is a VALIDATION_ERROR. The api
// decodes every body with it, and a contact import decodes each NDJSON line
// with it, so both refuse the same documents the same way. It does no I/O.
package strictjson

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"unicode/utf8"

	"tidings/internal/apperr"
	"tidings/internal/storable"
)

// Decode decodes doc into dst, which must be a pointer to a struct: one
// JSON object, strict about syntax, types and names. Free-form objects
// (properties, variables, rule trees) are maps or raw JSON in dst and take
// any key.
func Decode(doc []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err, doc, dst)
	}
	if _, err := dec.Token(); err != io.EOF {
		return apperr.Invalid("body", "must contain a single JSON object")
	}
	// Text that PostgreSQL cannot hold is refused here, naming the field,
	// before Go's decoder has replaced it with U+FFFD or it reaches the
	// database as raw JSON (properties are stored as sent).
	if path, problem, ok := storable.JSON(doc); !ok {
		return apperr.Invalid(cmp.Or(path, "body"), problem)
	}
	return nil
}

func jsonError(err error, doc []byte, dst any) error {
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
		return UnknownName("field", name, jsonFields(reflect.TypeOf(dst)))
	}
	offset := int64(len(doc))
	var se *json.SyntaxError
	msg := "the body ends before the JSON does"
	if errors.As(err, &se) {
		offset, msg = se.Offset, strings.TrimPrefix(se.Error(), "json: ")
		// The offset is past the byte that broke the syntax.
		offset = max(offset-1, 0)
	}
	line, col := position(doc, offset)
	return apperr.Invalid("body", fmt.Sprintf("is not valid JSON: %s (line %d, column %d)", msg, line, col))
}

// position is the 1-based line and column (in characters) of byte offset
// off of doc.
func position(doc []byte, off int64) (line, col int) {
	if off > int64(len(doc)) {
		off = int64(len(doc))
	}
	before := doc[:off]
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

// UnknownName is the VALIDATION_ERROR of a field or query parameter the
// request may not carry, naming the closest known one.
func UnknownName(what, name string, known []string) error {
	msg := "is not a known " + what
	if len(known) == 0 {
		msg += "; this route takes none"
	} else if near := Closest(name, known); near != "" {
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

// Closest is the known name a misspelling most likely meant: the same
// but for case, or within a small edit distance; "" when none is close.
func Closest(name string, known []string) string {
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
