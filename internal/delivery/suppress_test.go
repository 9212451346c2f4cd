package delivery

import (
	"testing"

	"tidings/internal/sendgridevents"
	"tidings/internal/store"
)

// Each outcome that suppresses writes the suppression list, by email, with
// its reason and send: a hard bounce, a complaint; a soft bounce writes
// none. The first reason stays.
func TestOutcomesWriteTheSuppressionList(t *testing.T) {
	t.Parallel()
	b := setupOutcomes(t)
	for _, c := range []string{"cnt_hard", "cnt_spam", "cnt_soft"} {
		b.contact("ten_a", c)
		b.send("ten_a", "snd_"+c, c, "")
	}
	in := []Outcome{
		{TenantID: "ten_a", SendID: "snd_cnt_hard", Kind: sendgridevents.BouncedHard},
		{TenantID: "ten_a", SendID: "snd_cnt_spam", Kind: sendgridevents.Complained},
		{TenantID: "ten_a", SendID: "snd_cnt_soft", Kind: sendgridevents.BouncedSoft},
	}
	if err := b.db.InTx(b.ctx, func(q *store.Tx) error { _, err := b.outcomes.Apply(b.ctx, q, in); return err }); err != nil {
		t.Fatal(err)
	}
	rows, err := b.db.Pool.Query(b.ctx, `SELECT email, reason, coalesce(send_id, '') FROM suppressions WHERE tenant_id = 'ten_a' ORDER BY email`)
	if err != nil {
		t.Fatal(err)
	}
	var got [][3]string
	for rows.Next() {
		var r [3]string
		_ = rows.Scan(&r[0], &r[1], &r[2])
		got = append(got, r)
	}
	rows.Close()
	want := [][3]string{{"cnt_hard@example.com", "hard_bounce", "snd_cnt_hard"}, {"cnt_spam@example.com", "complaint", "snd_cnt_spam"}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("suppressions %v, want %v", got, want)
	}
	// A later complaint of the bounced address keeps the first reason.
	b.send("ten_a", "snd_2", "cnt_hard", "")
	if err := b.db.InTx(b.ctx, func(q *store.Tx) error {
		_, err := b.outcomes.Apply(b.ctx, q, []Outcome{{TenantID: "ten_a", SendID: "snd_2", Kind: sendgridevents.Complained}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var reason string
	_ = b.db.Pool.QueryRow(b.ctx, `SELECT reason FROM suppressions WHERE tenant_id = 'ten_a' AND email = 'cnt_hard@example.com'`).Scan(&reason)
	if reason != "hard_bounce" {
		t.Fatalf("reason became %s", reason)
	}
	// Another tenant's list is its own.
	var n int
	_ = b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM suppressions WHERE tenant_id = 'ten_b'`).Scan(&n)
	if n != 0 {
		t.Fatalf("ten_b has %d suppressions", n)
	}
}

// Any insert path (a bulk import's INSERT ... SELECT from its staging
// table included) derives suppressed from the list: the trigger of schema
// 0023, not a check each store must remember.
func TestSuppressionListDerivesOnEveryInsert(t *testing.T) {
	t.Parallel()
	b := setupOutcomes(t)
	b.exec(`INSERT INTO suppressions (tenant_id, email, reason) VALUES ('ten_a', 'listed@example.com', 'complaint')`)
	b.exec(`INSERT INTO contacts (tenant_id, id, email)
		SELECT 'ten_a', 'cnt_' || email, email FROM (VALUES ('listed@example.com'), ('fresh@example.com')) staging (email)`)
	b.exec(`INSERT INTO contacts (tenant_id, id, email) VALUES ('ten_b', 'cnt_b', 'listed@example.com')`)
	var got string
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT string_agg(tenant_id || ':' || email || '=' || suppressed, ' ' ORDER BY tenant_id, email)
		FROM contacts`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if want := "ten_a:fresh@example.com=false ten_a:listed@example.com=true ten_b:listed@example.com=false"; got != want {
		t.Fatalf("%s, want %s", got, want)
	}
}
