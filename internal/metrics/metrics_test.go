package metrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"tidings/internal/apperr"
	"tidings/internal/contacts"
	"tidings/internal/delivery"
	"tidings/internal/events"
	"tidings/internal/metrics"
	"tidings/internal/page"
	"tidings/internal/sendgridevents"
	"tidings/internal/store"
	"tidings/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// now is the tests' clock: 15 November 2026, 12:00 UTC.
var now = time.Date(2026, 11, 15, 12, 0, 0, 0, time.UTC)

type bundle struct {
	t     *testing.T
	ctx   context.Context
	db    *store.DB
	store *metrics.Store
}

func setup(t *testing.T) *bundle {
	t.Helper()
	db := testenv.DB(t)
	b := &bundle{t: t, ctx: context.Background(), db: db, store: &metrics.Store{DB: db, Now: func() time.Time { return now }}}
	b.exec(`INSERT INTO tenants (id, name) VALUES ('ten_a', 'A'), ('ten_b', 'B')`)
	return b
}

func (b *bundle) exec(sql string, args ...any) {
	b.t.Helper()
	if _, err := b.db.Pool.Exec(b.ctx, sql, args...); err != nil {
		b.t.Fatal(err)
	}
}

// count counts facts in a transaction of their own.
func (b *bundle) count(facts ...metrics.Fact) {
	b.t.Helper()
	if err := b.db.InTx(b.ctx, func(q *store.Tx) error { return metrics.Count(b.ctx, q, facts...) }); err != nil {
		b.t.Fatal(err)
	}
}

func (b *bundle) report(tenant string, q metrics.Query) metrics.Report {
	b.t.Helper()
	r, err := b.store.Tenant(b.ctx, tenant, q)
	if err != nil {
		b.t.Fatal(err)
	}
	return r
}

func sent(tenant, seq, tmpl string, at time.Time) metrics.Fact {
	return metrics.Fact{TenantID: tenant, SequenceID: seq, TemplateID: tmpl, At: at, Counts: metrics.Counts{Sent: 1}}
}

// A fact counts on the UTC day and month it happened: the last
// microsecond of October and the first of November fall apart, whatever
// the time zone of the time given.
func TestDayAndMonthBoundaries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	amsterdam, err := time.LoadLocation("Europe/Amsterdam")
	if err != nil {
		amsterdam = time.FixedZone("CET", 3600)
	}
	lastOct := time.Date(2026, 10, 31, 23, 59, 59, 999999000, time.UTC)
	firstNov := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	b.count(sent("ten_a", "seq", "tmpl", lastOct))
	// 00:30 in Amsterdam on 1 November is still 31 October in UTC.
	b.count(sent("ten_a", "seq", "tmpl", time.Date(2026, 11, 1, 0, 30, 0, 0, amsterdam)))
	b.count(sent("ten_a", "seq", "tmpl", firstNov), sent("ten_a", "", "tmpl", firstNov.Add(time.Hour)))

	oct := b.report("ten_a", metrics.Query{YearMonth: "2026-10"})
	nov := b.report("ten_a", metrics.Query{YearMonth: "2026-11"})
	if oct.Counters.Sent != 2 || nov.Counters.Sent != 2 {
		t.Fatalf("October %d, November %d; want 2 and 2", oct.Counters.Sent, nov.Counters.Sent)
	}
	d31 := b.report("ten_a", metrics.Query{Period: "daily", Date: "2026-10-31"})
	d1 := b.report("ten_a", metrics.Query{Date: "2026-11-01"})
	if d31.Counters.Sent != 2 || d1.Counters.Sent != 2 || d1.Period != metrics.Daily || d1.Month.Format("2006-01") != "2026-11" {
		t.Fatalf("31 Oct %d, 1 Nov %d (%s %s)", d31.Counters.Sent, d1.Counters.Sent, d1.Period, d1.Month)
	}
	for _, tc := range []struct {
		month string
		seq   int64
		tmpl  int64
	}{{"2026-10", 2, 2}, {"2026-11", 1, 2}, {"2026-12", 0, 0}} {
		s, _, err := b.store.ScopedOne(b.ctx, "ten_a", metrics.ScopeSequence, "seq", tc.month)
		if !apperr.IsCode(err, "SEQUENCE_NOT_FOUND") {
			t.Fatalf("sequence that does not exist: %v", err)
		}
		_ = s
		b.exec(`INSERT INTO sequences (tenant_id, id, name, content, trigger_event) VALUES ('ten_a', 'seq', 'S', '', 'x') ON CONFLICT DO NOTHING`)
		b.exec(`INSERT INTO templates (tenant_id, id, name, subject, content, compiled_html) VALUES ('ten_a', 'tmpl', 'T', 's', 'c', 'h') ON CONFLICT DO NOTHING`)
		s, m, err := b.store.ScopedOne(b.ctx, "ten_a", metrics.ScopeSequence, "seq", tc.month)
		if err != nil || s.Sent != tc.seq || m.Format("2006-01") != tc.month {
			t.Fatalf("sequence %s: %+v %v", tc.month, s, err)
		}
		tm, _, err := b.store.ScopedOne(b.ctx, "ten_a", metrics.ScopeTemplate, "tmpl", tc.month)
		if err != nil || tm.Sent != tc.tmpl {
			t.Fatalf("template %s: %+v %v", tc.month, tm, err)
		}
		if (tc.tmpl == 0) != tm.UpdatedAt.IsZero() {
			t.Fatalf("template %s updatedAt %v", tc.month, tm.UpdatedAt)
		}
		b.exec(`DELETE FROM sequences WHERE tenant_id = 'ten_a'`)
	}
}

// sentRows passes MetricsAdd on to the transaction and counts the rows
// each call sends.
type sentRows struct {
	metrics.Adder
	rows int
}

func (s *sentRows) MetricsAdd(ctx context.Context, rows json.RawMessage) error {
	var r []json.RawMessage
	if err := json.Unmarshal(rows, &r); err != nil {
		return err
	}
	s.rows += len(r)
	return s.Adder.MetricsAdd(ctx, rows)
}

// One Count of many facts sums them per counter row before the statement
// (one JSON row per scope and period, not one per fact and scope), and
// each still lands on its UTC day and month as if counted alone.
func TestOneCountSumsItsFactsPerRow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lastOct := time.Date(2026, 10, 31, 23, 59, 59, 0, time.UTC)
	amsterdam := time.FixedZone("CET", 3600)
	var facts []metrics.Fact
	for range 300 {
		facts = append(facts, sent("ten_a", "seq", "tmpl", lastOct))
	}
	for range 200 { // 00:30 on 1 November in Amsterdam: 31 October in UTC
		facts = append(facts, sent("ten_a", "seq", "tmpl", time.Date(2026, 11, 1, 0, 30, 0, 0, amsterdam)))
	}
	for range 100 {
		facts = append(facts, sent("ten_a", "seq", "tmpl", lastOct.Add(time.Hour)))
	}
	for range 50 { // the transaction's now()
		facts = append(facts, metrics.Fact{TenantID: "ten_b", Counts: metrics.Counts{Scheduled: 1, Unsubscribed: 1}})
	}
	sent := &sentRows{}
	if err := b.db.InTx(b.ctx, func(q *store.Tx) error {
		sent.Adder = q
		return metrics.Count(b.ctx, sent, facts...)
	}); err != nil {
		t.Fatal(err)
	}
	// ten_a: tenant, sequence and template, each on 31 October and in
	// November (the tenant's day, the others' month); ten_b: its tenant
	// row at now().
	if sent.rows != 7 {
		t.Fatalf("the statement got %d rows for %d facts, want 7", sent.rows, len(facts))
	}
	if d := b.report("ten_a", metrics.Query{Date: "2026-10-31"}); d.Counters.Sent != 500 {
		t.Fatalf("31 October: %d sent, want 500", d.Counters.Sent)
	}
	if d := b.report("ten_a", metrics.Query{Date: "2026-11-01"}); d.Counters.Sent != 100 {
		t.Fatalf("1 November: %d sent, want 100", d.Counters.Sent)
	}
	var rows, sum int64
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*), sum(sent) FROM metric_counts WHERE tenant_id = 'ten_a'`).Scan(&rows, &sum); err != nil ||
		rows != 6 || sum != 3*600 {
		t.Fatalf("ten_a: %d counter rows with %d sent, want 6 rows (tenant, sequence, template × 2 periods) with 1800 (%v)", rows, sum, err)
	}
	var scheduled, unsub int64
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*), sum(scheduled), sum(unsubscribed) FROM metric_counts WHERE tenant_id = 'ten_b'`).
		Scan(&rows, &scheduled, &unsub); err != nil || rows != 1 || scheduled != 50 || unsub != 50 {
		t.Fatalf("ten_b: %d rows, %d scheduled, %d unsubscribed; want 1, 50, 50 (%v)", rows, scheduled, unsub, err)
	}
}

// A range has every day from start to end, zeros where nothing was
// counted; the other tenant's counts never show.
func TestRangeHasEveryDay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := func(day int) time.Time { return time.Date(2026, 11, day, 10, 0, 0, 0, time.UTC) }
	b.count(sent("ten_a", "", "t", d(3)), metrics.Fact{TenantID: "ten_a", TemplateID: "t", At: d(5),
		Counts: metrics.Counts{Delivered: 2, BouncedHard: 1, BouncedSoft: 1, Opened: 1}})
	b.count(sent("ten_b", "", "t", d(4)), sent("ten_b", "", "t", d(5)))
	r := b.report("ten_a", metrics.Query{StartDate: "2026-11-02", EndDate: "2026-11-06"})
	if !r.Range || len(r.Days) != 5 {
		t.Fatalf("range of %d days", len(r.Days))
	}
	want := []metrics.Counts{{}, {Sent: 1}, {}, {Delivered: 2, BouncedHard: 1, BouncedSoft: 1, Opened: 1}, {}}
	for i, day := range r.Days {
		if day.Date != time.Date(2026, 11, 2+i, 0, 0, 0, 0, time.UTC) || day.Counts != want[i] {
			t.Fatalf("day %d: %s %+v, want %+v", i, day.Date, day.Counts, want[i])
		}
		if day.UpdatedAt.IsZero() != (want[i] == metrics.Counts{}) {
			t.Fatalf("day %d updatedAt %v", i, day.UpdatedAt)
		}
	}
	if r.Days[3].Bounced() != 2 {
		t.Fatal("bounced is not hard plus soft")
	}
	// A 93-day range across a year boundary, nothing counted.
	r = b.report("ten_a", metrics.Query{Period: "daily", StartDate: "2026-12-01", EndDate: "2027-03-03"})
	if len(r.Days) != 93 || r.Days[92].Date.Format("2006-01-02") != "2027-03-03" {
		t.Fatalf("93-day range: %d days", len(r.Days))
	}
	if m := b.report("ten_b", metrics.Query{}); m.Counters.Sent != 2 || m.Counters.Delivered != 0 {
		t.Fatalf("tenant b: %+v", m.Counters)
	}
}

// Every parameter is checked; each problem names its field.
func TestQueryValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		desc   string
		q      metrics.Query
		fields []string
	}{
		{"unknown period", metrics.Query{Period: "weekly"}, []string{"period"}},
		{"malformed month", metrics.Query{YearMonth: "2026-1"}, []string{"yearMonth"}},
		{"month 13", metrics.Query{YearMonth: "2026-13"}, []string{"yearMonth"}},
		{"year 0", metrics.Query{YearMonth: "0000-01"}, []string{"yearMonth"}},
		{"a date as month", metrics.Query{YearMonth: "2026-11-01"}, []string{"yearMonth"}},
		{"malformed date", metrics.Query{Date: "2026-11-1"}, []string{"date"}},
		{"30 February", metrics.Query{Date: "2026-02-30"}, []string{"date"}},
		{"timestamp as date", metrics.Query{Period: "daily", Date: "2026-11-01T00:00:00Z"}, []string{"date"}},
		{"date with monthly", metrics.Query{Period: "monthly", Date: "2026-11-01"}, []string{"date"}},
		{"range with monthly", metrics.Query{Period: "monthly", StartDate: "2026-11-01", EndDate: "2026-11-02"}, []string{"startDate", "endDate"}},
		{"yearMonth with daily", metrics.Query{Period: "daily", YearMonth: "2026-11"}, []string{"yearMonth"}},
		{"yearMonth with a date", metrics.Query{Date: "2026-11-01", YearMonth: "2026-11"}, []string{"yearMonth"}},
		{"date with a range", metrics.Query{Date: "2026-11-01", StartDate: "2026-11-01", EndDate: "2026-11-02"}, []string{"date"}},
		{"start only", metrics.Query{StartDate: "2026-11-01"}, []string{"endDate"}},
		{"end only", metrics.Query{EndDate: "2026-11-01"}, []string{"startDate"}},
		{"start after end", metrics.Query{StartDate: "2026-11-02", EndDate: "2026-11-01"}, []string{"startDate"}},
		{"94 days", metrics.Query{StartDate: "2026-01-01", EndDate: "2026-04-04"}, []string{"endDate"}},
		{"malformed start and end", metrics.Query{StartDate: "yesterday", EndDate: "2026-13-01"}, []string{"startDate", "endDate"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := b.store.Tenant(b.ctx, "ten_a", tc.q)
			e, ok := apperr.As(err)
			if !ok || e.Code != "VALIDATION_ERROR" {
				t.Fatalf("%v", err)
			}
			fields, _ := e.Details["fields"].(map[string]any)
			if len(fields) != len(tc.fields) {
				t.Fatalf("fields %v, want %v", fields, tc.fields)
			}
			for _, f := range tc.fields {
				if fields[f] == nil {
					t.Fatalf("fields %v, want %v", fields, tc.fields)
				}
			}
		})
	}
	// What is accepted, and the defaults.
	for _, tc := range []struct {
		q      metrics.Query
		period string
		month  string
		rng    int
	}{
		{metrics.Query{}, metrics.Monthly, "2026-11", 0},
		{metrics.Query{Period: "daily"}, metrics.Daily, "2026-11", 0},
		{metrics.Query{YearMonth: "2025-02"}, metrics.Monthly, "2025-02", 0},
		{metrics.Query{Date: "2024-02-29"}, metrics.Daily, "2024-02", 0},
		{metrics.Query{StartDate: "2026-01-01", EndDate: "2026-04-03"}, "", "", 93},
		{metrics.Query{Period: "daily", StartDate: "2026-11-15", EndDate: "2026-11-15"}, "", "", 1},
	} {
		r, err := b.store.Tenant(b.ctx, "ten_a", tc.q)
		if err != nil || r.Period != tc.period || len(r.Days) != tc.rng ||
			(tc.month != "" && r.Month.Format("2006-01") != tc.month) {
			t.Fatalf("%+v: %v %+v", tc.q, err, r)
		}
	}
	if r := b.report("ten_a", metrics.Query{Period: "daily"}); r.Date != time.Date(2026, 11, 15, 0, 0, 0, 0, time.UTC) {
		t.Fatalf("daily default date %s", r.Date)
	}
	if _, _, err := b.store.ScopedOne(b.ctx, "ten_a", metrics.ScopeSequence, "x", "11-2026"); !apperr.IsCode(err, "VALIDATION_ERROR") {
		t.Fatalf("sequence yearMonth: %v", err)
	}
}

// Many transactions counting for one tenant at once, each in several
// statements over several sequences and templates (as an event enrolling
// a contact in several sequences does): every count arrives, and no
// transaction deadlocks or fails.
func TestConcurrentCountsAreExact(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const workers, txs = 16, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range txs {
				err := b.db.InTx(b.ctx, func(q *store.Tx) error {
					// Sequences visited in an order that differs per worker.
					for k := range 3 {
						seq := fmt.Sprintf("seq%d", (w+i+k)%4)
						if err := metrics.Count(b.ctx, q, metrics.Fact{TenantID: "ten_a", SequenceID: seq,
							TemplateID: "tmpl" + seq, Counts: metrics.Counts{Scheduled: 1}}); err != nil {
							return err
						}
					}
					return metrics.Count(b.ctx, q, sent("ten_a", "", "tmplx", now))
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var rows, shards int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*), count(DISTINCT shard) FROM metric_counts WHERE scope = 'tenant'`).Scan(&rows, &shards); err != nil {
		t.Fatal(err)
	}
	if shards < 2 {
		t.Fatalf("all counts on %d shard(s)", shards)
	}
	r := b.report("ten_a", metrics.Query{})
	if r.Counters.Scheduled != workers*txs*3 || r.Counters.Sent != workers*txs {
		t.Fatalf("counted %+v, want scheduled %d sent %d", r.Counters.Counts, workers*txs*3, workers*txs)
	}
	var seqSum int64
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT sum(scheduled) FROM metric_counts WHERE scope = 'sequence'`).Scan(&seqSum); err != nil || seqSum != workers*txs*3 {
		t.Fatalf("sequence rows sum %d %v", seqSum, err)
	}
	// Disable is for the benchmark: nothing is counted while it holds.
	enable := metrics.Disable()
	b.count(sent("ten_a", "", "t", now))
	enable()
	if r2 := b.report("ten_a", metrics.Query{}); r2.Counters.Sent != r.Counters.Sent {
		t.Fatal("counted while disabled")
	}
}

// The lists page the tenant's sequences and templates newest first, each
// with the month's counters (zeros when none); another tenant's never
// appear, and its ids are not found.
func TestSequenceAndTemplateLists(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range 5 {
		b.exec(`INSERT INTO sequences (tenant_id, id, name, content, trigger_event, created_at)
			VALUES ('ten_a', $1, 'S', '', 'x', now() - make_interval(mins => $2))`, fmt.Sprintf("s%d", i), 10-i)
		b.exec(`INSERT INTO templates (tenant_id, id, name, subject, content, compiled_html, created_at)
			VALUES ('ten_a', $1, 'T', 's', 'c', 'h', now() - make_interval(mins => $2))`, fmt.Sprintf("t%d", i), 10-i)
	}
	b.exec(`INSERT INTO sequences (tenant_id, id, name, content, trigger_event) VALUES ('ten_b', 'secret', 'S', '', 'x')`)
	b.count(sent("ten_a", "s1", "t1", now), sent("ten_a", "s1", "t1", now), sent("ten_a", "s3", "t1", now),
		sent("ten_a", "s1", "t1", now.AddDate(0, -1, 0)), sent("ten_b", "s1", "t1", now))
	var got []string
	p := page.Params{Limit: 2}
	for {
		pg, err := b.store.ScopedList(b.ctx, "ten_a", metrics.ScopeSequence, "", p)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range pg.Items {
			got = append(got, fmt.Sprintf("%s:%d", it.ID, it.Sent))
		}
		if pg.Next == nil {
			break
		}
		p.After = pg.Next
	}
	if fmt.Sprint(got) != "[s4:0 s3:1 s2:0 s1:2 s0:0]" {
		t.Fatalf("sequences %v", got)
	}
	pg, err := b.store.ScopedList(b.ctx, "ten_a", metrics.ScopeTemplate, "2026-10", page.Params{Limit: 20})
	if err != nil || len(pg.Items) != 5 || pg.Items[3].ID != "t1" || pg.Items[3].Sent != 1 || pg.Month.Format("2006-01") != "2026-10" {
		t.Fatalf("templates in October: %+v %v", pg, err)
	}
	if _, _, err := b.store.ScopedOne(b.ctx, "ten_a", metrics.ScopeSequence, "secret", ""); !apperr.IsCode(err, "SEQUENCE_NOT_FOUND") {
		t.Fatalf("other tenant's sequence: %v", err)
	}
	if _, _, err := b.store.ScopedOne(b.ctx, "ten_b", metrics.ScopeTemplate, "t1", ""); !apperr.IsCode(err, "TEMPLATE_NOT_FOUND") {
		t.Fatalf("other tenant's template: %v", err)
	}
	// One query reads both scopes: a sequence's id is no template.
	if _, _, err := b.store.ScopedOne(b.ctx, "ten_a", metrics.ScopeTemplate, "s1", ""); !apperr.IsCode(err, "TEMPLATE_NOT_FOUND") {
		t.Fatalf("a sequence read as a template: %v", err)
	}
}

// outcomes is the delivery side of a test: sends inserted as rows (their
// own count is the sender's, tested over HTTP), outcomes applied through
// the webhook's batches and through tracking hits.
type outcomes struct {
	*bundle
	applier  *delivery.Outcomes
	webhooks *delivery.Webhooks
}

func setupOutcomes(t *testing.T) *outcomes {
	b := setup(t)
	o := &delivery.Outcomes{DB: b.db, Events: &events.Recorder{DB: b.db}}
	b.exec(`INSERT INTO contacts (tenant_id, id, email) VALUES ('ten_a', 'cnt_1', 'a@example.com'), ('ten_a', 'cnt_2', 'b@example.com')`)
	return &outcomes{bundle: b, applier: o, webhooks: &delivery.Webhooks{DB: b.db, Outcomes: o}}
}

func (o *outcomes) send(id, contact, seq, tmpl string) {
	o.t.Helper()
	var seqID, step *string
	if seq != "" {
		s := "step-1"
		seqID, step = &seq, &s
	}
	o.exec(`INSERT INTO sends (tenant_id, id, message_id, contact_id, template_id, template_version, sequence_id,
		step_id, from_address, to_address, subject, sent_at)
		VALUES ('ten_a', $1, 'm-' || $1, $2, $3, 1, $4, $5, 'a@acme.test', 'x@example.com', 'Hi', $6)`,
		id, contact, tmpl, seqID, step, now.Add(-48*time.Hour))
}

// batch posts SendGrid events through the webhook path (dedup by
// sg_event_id, one transaction per batch).
func (o *outcomes) batch(evs ...map[string]any) {
	o.t.Helper()
	body, _ := json.Marshal(evs)
	id, err := o.webhooks.Accept(o.ctx, body)
	if err != nil {
		o.t.Fatal(err)
	}
	if _, err := o.webhooks.ApplyBatch(o.ctx, id); err != nil {
		o.t.Fatal(err)
	}
}

func ev(id, typ, send string, at time.Time, extra ...string) map[string]any {
	e := map[string]any{"event": typ, "sg_event_id": id, "email": "x@example.com", "timestamp": at.Unix(),
		"send_id": send, "tenant_id": "ten_a"}
	for i := 0; i+1 < len(extra); i += 2 {
		e[extra[i]] = extra[i+1]
	}
	return e
}

// A scripted mix of outcomes, with events repeated, reordered and
// contradicting each other, counts each status move, first open and first
// click once, on the day of the event, for the tenant, the template and
// the sequence; a hard bounce cancels the contact's pending sends, which
// count as cancelled.
func TestOutcomesCountOnce(t *testing.T) {
	t.Parallel()
	o := setupOutcomes(t)
	o.send("snd_1", "cnt_1", "", "welcome")     // transactional
	o.send("snd_2", "cnt_2", "onboard", "tips") // sequence
	o.send("snd_3", "cnt_1", "", "welcome")
	o.exec(`INSERT INTO scheduled_sends (tenant_id, id, contact_id, enrolment_id, sequence_id, sequence_version,
		step_id, template_id, scheduled_for) VALUES
		('ten_a', 'sch_1', 'cnt_2', 'enr_1', 'onboard', 1, 'step-2', 'tips', now() + interval '1 day'),
		('ten_a', 'sch_2', 'cnt_2', 'enr_1', 'onboard', 1, 'step-3', 'more', now() + interval '2 days')`)
	day1 := time.Date(2026, 11, 13, 9, 0, 0, 0, time.UTC)
	day2 := day1.Add(24 * time.Hour)

	// snd_1: delivered (twice, the second a repeat of the same event and a
	// second event id), opened twice, clicked.
	o.batch(ev("e1", "delivered", "snd_1", day1), ev("e1", "delivered", "snd_1", day1),
		ev("e2", "delivered", "snd_1", day1.Add(time.Minute)))
	o.batch(ev("e1", "delivered", "snd_1", day1)) // the provider's retry
	o.batch(ev("e3", "open", "snd_1", day2), ev("e4", "open", "snd_1", day2.Add(time.Hour)), ev("e5", "click", "snd_1", day2,
		"url", "https://example.com"))
	if err := o.applier.Record(o.ctx, delivery.Outcome{TenantID: "ten_a", SendID: "snd_1", Kind: sendgridevents.Opened, At: day2}); err != nil {
		t.Fatal(err) // a pixel hit: an open, but not the first
	}
	// snd_2: the bounce arrives before the delivered dated earlier, then a
	// soft bounce turns hard, then the complaint.
	o.batch(ev("e6", "bounce", "snd_2", day2, "type", "blocked"))
	o.batch(ev("e7", "delivered", "snd_2", day1))
	o.batch(ev("e8", "bounce", "snd_2", day2.Add(time.Hour), "type", "bounce"), ev("e8", "bounce", "snd_2", day2.Add(time.Hour), "type", "bounce"))
	o.batch(ev("e9", "spamreport", "snd_2", day2.Add(2*time.Hour)))
	// snd_3: dropped (rejected: no counter), then delivered (never wins).
	o.batch(ev("e10", "dropped", "snd_3", day1), ev("e11", "delivered", "snd_3", day1))

	want1 := metrics.Counts{Delivered: 1}
	want2 := metrics.Counts{Opened: 1, Clicked: 1, BouncedSoft: 1, BouncedHard: 1, Complained: 1, Cancelled: 2}
	r := o.report("ten_a", metrics.Query{StartDate: "2026-11-13", EndDate: "2026-11-15"})
	if r.Days[0].Counts != want1 || r.Days[1].Counts != (metrics.Counts{Opened: 1, Clicked: 1, BouncedSoft: 1, BouncedHard: 1, Complained: 1}) {
		t.Fatalf("days: %+v / %+v", r.Days[0].Counts, r.Days[1].Counts)
	}
	// The cancellations happened now (the database's clock), not on the
	// bounce's day.
	today := time.Now().UTC().Format("2006-01-02")
	td := o.report("ten_a", metrics.Query{Date: today})
	if td.Counters.Cancelled != 2 {
		t.Fatalf("cancelled today: %+v", td.Counters.Counts)
	}
	month := o.report("ten_a", metrics.Query{YearMonth: "2026-11"})
	sum := want1
	sum.Opened, sum.Clicked, sum.BouncedSoft, sum.BouncedHard, sum.Complained = 1, 1, 1, 1, 1
	if today[:7] == "2026-11" {
		sum.Cancelled = want2.Cancelled
	}
	if month.Counters.Counts != sum {
		t.Fatalf("November %+v, want %+v", month.Counters.Counts, sum)
	}
	o.exec(`INSERT INTO sequences (tenant_id, id, name, content, trigger_event) VALUES ('ten_a', 'onboard', 'O', '', 'x')`)
	o.exec(`INSERT INTO templates (tenant_id, id, name, subject, content, compiled_html) VALUES
		('ten_a', 'welcome', 'W', 's', 'c', 'h'), ('ten_a', 'tips', 'T', 's', 'c', 'h')`)
	seq, _, err := o.store.ScopedOne(o.ctx, "ten_a", metrics.ScopeSequence, "onboard", "2026-11")
	if err != nil || seq.Complained != 1 || seq.BouncedHard != 1 || seq.Delivered != 0 || seq.Opened != 0 {
		t.Fatalf("sequence: %+v %v", seq.Counts, err)
	}
	wel, _, err := o.store.ScopedOne(o.ctx, "ten_a", metrics.ScopeTemplate, "welcome", "2026-11")
	if err != nil || wel.Counts != (metrics.Counts{Delivered: 1, Opened: 1, Clicked: 1}) {
		t.Fatalf("template welcome: %+v %v", wel.Counts, err)
	}

	// Cancelling again cancels nothing more: only rows that moved count.
	if err := o.db.InTx(o.ctx, func(q *store.Tx) error {
		_, err := contacts.ApplyOptOut(o.ctx, q, contacts.OptOut{TenantID: "ten_a", ContactID: "cnt_2", Suppress: true})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if td := o.report("ten_a", metrics.Query{Date: today}); td.Counters.Cancelled != 2 {
		t.Fatalf("cancelled after a second opt-out: %d", td.Counters.Cancelled)
	}
}

// Two workers applying the same batch at once, and outcomes of one send
// racing in separate transactions: still one count each.
func TestRacingOutcomesCountOnce(t *testing.T) {
	t.Parallel()
	o := setupOutcomes(t)
	for i := range 10 {
		o.send(fmt.Sprintf("snd_%d", i), "cnt_1", "", "welcome")
	}
	var evs []map[string]any
	for i := range 10 {
		evs = append(evs, ev(fmt.Sprintf("d%d", i), "delivered", fmt.Sprintf("snd_%d", i), now),
			ev(fmt.Sprintf("o%d", i), "open", fmt.Sprintf("snd_%d", i), now))
	}
	body, _ := json.Marshal(evs)
	id, err := o.webhooks.Accept(o.ctx, body)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if _, err := o.webhooks.ApplyBatch(o.ctx, id); err != nil {
				t.Error(err)
			}
		})
		wg.Go(func() {
			for i := range 10 {
				if err := o.applier.Record(o.ctx, delivery.Outcome{TenantID: "ten_a", SendID: fmt.Sprintf("snd_%d", i),
					Kind: sendgridevents.Opened, At: now}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	r := o.report("ten_a", metrics.Query{Date: "2026-11-15"})
	if r.Counters.Counts != (metrics.Counts{Delivered: 10, Opened: 10}) {
		t.Fatalf("%+v", r.Counters.Counts)
	}
}
