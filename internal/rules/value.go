package rules

import (
	"bytes"
	"encoding/json"
	"math"
	"math/big"
	"reflect"
	"regexp"
	"strconv"
	"time"
)

// kind is the JSON type of a value as the rules see it. Absent keys and JSON
// null are both kindMissing (ADDENDUM 10).
type kind int

const (
	kindMissing kind = iota
	kindString
	kindNumber
	kindBool
	kindArray
	kindObject
	kindOther // a Go value with no JSON counterpart; only exists/notX match it
)

// timestampPattern defines "an ISO 8601 timestamp" for the ordering
// operators; the SQL compiler implements the same set without regular
// expressions (see sqltime.go), and the tests compare the two.
//
// Accepted: YYYY-MM-DD (midnight UTC), or YYYY-MM-DDTHH:MM[:SS[.ffffff]]
// followed by Z or ±HH:MM. The offset is required because without it
// PostgreSQL would read the time in the session's time zone. Years 0001-9999,
// offsets up to ±14:59, at most six fraction digits (PostgreSQL stores
// microseconds and would round more), no leap second, no lower-case t or z, no
// space separator. Day-of-month validity (2023-02-29) is checked separately.
const timestampPattern = `^([0-9]{3}[1-9]|[0-9]{2}[1-9]0|[0-9][1-9]00|[1-9]000)-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])` +
	`(T([01][0-9]|2[0-3]):([0-5][0-9])(:([0-5][0-9])([.][0-9]{1,6})?)?(Z|([+-])(0[0-9]|1[0-4]):([0-5][0-9])))?$`

var timestampRE = regexp.MustCompile(timestampPattern)

// parseTimestamp reads s as a timestamp in the timestampPattern format.
func parseTimestamp(s string) (time.Time, bool) {
	m := timestampRE.FindStringSubmatch(s)
	if m == nil {
		return time.Time{}, false
	}
	atoi := func(s string) int {
		n, _ := strconv.Atoi(s) // the pattern admits digits only
		return n
	}
	year, month, day := atoi(s[0:4]), atoi(s[5:7]), atoi(s[8:10])
	loc := time.UTC
	var hour, minute, sec, nsec int
	if m[4] != "" {
		hour, minute = atoi(m[5]), atoi(m[6])
		if m[8] != "" {
			sec = atoi(m[8])
		}
		if frac := m[9]; frac != "" {
			digits := frac[1:]
			nsec = atoi(digits)
			for i := len(digits); i < 9; i++ {
				nsec *= 10
			}
		}
		if m[10] != "Z" {
			off := atoi(m[12])*3600 + atoi(m[13])*60
			if m[11] == "-" {
				off = -off
			}
			loc = time.FixedZone("", off)
		}
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, loc)
	// time.Date normalises 2023-02-29 to March 1st; such dates are not timestamps.
	if t.Day() != day || int(t.Month()) != month {
		return time.Time{}, false
	}
	return t, true
}

// jsonNumberRE is the JSON number grammar (RFC 8259), anchored.
var jsonNumberRE = regexp.MustCompile(`^-?(0|[1-9][0-9]*)([.][0-9]+)?([eE][+-]?[0-9]+)?$`)

// IsJSONNumber reports whether s is a number as JSON writes it (RFC 8259):
// what a number in a rule document may look like, whatever wrote the
// document (YAML sequence definitions keep such numbers' exact text).
func IsJSONNumber(s string) bool { return jsonNumberRE.MatchString(s) }

// maxNumberLen and maxExponent bound the numbers big.Rat is asked to expand:
// "1e999999999" is a short valid JSON number that would take gigabytes. They
// are wide enough for anything PostgreSQL's numeric stores (131072 digits
// before the point, 16383 after), so stored properties always count as
// numbers; rule values are held to much tighter limits by Parse.
const (
	maxNumberLen = 200000
	maxExponent  = 200000
)

// numberText returns the canonical JSON text of a number value and whether v
// is a usable number. Floats are written in their shortest round-trip form, so
// a property decoded as float64 0.1 compares equal to the rule literal 0.1, as
// it does in PostgreSQL's numeric.
func numberText(v any) (string, bool) {
	switch n := v.(type) {
	case json.Number:
		s := string(n)
		if len(s) > maxNumberLen || !IsJSONNumber(s) {
			return "", false
		}
		if i := bytes.IndexAny([]byte(s), "eE"); i >= 0 {
			exp, err := strconv.Atoi(s[i+1:])
			if err != nil || exp > maxExponent || exp < -maxExponent {
				return "", false
			}
		}
		return s, true
	case float64:
		if math.IsNaN(n) || math.IsInf(n, 0) {
			return "", false
		}
		return strconv.FormatFloat(n, 'g', -1, 64), true
	case float32:
		f := float64(n)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return "", false
		}
		return strconv.FormatFloat(f, 'g', -1, 32), true
	case int:
		return strconv.FormatInt(int64(n), 10), true
	case int8:
		return strconv.FormatInt(int64(n), 10), true
	case int16:
		return strconv.FormatInt(int64(n), 10), true
	case int32:
		return strconv.FormatInt(int64(n), 10), true
	case int64:
		return strconv.FormatInt(n, 10), true
	case uint:
		return strconv.FormatUint(uint64(n), 10), true
	case uint8:
		return strconv.FormatUint(uint64(n), 10), true
	case uint16:
		return strconv.FormatUint(uint64(n), 10), true
	case uint32:
		return strconv.FormatUint(uint64(n), 10), true
	case uint64:
		return strconv.FormatUint(n, 10), true
	}
	return "", false
}

// toRat returns v as an exact rational, or false when v is not a number.
func toRat(v any) (*big.Rat, bool) {
	s, ok := numberText(v)
	if !ok {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(s)
	return r, ok
}

// kindOf classifies a value coming from a decoded JSON/YAML document or from a
// contact's properties.
func kindOf(v any) kind {
	switch v := v.(type) {
	case nil:
		return kindMissing
	case string:
		return kindString
	case bool:
		return kindBool
	case []any:
		if v == nil { // encodes as JSON null
			return kindMissing
		}
		return kindArray
	case map[string]any:
		if v == nil {
			return kindMissing
		}
		return kindObject
	}
	if _, ok := numberText(v); ok {
		return kindNumber
	}
	switch v.(type) {
	case json.Number, float64, float32:
		return kindOther // NaN, infinities and absurd exponents are no JSON numbers
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return kindMissing
		}
		return kindArray
	case reflect.Map:
		if rv.IsNil() {
			return kindMissing
		}
		return kindObject
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return kindMissing
		}
	}
	return kindOther
}

// elements returns the elements of an array value of any slice type
// ([]any from JSON, []string built in Go...).
func elements(v any) []any {
	if a, ok := v.([]any); ok {
		return a
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
		return nil
	}
	out := make([]any, rv.Len())
	for i := range out {
		out[i] = rv.Index(i).Interface()
	}
	return out
}

// scalarEqual is the type-strict equality of ADDENDUM 10: same JSON type, and
// numbers compared by value (1 == 1.0, 1 != "1").
func scalarEqual(a, b any) bool {
	ka, kb := kindOf(a), kindOf(b)
	if ka != kb {
		return false
	}
	switch ka {
	case kindString:
		return a.(string) == b.(string)
	case kindBool:
		return a.(bool) == b.(bool)
	case kindNumber:
		ra, ok1 := toRat(a)
		rb, ok2 := toRat(b)
		return ok1 && ok2 && ra.Cmp(rb) == 0
	}
	return false
}

// isScalar reports whether v is a string, number or boolean.
func isScalar(v any) bool {
	switch kindOf(v) {
	case kindString, kindNumber, kindBool:
		return true
	}
	return false
}

// DecodeProperties decodes a contact's properties JSON (as stored in the
// contacts.properties column) keeping numbers as json.Number, so that the Go
// evaluator compares them with the same exactness as PostgreSQL's numeric.
// Decoding into float64 instead works too but can disagree with the SQL
// predicate on numbers with more than 15 significant digits.
func DecodeProperties(raw []byte) (map[string]any, error) {
	props := map[string]any{}
	if len(bytes.TrimSpace(raw)) == 0 {
		return props, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&props); err != nil {
		return nil, err
	}
	if props == nil { // the JSON text was null
		props = map[string]any{}
	}
	return props, nil
}
