package delivery

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"tidings/internal/events"
	"tidings/internal/provider/ses/sestest"
	"tidings/internal/sendgridevents"
	"tidings/internal/store"
	"tidings/internal/testenv"
	"tidings/queries"
)

// outcomesBundle is one test's database with a tenant, contacts and sends
// inserted as rows (the outcome code needs nothing else of a send).
type outcomesBundle struct {
	t        *testing.T
	ctx      context.Context
	db       *store.DB
	outcomes *Outcomes
	webhooks *Webhooks
}

func setupOutcomes(t *testing.T) *outcomesBundle {
	t.Helper()
	db := testenv.DB(t)
	o := &Outcomes{DB: db, Events: &events.Recorder{DB: db}}
	b := &outcomesBundle{t: t, ctx: context.Background(), db: db, outcomes: o, webhooks: &Webhooks{DB: db, Outcomes: o}}
	b.exec(`INSERT INTO tenants (id, name) VALUES ('ten_a', 'A'), ('ten_b', 'B')`)
	return b
}

func (b *outcomesBundle) exec(sql string, args ...any) {
	b.t.Helper()
	if _, err := b.db.Pool.Exec(b.ctx, sql, args...); err != nil {
		b.t.Fatal(err)
	}
}

// contact inserts a subscribed contact.
func (b *outcomesBundle) contact(tenant, id string) {
	b.t.Helper()
	b.exec(`INSERT INTO contacts (tenant_id, id, email) VALUES ($1, $2, $2 || '@example.com')`, tenant, id)
}

// send inserts a sent send of contact; seq, when not "", makes it a
// sequence send.
func (b *outcomesBundle) send(tenant, id, contact, seq string) {
	b.t.Helper()
	var seqID, stepID *string
	if seq != "" {
		step := "step-1"
		seqID, stepID = &seq, &step
	}
	b.exec(`INSERT INTO sends (tenant_id, id, message_id, contact_id, template_id, template_version,
		sequence_id, step_id, from_address, to_address, subject, sent_at)
		VALUES ($1, $2, 'msg-' || $2, $3, 'welcome', 1, $4, $5, 'a@acme.test', 'x@example.com', 'Hi', now() - interval '1 hour')`,
		tenant, id, contact, seqID, stepID)
}

func (b *outcomesBundle) getSend(tenant, id string) queries.Send {
	b.t.Helper()
	s, err := b.db.SendGet(b.ctx, queries.SendGetParams{TenantID: tenant, ID: id})
	if err != nil {
		b.t.Fatal(err)
	}
	return s
}

func (b *outcomesBundle) getContact(tenant, id string) queries.Contact {
	b.t.Helper()
	c, err := b.db.ContactGet(b.ctx, queries.ContactGetParams{TenantID: tenant, ID: id})
	if err != nil {
		b.t.Fatal(err)
	}
	return c
}

// eventNames lists the contact's events, oldest first, by name.
func (b *outcomesBundle) eventNames(tenant, contact string) []string {
	b.t.Helper()
	rows, err := b.db.Pool.Query(b.ctx, `SELECT name FROM events WHERE tenant_id = $1 AND contact_id = $2 ORDER BY occurred_at, id`, tenant, contact)
	if err != nil {
		b.t.Fatal(err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			b.t.Fatal(err)
		}
		names = append(names, n)
	}
	return names
}

func (b *outcomesBundle) apply(outs ...Outcome) Counts {
	b.t.Helper()
	var n Counts
	err := b.db.InTx(b.ctx, func(q *store.Tx) error {
		var err error
		n, err = b.outcomes.Apply(b.ctx, q, outs)
		return err
	})
	if err != nil {
		b.t.Fatal(err)
	}
	return n
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func at(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }

func out(kind sendgridevents.Outcome, min int) Outcome {
	return Outcome{TenantID: "ten_a", SendID: "snd_1", Kind: kind, At: at(min)}
}

// Status moves by precedence whatever order the outcomes come in; each
// status event is recorded once, when the status moved; suppression
// follows hard bounces and complaints only.
func TestApplyPrecedence(t *testing.T) {
	t.Parallel()
	type sg = sendgridevents.Outcome
	tests := []struct {
		desc       string
		in         [][]sg // applied as separate transactions, in order
		status     string
		bounceType string
		suppressed bool
		events     []string
	}{
		{desc: "delivered", in: [][]sg{{sendgridevents.Delivered}}, status: "delivered",
			events: []string{events.Delivered}},
		{desc: "delivered after bounced stays bounced", in: [][]sg{{sendgridevents.BouncedHard}, {sendgridevents.Delivered}},
			status: "bounced", bounceType: "hard", suppressed: true, events: []string{events.Bounced}},
		{desc: "delivered and bounced in one batch, bounce dated first", in: [][]sg{{sendgridevents.BouncedSoft, sendgridevents.Delivered}},
			status: "bounced", bounceType: "soft", events: []string{events.Bounced}},
		{desc: "soft bounce does not suppress", in: [][]sg{{sendgridevents.BouncedSoft}}, status: "bounced", bounceType: "soft",
			events: []string{events.Bounced}},
		{desc: "soft then hard becomes hard", in: [][]sg{{sendgridevents.BouncedSoft}, {sendgridevents.BouncedHard}},
			status: "bounced", bounceType: "hard", suppressed: true, events: []string{events.Bounced, events.Bounced}},
		{desc: "hard then soft stays hard", in: [][]sg{{sendgridevents.BouncedHard}, {sendgridevents.BouncedSoft}},
			status: "bounced", bounceType: "hard", suppressed: true, events: []string{events.Bounced}},
		{desc: "complaint suppresses and clears the bounce type", in: [][]sg{{sendgridevents.Delivered}, {sendgridevents.BouncedSoft}, {sendgridevents.Complained}},
			status: "complained", suppressed: true, events: []string{events.Delivered, events.Bounced, events.Complained}},
		{desc: "hard bounce after complaint still suppresses, status stays", in: [][]sg{{sendgridevents.Complained}, {sendgridevents.BouncedHard}},
			status: "complained", suppressed: true, events: []string{events.Complained}},
		{desc: "rejected: no event, delivered after it ignored", in: [][]sg{{sendgridevents.Rejected}, {sendgridevents.Delivered}},
			status: "rejected"},
		{desc: "delivered twice recorded once", in: [][]sg{{sendgridevents.Delivered}, {sendgridevents.Delivered}},
			status: "delivered", events: []string{events.Delivered}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			b := setupOutcomes(t)
			b.contact("ten_a", "cnt_1")
			b.send("ten_a", "snd_1", "cnt_1", "")
			min := 0
			for _, batch := range tc.in {
				var outs []Outcome
				for _, k := range batch {
					outs = append(outs, out(k, min))
					min++
				}
				if n := b.apply(outs...); n.Applied != len(outs) || n.Dropped != 0 {
					t.Fatalf("counts %+v", n)
				}
			}
			s := b.getSend("ten_a", "snd_1")
			bt := ""
			if s.BounceType != nil {
				bt = *s.BounceType
			}
			if s.DeliveryStatus != tc.status || bt != tc.bounceType {
				t.Errorf("status %s/%s, want %s/%s", s.DeliveryStatus, bt, tc.status, tc.bounceType)
			}
			if c := b.getContact("ten_a", "cnt_1"); c.Suppressed != tc.suppressed || !c.Subscribed {
				t.Errorf("suppressed %v subscribed %v, want suppressed %v and subscribed", c.Suppressed, c.Subscribed, tc.suppressed)
			}
			if got := b.eventNames("ten_a", "cnt_1"); fmt.Sprint(got) != fmt.Sprint(tc.events) {
				t.Errorf("events %v, want %v", got, tc.events)
			}
		})
	}
}

// The status timestamps are those of the outcome that set the status.
func TestApplyTimestamps(t *testing.T) {
	t.Parallel()
	b := setupOutcomes(t)
	b.contact("ten_a", "cnt_1")
	b.send("ten_a", "snd_1", "cnt_1", "seq_1")
	b.apply(out(sendgridevents.Delivered, 1))
	b.apply(out(sendgridevents.Complained, 5))
	s := b.getSend("ten_a", "snd_1")
	if s.DeliveredAt == nil || !s.DeliveredAt.Equal(at(1)) || s.ComplainedAt == nil || !s.ComplainedAt.Equal(at(5)) {
		t.Fatalf("deliveredAt %v complainedAt %v", s.DeliveredAt, s.ComplainedAt)
	}
	var props map[string]any
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT properties FROM events WHERE name = $1`, events.Complained).Scan(&props); err != nil {
		t.Fatal(err)
	}
	if props["sendId"] != "snd_1" || props["templateId"] != "welcome" || props["sequenceId"] != "seq_1" || props["stepId"] != "step-1" {
		t.Fatalf("event properties %v", props)
	}
}

// Every open and click counts on the send; the contact's totals count sends
// opened or clicked at least once; the first times are the earliest.
func TestApplyOpensAndClicksCountedOncePerSend(t *testing.T) {
	t.Parallel()
	b := setupOutcomes(t)
	b.contact("ten_a", "cnt_1")
	b.send("ten_a", "snd_1", "cnt_1", "")
	b.send("ten_a", "snd_2", "cnt_1", "")
	b.apply(out(sendgridevents.Opened, 10), out(sendgridevents.Opened, 12))
	b.apply(out(sendgridevents.Opened, 5)) // an earlier open reported late
	click := out(sendgridevents.Clicked, 11)
	click.URL = "https://acme.test/a"
	b.apply(click, click)
	b.apply(Outcome{TenantID: "ten_a", SendID: "snd_2", Kind: sendgridevents.Opened, At: at(20)})

	s := b.getSend("ten_a", "snd_1")
	if s.OpenCount != 3 || s.ClickCount != 2 || !s.OpenedAt.Equal(at(5)) || !s.ClickedAt.Equal(at(11)) {
		t.Fatalf("send: opens %d clicks %d openedAt %v clickedAt %v", s.OpenCount, s.ClickCount, s.OpenedAt, s.ClickedAt)
	}
	c := b.getContact("ten_a", "cnt_1")
	if c.TotalOpens != 2 || c.TotalClicks != 1 || c.LastEventAt == nil || !c.LastEventAt.Equal(at(20)) {
		t.Fatalf("contact: totalOpens %d totalClicks %d lastEventAt %v", c.TotalOpens, c.TotalClicks, c.LastEventAt)
	}
	var url string
	var first bool
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT properties->>'url', (properties->>'first')::boolean FROM events
		WHERE name = $1 ORDER BY id LIMIT 1`, events.Clicked).Scan(&url, &first); err != nil {
		t.Fatal(err)
	}
	if url != "https://acme.test/a" || !first {
		t.Fatalf("click event url %q first %v", url, first)
	}
}

// An unsubscribe outcome unsubscribes (not suppresses) and records
// email.unsubscribed once; a contact mismatch or unknown send is dropped.
func TestApplyUnsubscribe(t *testing.T) {
	t.Parallel()
	b := setupOutcomes(t)
	b.contact("ten_a", "cnt_1")
	b.contact("ten_a", "cnt_2")
	b.send("ten_a", "snd_1", "cnt_1", "")
	u := out(sendgridevents.Unsubscribed, 1)
	b.apply(u)
	b.apply(u)
	c := b.getContact("ten_a", "cnt_1")
	if c.Subscribed || c.Suppressed {
		t.Fatalf("subscribed %v suppressed %v", c.Subscribed, c.Suppressed)
	}
	if got := b.eventNames("ten_a", "cnt_1"); fmt.Sprint(got) != fmt.Sprint([]string{events.Unsubscribed}) {
		t.Fatalf("events %v", got)
	}
	wrong := u
	wrong.ContactID = "cnt_2"
	if err := b.outcomes.Record(b.ctx, wrong); err == nil {
		t.Fatal("an unsubscribe naming another contact was applied")
	}
	other := u
	other.TenantID = "ten_b" // the send is ten_a's
	if n := b.apply(other); n.Dropped != 1 || n.Applied != 0 {
		t.Fatalf("another tenant's send: %+v", n)
	}
	if !b.getContact("ten_a", "cnt_2").Subscribed {
		t.Fatal("cnt_2 unsubscribed")
	}
}

// batch builds a SendGrid body.
func batch(t *testing.T, evs ...map[string]any) []byte {
	t.Helper()
	body, err := json.Marshal(evs)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func sgEvent(id, typ, tenant, send string, ts time.Time, extra ...any) map[string]any {
	e := map[string]any{"event": typ, "sg_event_id": id, "email": "x@example.com", "timestamp": ts.Unix(),
		"sg_message_id": "m." + send, "send_id": send, "tenant_id": tenant}
	for i := 0; i+1 < len(extra); i += 2 {
		e[extra[i].(string)] = extra[i+1]
	}
	return e
}

func (b *outcomesBundle) applyBatch(body []byte) BatchResult {
	b.t.Helper()
	id, err := b.webhooks.Accept(b.ctx, body)
	if err != nil {
		b.t.Fatal(err)
	}
	res, err := b.webhooks.ApplyBatch(b.ctx, id)
	if err != nil {
		b.t.Fatal(err)
	}
	return res
}

// A batch applies each event once: duplicates by sg_event_id, within the
// batch or across batches, change nothing; applying a batch again is a
// no-op; events of sends without a visible record (or unknown tenants) are
// parked for Unpark; a processed event applies (it settles a send in
// doubt); the counts are stored on the batch.
func TestWebhookBatchDedupAndDrops(t *testing.T) {
	t.Parallel()
	b := setupOutcomes(t)
	b.contact("ten_a", "cnt_1")
	b.contact("ten_a", "cnt_2")
	b.send("ten_a", "snd_1", "cnt_1", "")
	b.send("ten_a", "snd_2", "cnt_2", "")
	body := batch(t,
		sgEvent("e1", "delivered", "ten_a", "snd_1", at(1)),
		sgEvent("e2", "open", "ten_a", "snd_1", at(2)),
		sgEvent("e2", "open", "ten_a", "snd_1", at(2)), // repeated in the batch
		sgEvent("e3", "bounce", "ten_a", "snd_2", at(1), "type", "bounce", "reason", "550 no such user"),
		sgEvent("e4", "delivered", "ten_a", "snd_404", at(1)),
		sgEvent("e5", "delivered", "ten_zz", "snd_1", at(1)),
		sgEvent("e6", "processed", "ten_a", "snd_1", at(0)),
	)
	res := b.applyBatch(body)
	if res.Events != 7 || res.Applied != 4 || res.Duplicates != 1 || res.Parked != 2 || res.Dropped != 0 || res.Ignored != 0 {
		t.Fatalf("first apply: %+v", res)
	}
	again := b.applyBatch(body) // SendGrid delivered the same batch twice
	if again.Applied != 0 || again.Duplicates != 7 {
		t.Fatalf("second apply: %+v", again)
	}
	s := b.getSend("ten_a", "snd_1")
	if s.DeliveryStatus != "delivered" || s.OpenCount != 1 {
		t.Fatalf("snd_1 %s opens %d", s.DeliveryStatus, s.OpenCount)
	}
	if c := b.getContact("ten_a", "cnt_1"); c.TotalOpens != 1 {
		t.Fatalf("totalOpens %d", c.TotalOpens)
	}
	if c := b.getContact("ten_a", "cnt_2"); !c.Suppressed {
		t.Fatal("hard bounce did not suppress")
	}
	var reason string
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT properties->>'reason' FROM events WHERE name = $1`, events.Bounced).Scan(&reason); err != nil || reason != "550 no such user" {
		t.Fatalf("bounce reason %q %v", reason, err)
	}

	var applied, dups, dropped int32
	var appliedAt *time.Time
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT applied_at, applied, duplicates, dropped FROM webhook_batches ORDER BY id LIMIT 1`).
		Scan(&appliedAt, &applied, &dups, &dropped); err != nil {
		t.Fatal(err)
	}
	if appliedAt == nil || applied != 4 || dups != 1 || dropped != 0 {
		t.Fatalf("batch row: appliedAt %v applied %d duplicates %d dropped %d", appliedAt, applied, dups, dropped)
	}
	// The task applied twice (a retry racing the sweep) finds it applied.
	var id int64
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT min(id) FROM webhook_batches`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if res, err := b.webhooks.ApplyBatch(b.ctx, id); err != nil || !res.AlreadyApplied {
		t.Fatalf("re-apply: %+v %v", res, err)
	}
}

// A complaint suppresses; an unsubscribe and a group_unsubscribe
// unsubscribe; a soft bounce (blocked) leaves the contact mailable.
func TestWebhookContactEffects(t *testing.T) {
	t.Parallel()
	b := setupOutcomes(t)
	for i := 1; i <= 4; i++ {
		b.contact("ten_a", fmt.Sprintf("cnt_%d", i))
		b.send("ten_a", fmt.Sprintf("snd_%d", i), fmt.Sprintf("cnt_%d", i), "")
	}
	b.applyBatch(batch(t,
		sgEvent("c1", "spamreport", "ten_a", "snd_1", at(1)),
		sgEvent("c2", "unsubscribe", "ten_a", "snd_2", at(1)),
		sgEvent("c3", "group_unsubscribe", "ten_a", "snd_3", at(1)),
		sgEvent("c4", "blocked", "ten_a", "snd_4", at(1)),
	))
	want := []struct{ subscribed, suppressed bool }{{true, true}, {false, false}, {false, false}, {true, false}}
	for i, w := range want {
		c := b.getContact("ten_a", fmt.Sprintf("cnt_%d", i+1))
		if c.Subscribed != w.subscribed || c.Suppressed != w.suppressed {
			t.Errorf("cnt_%d: subscribed %v suppressed %v, want %v %v", i+1, c.Subscribed, c.Suppressed, w.subscribed, w.suppressed)
		}
	}
	if got := b.eventNames("ten_a", "cnt_2"); fmt.Sprint(got) != fmt.Sprint([]string{events.Unsubscribed}) {
		t.Errorf("cnt_2 events %v", got)
	}
	if s := b.getSend("ten_a", "snd_4"); s.DeliveryStatus != "bounced" || s.BounceType == nil || *s.BounceType != "soft" {
		t.Errorf("snd_4 %s %v", s.DeliveryStatus, s.BounceType)
	}
}

// A body that is not a batch is marked applied with nothing done, and is
// not an error (a retry could not help).
func TestWebhookGarbageBatch(t *testing.T) {
	t.Parallel()
	b := setupOutcomes(t)
	for _, body := range []string{`not json`, `{"event":"delivered"}`, `[1, 2]`, `[]`} {
		res := b.applyBatch([]byte(body))
		if body != `[]` && res.Unreadable == nil {
			t.Errorf("%s: %+v", body, res)
		}
	}
	var unapplied int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM webhook_batches WHERE applied_at IS NULL`).Scan(&unapplied); err != nil || unapplied != 0 {
		t.Fatalf("%d unapplied batches (%v)", unapplied, err)
	}
}

// A bounce reason or clicked URL holding \u0000 (text a remote mail server
// chose) applies with U+FFFD in its place: PostgreSQL refuses NUL, and the
// batch's transaction failed on every retry, losing its other events.
func TestWebhookNULInText(t *testing.T) {
	t.Parallel()
	b := setupOutcomes(t)
	b.contact("ten_a", "cnt_1")
	b.send("ten_a", "snd_1", "cnt_1", "")
	res := b.applyBatch(batch(t,
		sgEvent("n1", "click", "ten_a", "snd_1", at(1), "url", "https://example.com/a\x00b"),
		sgEvent("n2", "bounce", "ten_a", "snd_1", at(2), "type", "bounce", "reason", "550 \x00"),
	))
	if res.Applied != 2 {
		t.Fatalf("%+v", res)
	}
	var reason string
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT properties->>'reason' FROM events WHERE name = $1`, events.Bounced).Scan(&reason); err != nil || reason != "550 \uFFFD" {
		t.Fatalf("bounce reason %q %v", reason, err)
	}
}

// ADDENDUM 12: outcomes never depend on a record's timing. An event that
// comes before its send's record is parked and applied once the record
// appears (and settles a send in doubt); past the parking time, a hard
// bounce or complaint suppresses the contact with the event's address (a
// message without a record must not keep mailing it), and anything else is
// dropped.
func TestParkedEventsApplyWhenTheRecordAppears(t *testing.T) {
	t.Parallel()
	b := setupOutcomes(t)
	b.contact("ten_a", "cnt_1")
	b.contact("ten_a", "cnt_2")
	b.contact("ten_b", "cnt_2")
	body := batch(t,
		sgEvent("e1", "delivered", "ten_a", "snd_late", at(1)),
		sgEvent("e2", "bounce", "ten_a", "snd_none", at(1), "type", "bounce", "email", "CNT_2@example.com"),
		sgEvent("e3", "open", "ten_a", "snd_none", at(2), "email", "cnt_2@example.com"),
	)
	if res := b.applyBatch(body); res.Parked != 3 || res.Applied != 0 {
		t.Fatalf("first apply: %+v", res)
	}
	// The record of snd_late commits, in doubt (no answer from the provider).
	b.send("ten_a", "snd_late", "cnt_1", "")
	b.exec(`UPDATE sends SET in_doubt = true WHERE id = 'snd_late'`)
	now := time.Now()
	res, err := b.webhooks.Unpark(b.ctx, now, 100)
	// The other two wait untouched: their record has not appeared.
	if err != nil || res.Applied != 1 || res.Parked+res.FellBack+res.Dropped != 0 {
		t.Fatalf("unpark: %+v %v", res, err)
	}
	if s := b.getSend("ten_a", "snd_late"); s.DeliveryStatus != "delivered" || s.InDoubt {
		t.Fatalf("snd_late: %s in doubt %v", s.DeliveryStatus, s.InDoubt)
	}
	if c := b.getContact("ten_a", "cnt_2"); c.Suppressed {
		t.Fatal("suppressed before the parking time ran out")
	}
	res, err = b.webhooks.Unpark(b.ctx, now.Add(ParkFor+time.Minute), 100)
	if err != nil || res.FellBack != 1 || res.Dropped != 1 || res.Parked != 0 {
		t.Fatalf("unpark past time: %+v %v", res, err)
	}
	if c := b.getContact("ten_a", "cnt_2"); !c.Suppressed {
		t.Fatal("a hard bounce of a send without a record did not suppress its address")
	}
	if c := b.getContact("ten_b", "cnt_2"); c.Suppressed {
		t.Fatal("another tenant's contact with that address was suppressed")
	}
	if res, err := b.webhooks.Unpark(b.ctx, now.Add(time.Hour), 100); err != nil || res != (UnparkResult{}) {
		t.Fatalf("third pass: %+v %v", res, err)
	}
}

// Opens and clicks of one send are events (a row each, and a webhook
// message) up to MaxHitEvents of each kind within HitWindow; beyond that
// only the send's openCount and clickCount grow, so a pixel fetched in a
// loop or a link hammered writes no row per hit. A hit once the window has
// passed is an event again.
func TestTrackingHitsBoundedPerSend(t *testing.T) {
	t.Parallel()
	b := setupOutcomes(t)
	b.contact("ten_a", "cnt_1")
	b.send("ten_a", "snd_1", "cnt_1", "")
	start := time.Now() // the send went out an hour ago: no hit is too soon to be a person's
	hit := func(k sendgridevents.Outcome, at time.Time) {
		t.Helper()
		if err := b.outcomes.Record(b.ctx, Outcome{TenantID: "ten_a", SendID: "snd_1", Kind: k, At: at,
			URL: "https://x.example/", Method: "GET", UserAgent: "Mozilla/5.0 (Macintosh)"}); err != nil {
			t.Fatal(err)
		}
	}
	const extra = 7
	for i := range MaxHitEvents + extra {
		at := start.Add(time.Duration(i) * 10 * time.Second)
		hit(sendgridevents.Opened, at)
		hit(sendgridevents.Clicked, at)
	}
	rows := func() map[string]int {
		t.Helper()
		out := map[string]int{}
		r, err := b.db.Pool.Query(b.ctx, `SELECT name, count(*) FROM events WHERE tenant_id = 'ten_a'
			AND properties->>'sendId' = 'snd_1' GROUP BY name`)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		for r.Next() {
			var name string
			var n int
			if err := r.Scan(&name, &n); err != nil {
				t.Fatal(err)
			}
			out[name] = n
		}
		return out
	}
	got := rows()
	if got[events.Opened] != MaxHitEvents || got[events.Clicked] != MaxHitEvents {
		t.Fatalf("%v events, want %d opens and %d clicks", got, MaxHitEvents, MaxHitEvents)
	}
	s := b.getSend("ten_a", "snd_1")
	if s.OpenCount != MaxHitEvents+extra || s.ClickCount != MaxHitEvents+extra {
		t.Fatalf("openCount %d, clickCount %d, want %d each (every hit counted)", s.OpenCount, s.ClickCount, MaxHitEvents+extra)
	}
	hit(sendgridevents.Opened, start.Add(HitWindow+time.Second))
	if got := rows(); got[events.Opened] != MaxHitEvents+1 || got[events.Clicked] != MaxHitEvents {
		t.Fatalf("after the window: %v", got)
	}
}

// ADDENDUM 22, outcomes from whichever provider sent the message: a
// provider can only report on mail it carried. An event whose webhook
// (SendGrid's or SES's) is not the provider the send's record names is not
// applied, not even to settle a send in doubt, and is counted apart; the
// provider that carried it applies as before, and a record without a
// provider (written before pools) takes any. A parked event is checked
// when its record appears.
func TestOutcomesOnlyFromTheRecordsProvider(t *testing.T) {
	t.Parallel()
	b := setupOutcomes(t)
	for i := 1; i <= 5; i++ {
		b.contact("ten_a", fmt.Sprintf("cnt_%d", i))
	}
	b.send("ten_a", "snd_sg", "cnt_1", "")
	b.send("ten_a", "snd_ses", "cnt_2", "")
	b.send("ten_a", "snd_old", "cnt_3", "")
	b.send("ten_a", "snd_doubt", "cnt_4", "")
	b.exec(`UPDATE sends SET provider = 'sendgrid' WHERE id = 'snd_sg'`)
	b.exec(`UPDATE sends SET provider = 'ses' WHERE id IN ('snd_ses', 'snd_doubt')`)
	b.exec(`UPDATE sends SET in_doubt = true WHERE id = 'snd_doubt'`)

	res := b.applyBatch(batch(t,
		sgEvent("g1", "bounce", "ten_a", "snd_ses", at(1), "type", "bounce"), // SES carried it
		sgEvent("g2", "processed", "ten_a", "snd_doubt", at(1)),              // SES has it, in doubt
		sgEvent("g3", "delivered", "ten_a", "snd_sg", at(1)),
		sgEvent("g4", "delivered", "ten_a", "snd_old", at(1)),
	))
	if res.Applied != 2 || res.OtherProvider != 2 || res.Parked != 0 {
		t.Fatalf("SendGrid batch: %+v", res)
	}
	if s := b.getSend("ten_a", "snd_ses"); s.DeliveryStatus != "sent" {
		t.Fatalf("SendGrid's bounce applied to SES's send: %s", s.DeliveryStatus)
	}
	if c := b.getContact("ten_a", "cnt_2"); c.Suppressed {
		t.Fatal("SendGrid's bounce of SES's send suppressed its contact")
	}
	if s := b.getSend("ten_a", "snd_doubt"); !s.InDoubt {
		t.Fatal("SendGrid's event settled a send in doubt at SES")
	}
	for _, id := range []string{"snd_sg", "snd_old"} {
		if s := b.getSend("ten_a", id); s.DeliveryStatus != "delivered" {
			t.Fatalf("%s: %s", id, s.DeliveryStatus)
		}
	}
	var dropped int32
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT dropped FROM webhook_batches ORDER BY id LIMIT 1`).Scan(&dropped); err != nil || dropped != 2 {
		t.Fatalf("batch row dropped %d (%v)", dropped, err)
	}

	// SES's notifications: its complaint of SendGrid's send is not applied,
	// its own delivery is.
	sns := sestest.NewSNS(t)
	var ids []int64
	for _, ev := range [][]byte{
		sestest.Event("Complaint", "snd_sg", "ten_a", "cnt_1@example.com", "", at(2)),
		sestest.Event("Delivery", "snd_ses", "ten_a", "cnt_2@example.com", "", at(2)),
		sestest.Event("Bounce", "snd_later", "ten_a", "cnt_5@example.com", "Permanent", at(2)),
	} {
		id, err := b.webhooks.AcceptFrom(b.ctx, ProviderSES, sestest.Body(sns.Notification(ev, "2")))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	res, err := b.webhooks.ApplyBatch(b.ctx, ids[0])
	if err != nil || res.Applied != 1 || res.OtherProvider != 1 || res.Parked != 1 {
		t.Fatalf("SES notifications: %+v %v", res, err)
	}
	if c := b.getContact("ten_a", "cnt_1"); c.Suppressed {
		t.Fatal("SES's complaint of SendGrid's send suppressed its contact")
	}
	if s := b.getSend("ten_a", "snd_ses"); s.DeliveryStatus != "delivered" {
		t.Fatalf("SES's delivery of its own send: %s", s.DeliveryStatus)
	}

	// The parked SES bounce's record appears, naming SendGrid: it is not
	// applied, and never falls back to the address either.
	b.send("ten_a", "snd_later", "cnt_5", "")
	b.exec(`UPDATE sends SET provider = 'sendgrid' WHERE id = 'snd_later'`)
	u, err := b.webhooks.Unpark(b.ctx, time.Now(), 100)
	if err != nil || u != (UnparkResult{OtherProvider: 1}) {
		t.Fatalf("unpark: %+v %v", u, err)
	}
	if s := b.getSend("ten_a", "snd_later"); s.DeliveryStatus != "sent" {
		t.Fatalf("parked bounce from another provider applied: %s", s.DeliveryStatus)
	}
	if c := b.getContact("ten_a", "cnt_5"); c.Suppressed {
		t.Fatal("parked bounce from another provider suppressed the contact")
	}
}

// The set of SES rows taken with another's run keeps the newest
// takenSetMax ids: an id pushed out is asked of the database again, never
// wrongly reported applied.
func TestTakenSetBounded(t *testing.T) {
	t.Parallel()
	var s takenSet
	if s.has(1) {
		t.Fatal("empty set has 1")
	}
	ids := make([]int64, takenSetMax+10)
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	s.add(ids[:10])
	s.add(ids[10:])
	for _, id := range []int64{1, 10} {
		if s.has(id) {
			t.Fatalf("%d kept past the bound", id)
		}
	}
	for _, id := range []int64{11, int64(takenSetMax + 10)} {
		if !s.has(id) {
			t.Fatalf("%d forgotten", id)
		}
	}
	if s.has(int64(takenSetMax + 11)) {
		t.Fatal("an id never added")
	}
}

// SES notifications taken with another row's run: their own task ends
// without a query in the process that took them, and on the database's
// word in another process; applying them changes nothing either way.
func TestSESTakenRowsAcrossProcesses(t *testing.T) {
	t.Parallel()
	b := setupOutcomes(t)
	b.contact("ten_a", "cnt_1")
	b.send("ten_a", "snd_1", "cnt_1", "")
	sns := sestest.NewSNS(t)
	var ids []int64
	for _, kind := range []string{"Delivery", "Open", "Open"} {
		id, err := b.webhooks.AcceptFrom(b.ctx, ProviderSES, sestest.Body(sns.Notification(sestest.Event(kind, "snd_1", "ten_a", "cnt_1@example.com", "", at(1)), "2")))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if res, err := b.webhooks.ApplyBatch(b.ctx, ids[0]); err != nil || res.Applied != 3 {
		t.Fatalf("first run: %+v %v", res, err)
	}
	if !b.webhooks.taken.has(ids[1]) || !b.webhooks.taken.has(ids[2]) || b.webhooks.taken.has(ids[0]) {
		t.Fatal("the taken rows are not remembered after the commit")
	}
	other := &Webhooks{DB: b.db, Outcomes: b.outcomes}
	for _, w := range []*Webhooks{b.webhooks, other} {
		for _, id := range ids {
			if res, err := w.ApplyBatch(b.ctx, id); err != nil || !res.AlreadyApplied {
				t.Fatalf("row %d: %+v %v", id, res, err)
			}
		}
	}
	if s := b.getSend("ten_a", "snd_1"); s.OpenCount != 2 || s.DeliveryStatus != "delivered" {
		t.Fatalf("snd_1 %s opens %d", s.DeliveryStatus, s.OpenCount)
	}
	if got := fmt.Sprint(b.scalarInt(`SELECT count(*) FROM webhook_batches WHERE applied_at IS NULL`)); got != "0" {
		t.Fatalf("%s rows unapplied", got)
	}
}

func (b *outcomesBundle) scalarInt(q string) int64 {
	b.t.Helper()
	var n int64
	if err := b.db.Pool.QueryRow(b.ctx, q).Scan(&n); err != nil {
		b.t.Fatal(err)
	}
	return n
}
