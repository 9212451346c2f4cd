package rules

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// timestampCorpus returns strings on both sides of the timestamp definition:
// hand-picked ones, every day around the end of February in leap and
// non-leap years, field values just out of range, and random mutations of
// valid timestamps.
func timestampCorpus(r *rand.Rand) []string {
	corpus := []string{
		"2024-05-01", "2024-05-01T10:00Z", "2024-05-01T10:00:00Z", "2024-05-01T10:00:00.1Z",
		"2024-05-01T10:00:00.123456Z", "2024-05-01T10:00:00.1234567Z", "2024-05-01T10:00:00+02:00",
		"2024-05-01T10:00:00-14:59", "2024-05-01T10:00:00+15:00", "2024-05-01T10:00:00+14:60",
		"2024-05-01T23:59:59.999999+00:00", "2024-05-01T24:00:00Z", "2024-05-01T10:60:00Z",
		"2024-05-01T10:00:60Z", "0000-01-01", "0001-01-01", "9999-12-31", "10000-01-01",
		"2024-00-01", "2024-13-01", "2024-01-00", "2024-01-32", "2024-04-31", "2024-06-31",
		"2024-05-01T10:00:00", "2024-05-01 10:00:00Z", "2024-05-01t10:00:00z", "2024-05-01T10Z",
		"2024-05-01T10:00:00.Z", "2024-05-01T10:00:00+0200", "2024-05-01T10:00:00+02",
		"+2024-05-01", "2024-5-1", "20240501", "2024/05/01", "２０２４-05-01", "2024-05-01\n",
		"2024-05-01T10:00:00Zjunk", "epoch", "now", "today", "yesterday", "infinity", "", "----------",
		"2024-05-01T10:00:00ZZ", "2024-05-01T10:00:00+02:00Z", "2024-05-01T1a:00:00Z", "2a24-05-01",
	}
	for _, y := range []int{1, 4, 100, 400, 1900, 2000, 2023, 2024, 2100, 9996, 9999} {
		for _, md := range []string{"02-28", "02-29", "02-30", "03-01", "04-30", "04-31", "12-31"} {
			corpus = append(corpus, fmt.Sprintf("%04d-%s", y, md), fmt.Sprintf("%04d-%sT12:30:45.5+01:00", y, md))
		}
	}
	valid := []string{}
	for range 300 {
		// Components drawn slightly beyond their ranges.
		s := fmt.Sprintf("%04d-%02d-%02d", r.IntN(10000), r.IntN(14), r.IntN(33))
		switch r.IntN(4) {
		case 0:
		case 1:
			s += fmt.Sprintf("T%02d:%02dZ", r.IntN(25), r.IntN(61))
		case 2:
			s += fmt.Sprintf("T%02d:%02d:%02d.%s+%02d:%02d", r.IntN(25), r.IntN(61), r.IntN(61), "123456789"[:1+r.IntN(8)], r.IntN(16), r.IntN(61))
		case 3:
			s += fmt.Sprintf("T%02d:%02d:%02d-%02d:%02d", r.IntN(25), r.IntN(61), r.IntN(61), r.IntN(16), r.IntN(61))
		}
		corpus = append(corpus, s)
		if _, ok := parseTimestamp(s); ok {
			valid = append(valid, s)
		}
	}
	const alphabet = "0123456789-:T.Z+ zt/é"
	alpha := []rune(alphabet)
	for range 1500 {
		s := []rune(valid[r.IntN(len(valid))])
		switch i := r.IntN(len(s)); r.IntN(3) {
		case 0:
			s[i] = alpha[r.IntN(len(alpha))]
		case 1:
			s = append(s[:i], s[i+1:]...)
		case 2:
			s = append(s[:i], append([]rune{alpha[r.IntN(len(alpha))]}, s[i:]...)...)
		}
		corpus = append(corpus, string(s))
	}
	return corpus
}

// TestTimestampSQLMatchesGo checks the SQL timestamp check and comparison
// against parseTimestamp, string by string, with bounds on both sides of
// midnight UTC and outside the years 1-9999.
func TestTimestampSQLMatchesGo(t *testing.T) {
	pool := needDB(t)
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	corpus := timestampCorpus(rand.New(rand.NewPCG(seed, 1)))
	ctx := context.Background()

	// Validity alone.
	rows, err := pool.Query(ctx, "SELECT ("+timestampSQL("x.s", "TRUE", "TRUE")+") FROM unnest($1::text[]) WITH ORDINALITY AS x(s, i) ORDER BY i", corpus)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[bool])
	if err != nil {
		t.Fatal(err)
	}
	valid := 0
	for i, s := range corpus {
		_, want := parseTimestamp(s)
		if want {
			valid++
		}
		if got[i] != want {
			t.Errorf("%q: SQL says timestamp %v, Go %v", s, got[i], want)
		}
	}
	if valid < len(corpus)/5 || valid > len(corpus)*4/5 {
		t.Errorf("corpus unbalanced: %d of %d valid", valid, len(corpus))
	}

	// Comparisons with bounds.
	bounds := []string{"2024-05-01", "2024-05-01T00:00:00.000001Z", "2024-04-30T23:59:59.999999Z",
		"2024-05-01T02:00:00+02:00", "2024-05-01T12:00:00-03:30", "0001-01-01T00:00:00+14:00",
		"9999-12-31T23:59:59-14:00", "0001-01-01", "9999-12-31", "2000-02-29T12:00Z"}
	for _, b := range bounds {
		bt, ok := parseTimestamp(b)
		if !ok {
			t.Fatalf("bad bound %q", b)
		}
		for _, op := range []string{OpGreaterThan, OpGreaterOrEqual, OpLessThan, OpLessOrEqual} {
			c := &compiler{start: 2, index: map[argKey]int{}}
			pred := c.timestampCompareSQL("x.s", op, bt)
			rows, err := pool.Query(ctx, "SELECT ("+pred+") FROM unnest($1::text[]) WITH ORDINALITY AS x(s, i) ORDER BY i", append([]any{corpus}, c.args...)...)
			if err != nil {
				t.Fatalf("%s %s: %v", op, b, err)
			}
			got, err := pgx.CollectRows(rows, pgx.RowTo[bool])
			if err != nil {
				t.Fatalf("%s %s: %v", op, b, err)
			}
			for i, s := range corpus {
				want := evalComparison(op, s, b)
				if got[i] != want {
					t.Errorf("%q %s %q: SQL %v, Go %v", s, op, b, got[i], want)
				}
			}
		}
	}
}
