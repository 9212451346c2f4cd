// Package contacts holds the audience of a tenant: validation of contact
// input, the property merge rules, plan limits and the store operations
// that create, upsert, update and delete contacts.
package contacts

import (
	"bytes"
	"encoding/json"
	"maps"
	"unicode/utf8"

	"tidings/internal/apperr"
	"tidings/internal/storable"
)

// Limits of what a contact stores (documented in docs/decisions.md).
// Numbers are bounded by storable.Number.
const (
	maxStringValue = 4096 // bytes of a string value or array element
	maxArrayValue  = 100  // elements
	maxUserID      = 256
	// MaxPropertiesBytes bounds a contact's whole properties object as
	// PostgreSQL writes it: writes merge, so only the database can see the
	// total (CHECK contacts_properties_size, schema 0008).
	MaxPropertiesBytes = 65536
)

// Patch is a validated properties change: keys to write and keys to drop
// (those sent as null).
type Patch struct {
	Set    map[string]any
	Remove []string
}

// SetJSON is the JSONB object of keys to write.
func (p Patch) SetJSON() []byte {
	if len(p.Set) == 0 {
		return []byte("{}")
	}
	b, _ := json.Marshal(p.Set)
	return b
}

// PatchJSON is the whole patch as one JSONB object: the keys to write, and
// the keys to drop as null, which jsonb_strip_nulls(properties || patch)
// applies as ContactUpdate's (properties || set) - remove does.
func (p Patch) PatchJSON() []byte {
	if len(p.Remove) == 0 {
		return p.SetJSON()
	}
	m := make(map[string]any, len(p.Set)+len(p.Remove))
	maps.Copy(m, p.Set)
	for _, k := range p.Remove {
		m[k] = nil
	}
	b, _ := json.Marshal(m)
	return b
}

// RemoveKeys never returns nil, so SQL always receives an array.
func (p Patch) RemoveKeys() []string {
	if p.Remove == nil {
		return []string{}
	}
	return p.Remove
}

// ParseProperties validates a properties object (ADDENDUM section 4):
// values are strings, numbers, booleans or arrays of those; null removes the
// key; nested objects are rejected. Errors name properties.<key>.
func ParseProperties(raw map[string]json.RawMessage) (Patch, error) {
	var f apperr.Fields
	p := parseProperties(&f, raw)
	return p, f.Err()
}

// parseProperties is ParseProperties noting the problems in f.
func parseProperties(f *apperr.Fields, raw map[string]json.RawMessage) Patch {
	p := Patch{Set: map[string]any{}}
	storable.Properties(raw, func(k string, r json.RawMessage) string {
		v, err := decodeValue(r)
		switch {
		case err != nil:
			return err.Error()
		case v == nil:
			p.Remove = append(p.Remove, k)
		default:
			p.Set[k] = v
		}
		return ""
	}, f.Add)
	return p
}

// parseTextProperties is parseProperties for string values (a CSV
// import's cells): the same key, count and string rules.
func parseTextProperties(f *apperr.Fields, raw map[string]string) Patch {
	p := Patch{Set: make(map[string]any, len(raw))}
	storable.Properties(raw, func(k, v string) string {
		if err := scalarProblem(v); err != nil {
			return err.Error()
		}
		p.Set[k] = v
		return ""
	}, f.Add)
	return p
}

type valueError string

func (e valueError) Error() string { return string(e) }

// decodeValue returns nil for JSON null.
func decodeValue(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, valueError("is not valid JSON")
	}
	switch x := v.(type) {
	case nil, bool:
		return x, nil
	case string, json.Number:
		return x, scalarProblem(x)
	case []any:
		if len(x) > maxArrayValue {
			return nil, valueError("arrays may hold at most 100 values")
		}
		for _, e := range x {
			switch e.(type) {
			case string, bool, json.Number:
				if err := scalarProblem(e); err != nil {
					return nil, err
				}
			default:
				return nil, valueError("arrays may hold only strings, numbers and booleans")
			}
		}
		return x, nil
	default:
		return nil, valueError("must be a string, number, boolean or array of those; nested objects are not allowed")
	}
}

// scalarProblem bounds a string's length and a number's digits (a number
// such as 1e99999 would be stored as 100,000 digits, 1e131072 not at all).
func scalarProblem(v any) error {
	switch x := v.(type) {
	case string:
		if len(x) > maxStringValue {
			return valueError("strings must be at most 4096 bytes")
		}
		if p := storable.Text(x); p != "" {
			return valueError(p)
		}
	case json.Number:
		if p := storable.Number(string(x)); p != "" {
			return valueError(p)
		}
	}
	return nil
}

// ValidUserID reports whether s is acceptable as an external user id.
func ValidUserID(s string) bool { return utf8.RuneCountInString(s) <= maxUserID }
