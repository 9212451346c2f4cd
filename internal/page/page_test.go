package page

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"testing"
	"time"

	"tidings/internal/apperr"
)

var codec, _ = NewCodec([]byte("a test key of enough bytes"))

func TestCursorRoundTrip(t *testing.T) {
	t.Parallel()
	c := Cursor{Time: time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC), ID: "cnt_x"}
	got, err := codec.Decode(codec.Encode(c))
	if err != nil || !got.Time.Equal(c.Time) || got.ID != c.ID {
		t.Fatalf("%+v %v", got, err)
	}
	if got, err := codec.Decode(""); got != nil || err != nil {
		t.Fatal("empty cursor is the first page")
	}
}

func TestDecodeRejectsForeignCursors(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"garbage", "!!!", "eyJ2IjoyLCJ0IjoxLCJpIjoieCJ9", "eyJ2IjoxLCJ0IjoxfQ", "e30"} {
		_, err := codec.Decode(s)
		if !apperr.IsCode(err, "VALIDATION_ERROR") {
			t.Errorf("%q: %v", s, err)
		}
	}
}

func TestLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int
		ok   bool
	}{{"", 20, true}, {"1", 1, true}, {"100", 100, true}, {"0", 0, false}, {"101", 0, false}, {"-1", 0, false}, {"abc", 0, false}, {"1.5", 0, false}}
	for _, tt := range tests {
		n, err := Limit(tt.in, 20, 100)
		if (err == nil) != tt.ok || (tt.ok && n != tt.want) {
			t.Errorf("Limit(%q) = %d, %v", tt.in, n, err)
		}
	}
}

func TestTrim(t *testing.T) {
	t.Parallel()
	mk := func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	key := func(i int) Cursor { return Cursor{Time: time.Unix(int64(1000-i), 0), ID: string(rune('a' + i))} }
	items, next := Trim(mk(21), 20, key)
	if len(items) != 20 || next == nil {
		t.Fatalf("limit+1 rows: %d items, next %v", len(items), next)
	}
	c := next
	if c.ID != key(19).ID || !c.Time.Equal(key(19).Time) {
		t.Fatalf("next cursor points at %+v, want the last item", c)
	}
	if items, next := Trim(mk(20), 20, key); len(items) != 20 || next != nil {
		t.Fatal("a full last page has no next cursor")
	}
	if items, next := Trim(mk(0), 20, key); len(items) != 0 || next != nil {
		t.Fatal("empty page")
	}
}

func TestBefore(t *testing.T) {
	t.Parallel()
	to := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if bt, id := Before(nil, to); !bt.Equal(to.Add(time.Millisecond)) || id != "" {
		t.Fatal("a to given in milliseconds covers its whole millisecond (inclusive)")
	}
	fine := to.Add(123456 * time.Nanosecond)
	if bt, _ := Before(nil, fine); !bt.Equal(fine.Add(time.Microsecond)) {
		t.Fatal("a finer to is inclusive to the microsecond")
	}
	early := &Cursor{Time: to.Add(-time.Hour), ID: "x"}
	if bt, id := Before(early, to); !bt.Equal(early.Time) || id != "x" {
		t.Fatal("a cursor before to wins")
	}
	late := &Cursor{Time: to.Add(time.Hour), ID: "x"}
	if bt, _ := Before(late, to); !bt.Equal(to.Add(time.Millisecond)) {
		t.Fatal("to caps a later cursor")
	}
}

func TestDecodeRejectsForgedCursors(t *testing.T) {
	t.Parallel()
	good := codec.Encode(Cursor{Time: time.Now(), ID: "cnt_1"})
	if _, err := codec.Decode(good); err != nil {
		t.Fatal(err)
	}
	handMade := base64.RawURLEncoding.EncodeToString([]byte(`{"v":1,"t":1,"i":"x"}`))
	raw, _ := base64.RawURLEncoding.DecodeString(good)
	raw[5] ^= 1
	for _, s := range []string{handMade, base64.RawURLEncoding.EncodeToString(raw), good[:len(good)-2], "bogus", "x"} {
		if _, err := codec.Decode(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

func TestList(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rows := make([]Cursor, 5) // newest first
	for i := range rows {
		rows[i] = Cursor{Time: base.Add(-time.Duration(i) * time.Second), ID: string(rune('e' - i))}
	}
	// fetch stands for a newest-first keyset query over rows.
	fetch := func(seen *Query) func(Query) ([]Cursor, error) {
		return func(q Query) ([]Cursor, error) {
			*seen = q
			var out []Cursor
			for _, r := range rows {
				if (r.Time.Before(q.BeforeTime) || r.Time.Equal(q.BeforeTime) && r.ID < q.BeforeID) && len(out) < int(q.Limit) {
					out = append(out, r)
				}
			}
			return out, nil
		}
	}
	key := func(c Cursor) Cursor { return c }
	tests := []struct {
		desc      string
		p         Params
		wantIDs   string
		wantNext  bool
		wantLimit int32
	}{
		{desc: "first page", p: Params{Limit: 2}, wantIDs: "ed", wantNext: true, wantLimit: 3},
		{desc: "after a cursor", p: Params{Limit: 2, After: &rows[1]}, wantIDs: "cb", wantNext: true, wantLimit: 3},
		{desc: "last page", p: Params{Limit: 2, After: &rows[2]}, wantIDs: "ba", wantLimit: 3},
		{desc: "page exactly full", p: Params{Limit: 5}, wantIDs: "edcba", wantLimit: 6},
		{desc: "until", p: Params{Limit: 10, Until: rows[3].Time}, wantIDs: "ba", wantLimit: 11},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			var q Query
			items, next, err := List(tt.p, fetch(&q), key)
			if err != nil {
				t.Fatal(err)
			}
			ids := ""
			for _, it := range items {
				ids += it.ID
			}
			if ids != tt.wantIDs || (next != nil) != tt.wantNext || q.Limit != tt.wantLimit {
				t.Fatalf("got %q next=%v limit=%d", ids, next != nil, q.Limit)
			}
			if next != nil && next.ID != items[len(items)-1].ID {
				t.Fatalf("next cursor %v", next)
			}
		})
	}
	t.Run("fetch error", func(t *testing.T) {
		t.Parallel()
		boom := apperr.Internal()
		if _, _, err := List(Params{Limit: 1}, func(Query) ([]int, error) { return nil, boom }, func(int) Cursor { return Cursor{} }); err != boom {
			t.Fatalf("got %v", err)
		}
	})
}

// A cursor signed with another key is refused: the key is configuration,
// not a constant anyone can read in the source.
func TestDecodeRejectsOtherKeys(t *testing.T) {
	t.Parallel()
	other, err := NewCodec([]byte("another key of enough bytes"))
	if err != nil {
		t.Fatal(err)
	}
	s := other.Encode(Cursor{Time: time.Now(), ID: "cnt_1"})
	if _, err := codec.Decode(s); !apperr.IsCode(err, "VALIDATION_ERROR") {
		t.Fatalf("foreign key accepted: %v", err)
	}
	if _, err := (Codec{}).Decode(s); err == nil {
		t.Fatal("a codec without a key accepts cursors")
	}
	if _, err := NewCodec([]byte("short")); err == nil {
		t.Fatal("a short key is accepted")
	}
}

// Well-signed cursors whose time lies outside years 1-9999 (PostgreSQL
// would answer 22008) or whose id is not storable text are refused.
func TestDecodeRejectsUnrepresentableCursors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc string
		t    int64
		id   string
		ok   bool
	}{
		{desc: "before year 1 (4713 BC)", t: -210_866_803_200_000_000 - 1, id: "x"},
		{desc: "year 0", t: time.Date(0, 6, 1, 0, 0, 0, 0, time.UTC).UnixMicro(), id: "x"},
		{desc: "after 9999", t: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro(), id: "x"},
		{desc: "min int64", t: math.MinInt64, id: "x"},
		{desc: "NUL in id", t: 0, id: "a\x00b"},
		{desc: "year 1", t: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro(), id: "x", ok: true},
		{desc: "year 9999", t: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC).UnixMicro(), id: "x", ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			b, _ := json.Marshal(wire{V: 1, T: tt.t, ID: tt.id})
			s := base64.RawURLEncoding.EncodeToString(append(b, codec.mac(b)...))
			_, err := codec.Decode(s)
			if tt.ok != (err == nil) {
				t.Fatalf("got %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !apperr.IsCode(err, "VALIDATION_ERROR") {
				t.Fatalf("got %v", err)
			}
		})
	}
}
