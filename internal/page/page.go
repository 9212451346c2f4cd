// Package page implements keyset pagination for every list: opaque
// cursors, limit parsing, and List, the one pipeline (bound, read one row
// more than the page, trim, next cursor) that every store's List runs.
package page

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"time"

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

// cursorKey checks that a cursor came from this service. It guards
// integrity, not secrecy: a cursor only positions a tenant-scoped query, so
// a forged one could reveal nothing, but a hand-made or damaged one must be
// a VALIDATION_ERROR rather than a silently wrong page (ADDENDUM 3). A fixed
// key keeps cursors valid across instances and restarts.
var cursorKey = []byte("tidings page cursor v1")

const macLen = 8

func mac(payload []byte) []byte {
	h := hmac.New(sha256.New, cursorKey)
	h.Write(payload)
	return h.Sum(nil)[:macLen]
}

// Encode makes an opaque cursor string.
func (c Cursor) Encode() string {
	b, _ := json.Marshal(wire{V: 1, T: c.Time.UnixMicro(), ID: c.ID})
	return base64.RawURLEncoding.EncodeToString(append(b, mac(b)...))
}

// Decode parses a cursor from the query string; "" means the first page.
// Anything this service did not issue is a VALIDATION_ERROR.
func Decode(s string) (*Cursor, error) {
	if s == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	var w wire
	if err != nil || len(b) <= macLen || !hmac.Equal(b[len(b)-macLen:], mac(b[:len(b)-macLen])) ||
		json.Unmarshal(b[:len(b)-macLen], &w) != nil || w.V != 1 || w.ID == "" {
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
func Parse(cursor, limit string, def, max int) (Params, error) {
	var f apperr.Fields
	c, err := Decode(cursor)
	if err != nil {
		f.Add("cursor", "is not a cursor issued by this service")
	}
	n, err := Limit(limit, def, max)
	if err != nil {
		f.Add("limit", "must be an integer between 1 and "+strconv.Itoa(max))
	}
	if err := f.Err(); err != nil {
		return Params{}, err
	}
	return Params{After: c, Limit: n}, nil
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

// List reads one page through fetch and returns its items with the cursor
// of the next page (nil on the last). key gives an item's position.
func List[T any](p Params, fetch func(Query) ([]T, error), key func(T) Cursor) ([]T, *string, error) {
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
// cursor of the next page (nil on the last page). key gives an item's
// position.
func Trim[T any](items []T, limit int, key func(T) Cursor) ([]T, *string) {
	if len(items) <= limit {
		return items, nil
	}
	items = items[:limit]
	s := key(items[limit-1]).Encode()
	return items, &s
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
