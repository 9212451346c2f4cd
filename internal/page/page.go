// Package page implements keyset pagination for every list: opaque
// cursors, limit parsing, and List, the one pipeline (bound, read one row
// more than the page, trim, next cursor) that every store's List runs.
package page

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"tidings/internal/apperr"
)

// Default and maximum page sizes of API.md section 8.
const (
	DefaultLimit = 20
	MaxLimit     = 100
)

// Cursor is the position after the last item of a page: the sort time and
// the id that breaks ties. Times keep microseconds so no row is skipped.
type Cursor struct {
	Time time.Time
	ID   string
}

type wire struct {
	V  int    `json:"v"`
	T  int64  `json:"t"`
	ID string `json:"i"`
}

// Codec makes and reads cursors. Its key comes from configuration
// (config.Config.CursorKey), so only someone who holds the secret can make a
// cursor this service accepts; there is no key in the source.
//
// The MAC guards integrity, not secrecy: a cursor only positions a
// tenant-scoped query, but a hand-made or damaged one must be a
// VALIDATION_ERROR rather than a silently wrong page (ADDENDUM 3), and its
// time and id reach SQL, so only what this service wrote may come back.
type Codec struct{ key []byte }

// MinKeyLen is the shortest cursor key NewCodec accepts.
const MinKeyLen = 16

// NewCodec returns a codec keyed with key, which must hold at least
// MinKeyLen bytes.
func NewCodec(key []byte) (Codec, error) {
	if len(key) < MinKeyLen {
		return Codec{}, fmt.Errorf("page: cursor key of %d bytes, want at least %d", len(key), MinKeyLen)
	}
	return Codec{key: append([]byte(nil), key...)}, nil
}

const macLen = 8

func (c Codec) mac(payload []byte) []byte {
	h := hmac.New(sha256.New, c.key)
	h.Write(payload)
	return h.Sum(nil)[:macLen]
}

// The times a cursor may carry: what a timestamptz column holds and a
// response can render (years 1 to 9999). A cursor outside them is refused at
// decode, before it reaches SQL.
var (
	minTime = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
)

// maxIDLen bounds a cursor's id; every id the service issues is far shorter.
const maxIDLen = 256

// Encode makes an opaque cursor string.
func (c Codec) Encode(cur Cursor) string {
	b, _ := json.Marshal(wire{V: 1, T: cur.Time.UnixMicro(), ID: cur.ID})
	return base64.RawURLEncoding.EncodeToString(append(b, c.mac(b)...))
}

// Next encodes the cursor of the next page; nil (the last page) stays nil.
func (c Codec) Next(cur *Cursor) *string {
	if cur == nil {
		return nil
	}
	s := c.Encode(*cur)
	return &s
}

// Decode parses a cursor from the query string; "" means the first page.
// Anything this service did not issue, or whose position lies outside what
// the database can hold, is a VALIDATION_ERROR.
func (c Codec) Decode(s string) (*Cursor, error) {
	if s == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	var w wire
	if err != nil || len(b) <= macLen || len(c.key) == 0 || !hmac.Equal(b[len(b)-macLen:], c.mac(b[:len(b)-macLen])) ||
		json.Unmarshal(b[:len(b)-macLen], &w) != nil || w.V != 1 || w.ID == "" {
		return nil, apperr.Invalid("cursor", "is not a cursor issued by this service")
	}
	if w.T < minTime.UnixMicro() || w.T > maxTime.UnixMicro() {
		return nil, apperr.Invalid("cursor", "points outside the representable time range (years 1 to 9999)")
	}
	if len(w.ID) > maxIDLen || !utf8.ValidString(w.ID) || strings.ContainsRune(w.ID, 0) {
		return nil, apperr.Invalid("cursor", "is not a cursor issued by this service")
	}
	return &Cursor{Time: time.UnixMicro(w.T).UTC(), ID: w.ID}, nil
}

// Limit parses the limit query parameter: def when empty, else an integer
// between 1 and max.
func Limit(s string, def, max int) (int, error) {
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > max {
		return 0, apperr.Invalid("limit", "must be an integer between 1 and "+strconv.Itoa(max))
	}
	return n, nil
}

// Params are the parsed pagination query parameters.
type Params struct {
	After *Cursor
	Limit int
	// Until is an inclusive upper time limit of a newest-first list (the
	// timeline's "to"); zero means none.
	Until time.Time
}

// Parse reads cursor and limit together.
func (c Codec) Parse(cursor, limit string, def, max int) (Params, error) {
	var f apperr.Fields
	after, err := c.Decode(cursor)
	if err != nil {
		mergeFields(&f, err)
	}
	n, err := Limit(limit, def, max)
	if err != nil {
		f.Add("limit", "must be an integer between 1 and "+strconv.Itoa(max))
	}
	if err := f.Err(); err != nil {
		return Params{}, err
	}
	return Params{After: after, Limit: n}, nil
}

func mergeFields(f *apperr.Fields, err error) {
	e, _ := apperr.As(err)
	fields, _ := e.Details["fields"].(map[string]any)
	for k, v := range fields {
		msgs, _ := v.([]string)
		for _, m := range msgs {
			f.Add(k, m)
		}
	}
}

// Query is what a store's list statement is given for one page.
type Query struct {
	// BeforeTime and BeforeID are the exclusive upper bound of a
	// newest-first list: "(t, id) < (BeforeTime, BeforeID)".
	BeforeTime time.Time
	BeforeID   string
	// AfterID is the exclusive lower bound of a list ordered by id alone
	// (segment members); "" on the first page.
	AfterID string
	// Limit is one more row than the page holds, so a full page knows
	// whether another follows.
	Limit int32
}

// List reads one page through fetch and returns its items with the
// position of the next page (nil on the last), which the HTTP layer encodes
// with its Codec. key gives an item's position.
func List[T any](p Params, fetch func(Query) ([]T, error), key func(T) Cursor) ([]T, *Cursor, error) {
	q := Query{Limit: int32(p.Limit + 1)}
	until := p.Until
	if until.IsZero() {
		until = Far
	}
	q.BeforeTime, q.BeforeID = Before(p.After, until)
	if p.After != nil {
		q.AfterID = p.After.ID
	}
	items, err := fetch(q)
	if err != nil {
		return nil, nil, err
	}
	items, next := Trim(items, p.Limit, key)
	return items, next, nil
}

// Trim cuts a page fetched with Limit+1 rows back to Limit and returns the
// position of the next page (nil on the last page). key gives an item's
// position.
func Trim[T any](items []T, limit int, key func(T) Cursor) ([]T, *Cursor) {
	if len(items) <= limit {
		return items, nil
	}
	items = items[:limit]
	next := key(items[limit-1])
	return items, &next
}

// Far is later than any stored time; it stands for "no upper bound".
var Far = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// Before returns the exclusive upper bound (time, id) of a newest-first page:
// the cursor when there is one, capped by an inclusive upper time limit.
// Queries compare "(t, id) < (time, id)" with no OR, so the bound is an
// index range and a page deep in a long list costs the same as the first.
//
// Responses show milliseconds while rows keep microseconds, so a `to` given
// to the millisecond covers that whole millisecond: the entry shown as
// 12:00:00.123Z is included by to=12:00:00.123Z.
func Before(after *Cursor, to time.Time) (time.Time, string) {
	t := to.Add(time.Microsecond)
	if to.Nanosecond()%int(time.Millisecond) == 0 {
		t = to.Add(time.Millisecond)
	}
	if after != nil && after.Time.Before(t) {
		return after.Time, after.ID
	}
	return t, ""
}
