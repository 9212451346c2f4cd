package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// settleAndGather waits for the system to finish what is due (scheduled
// sends, records `sending`, broadcasts, outbound webhooks), then gathers
// the facts the oracle judges.
func (r *run) settleAndGather(ctx context.Context, w *workload) (*Facts, error) {
	db, err := r.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer db.Close(ctx)
	// Settled: nothing due within a few minutes (a retry's backoff) is
	// open, twice in a row. What a window or the cap moved further
	// waits, and the oracle counts it apart.
	deadline := time.Now().Add(5 * time.Minute)
	quiet := 0
	for quiet < 2 && time.Now().Before(deadline) {
		var open int
		if err := db.QueryRow(ctx, `SELECT (SELECT count(*) FROM scheduled_sends WHERE status IN ('pending', 'claimed', 'failed')
				AND scheduled_for < now() + interval '3 minutes')
			+ (SELECT count(*) FROM sends WHERE sending)
			+ (SELECT count(*) FROM broadcasts WHERE status IN ('scheduled', 'sending', 'paused'))`).Scan(&open); err != nil {
			return nil, err
		}
		if open == 0 {
			quiet++
		} else {
			quiet = 0
		}
		sleep(ctx, 3*time.Second)
	}
	side, err := r.sideChecks(ctx, db, w)
	if err != nil {
		return nil, err
	}
	return r.gather(ctx, db, w, side)
}

func (r *run) connect(ctx context.Context) (*pgx.Conn, error) {
	var db *pgx.Conn
	var err error
	for range 60 { // PostgreSQL may be coming back from its restart
		if db, err = pgx.Connect(ctx, r.dbURL); err == nil {
			return db, nil
		}
		sleep(ctx, time.Second)
	}
	return nil, err
}

// gather reads the facts: the fake's log, the rows, what the clients were
// told.
func (r *run) gather(ctx context.Context, db *pgx.Conn, w *workload, side []Result) (*Facts, error) {
	f := &Facts{Seed: *seed, Now: time.Now(), RatePerSecond: ratePerSecond, CapPerDay: capPerDay, Window: r.window,
		Grace: grace, Requests: r.fake.snapshot(), Side: side, Kills: r.killsSoFar(),
		Steps: map[string][]string{"drip": {"s1", "s2", "s3"}, "trial": {"w1", "w2"}}}
	rows, err := db.Query(ctx, `SELECT id, contact_id, to_address, in_doubt, sending, coalesce(broadcast_id, ''), coalesce(scheduled_send_id, ''),
		sent_at FROM sends WHERE tenant_id = $1`, org)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var x Record
		if err := rows.Scan(&x.ID, &x.ContactID, &x.To, &x.InDoubt, &x.Sending, &x.BroadcastID, &x.ScheduledSendID, &x.SentAt); err != nil {
			return nil, err
		}
		f.Records = append(f.Records, x)
	}
	rows.Close()
	rows, err = db.Query(ctx, `SELECT id, enrolment_id, sequence_id, step_id, contact_id, status, coalesce(cancel_reason, ''),
		coalesce(send_id, ''), scheduled_for FROM scheduled_sends WHERE tenant_id = $1`, org)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var x Scheduled
		if err := rows.Scan(&x.ID, &x.EnrolmentID, &x.SequenceID, &x.StepID, &x.ContactID, &x.Status, &x.CancelReason,
			&x.SendID, &x.ScheduledFor); err != nil {
			return nil, err
		}
		f.Scheduled = append(f.Scheduled, x)
	}
	rows.Close()
	rows, err = db.Query(ctx, `SELECT broadcast_id, contact_id, status, coalesce(skip_reason, ''), coalesce(send_id, '')
		FROM broadcast_recipients WHERE tenant_id = $1`, org)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var x Recipient
		if err := rows.Scan(&x.BroadcastID, &x.ContactID, &x.Status, &x.SkipReason, &x.SendID); err != nil {
			return nil, err
		}
		f.Recipients = append(f.Recipients, x)
	}
	rows.Close()
	rows, err = db.Query(ctx, `SELECT id, template_id, coalesce(topic, ''), status FROM broadcasts WHERE tenant_id = $1`, org)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var x Broadcast
		if err := rows.Scan(&x.ID, &x.Template, &x.Topic, &x.Status); err != nil {
			return nil, err
		}
		f.Broadcasts = append(f.Broadcasts, x)
	}
	rows.Close()
	rows, err = db.Query(ctx, `SELECT id, sequence_id, contact_id, status, coalesce(exit_reason, '') FROM enrolments WHERE tenant_id = $1`, org)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var x Enrolment
		if err := rows.Scan(&x.ID, &x.SequenceID, &x.ContactID, &x.Status, &x.ExitReason); err != nil {
			return nil, err
		}
		f.Enrolments = append(f.Enrolments, x)
	}
	rows.Close()
	w.mu.Lock()
	for _, t := range w.told {
		f.Told = append(f.Told, t)
	}
	f.Consent = append(f.Consent, w.consentDone...)
	f.SignedUp = append(f.SignedUp, w.signedUp...)
	w.mu.Unlock()
	return f, nil
}

// sideChecks are the checks made against the database and the webhook
// receiver rather than the provider: accepted events stored, outbound
// webhooks delivered, metrics equal to the facts. Their results travel in
// the facts.
func (r *run) sideChecks(ctx context.Context, db *pgx.Conn, w *workload) ([]Result, error) {
	var out []Result
	gone := map[string]bool{}
	w.mu.Lock()
	ids, emails := append([]string{}, w.eventIDs...), append([]string{}, w.eventEmails...)
	for _, c := range w.consentDone {
		gone[c.Email] = gone[c.Email] || c.Kind == "deleted"
	}
	w.mu.Unlock()

	// Accepted events are stored (a deleted contact's went with it).
	var missing []string
	checked := 0
	for k, id := range ids {
		if gone[emails[k]] {
			continue
		}
		checked++
		var ok bool
		if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM events WHERE tenant_id = $1 AND id = $2)`, org, id).Scan(&ok); err != nil {
			return nil, err
		}
		if !ok {
			missing = append(missing, id+" of "+emails[k])
		}
	}
	out = append(out, result("events", fmt.Sprintf("accepted events not stored (of %d)", checked), missing))

	// Outbound webhooks: every message written with a fact was delivered
	// (at least once), and the receiver saw no message the database does
	// not hold.
	hookDeadline := time.Now().Add(2 * time.Minute)
	var pendingHooks int
	for {
		if err := db.QueryRow(ctx, `SELECT (SELECT count(*) FROM webhook_deliveries WHERE status <> 'succeeded') + (SELECT count(*) FROM webhook_outbox)`).Scan(&pendingHooks); err != nil {
			return nil, err
		}
		if pendingHooks == 0 || time.Now().After(hookDeadline) {
			break
		}
		sleep(ctx, time.Second)
	}
	known := map[string]bool{}
	rows, err := db.Query(ctx, `SELECT id FROM webhook_messages`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		known[id] = true
	}
	rows.Close()
	got := r.hooks.snapshot()
	var hookBad []string
	repeats := 0
	for id := range known {
		if got[id] == 0 {
			hookBad = append(hookBad, "not delivered: "+id)
		}
	}
	for id, n := range got {
		if !known[id] {
			hookBad = append(hookBad, "received without a fact: "+id)
		}
		repeats += n - 1
	}
	if pendingHooks > 0 {
		hookBad = append(hookBad, fmt.Sprintf("%d deliveries still not succeeded", pendingHooks))
	}
	out = append(out, result("webhooks", fmt.Sprintf("outbound webhook messages not delivered, or received without a fact (of %d; %d received more than once, at least once is the contract)",
		len(known), repeats), hookBad))

	// Metrics equal the facts. A deleted contact's records and scheduled
	// sends went with it while the metrics keep their counts: each one
	// widens the range by what it can have held.
	var m struct {
		Metrics map[string]any `json:"metrics"`
	}
	metricsOK := false
	for range 30 {
		if _, err := r.call(ctx, r.apis[0], "GET", "/api/metrics", nil, nil, &m); err == nil {
			metricsOK = true
			break
		}
		sleep(ctx, time.Second)
	}
	var sent, sched, cancelled int
	if err := db.QueryRow(ctx, `SELECT (SELECT count(*) FROM sends WHERE tenant_id = $1),
		(SELECT count(*) FROM scheduled_sends WHERE tenant_id = $1),
		(SELECT count(*) FROM scheduled_sends WHERE tenant_id = $1 AND status = 'cancelled')`, org).Scan(&sent, &sched, &cancelled); err != nil {
		return nil, err
	}
	deleted := 0
	for range gone {
		deleted++
	}
	var broadcasts int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM broadcasts WHERE tenant_id = $1`, org).Scan(&broadcasts); err != nil {
		return nil, err
	}
	// At most one record per broadcast and five per sequence step (no
	// transactional sends go to the deletion pool) went with each.
	perGone := broadcasts + 5
	num := func(k string) int { f, _ := m.Metrics[k].(float64); return int(f) }
	var metricBad []string
	within := func(name string, got, lo, hi int) {
		if got < lo || got > hi {
			metricBad = append(metricBad, fmt.Sprintf("%s: metrics %d, facts %d..%d", name, got, lo, hi))
		}
	}
	if !metricsOK {
		metricBad = append(metricBad, "GET /api/metrics never answered")
	} else {
		within("sent", num("sent"), sent, sent+perGone*deleted)
		within("scheduled", num("scheduled"), sched, sched+5*deleted)
		within("cancelled", num("cancelled"), cancelled, cancelled+5*deleted)
	}
	out = append(out, result("metrics", fmt.Sprintf("tenant metrics not equal to the facts (sent %d, scheduled %d, cancelled %d; %d contacts deleted)",
		num("sent"), num("scheduled"), num("cancelled"), deleted), metricBad))
	return out, nil
}

func result(name, summary string, examples []string) Result {
	rs := &results{}
	rs.add(name, summary, examples)
	return rs.list[0]
}
