package delivery

import (
	"testing"

	"tidings/internal/contacts"
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

// A hard bounce suppresses its contact even when it does not change its
// send's status: here the send complained (suppressed), the suppression
// was lifted by hand, and the hard bounce that follows (complained stays:
// it outranks bounced) suppresses the contact again. Suppressing only on a
// status change would let mail go on to an address known to bounce.
func TestHardBounceSuppressesWithoutAStatusChange(t *testing.T) {
	t.Parallel()
	b := setupOutcomes(t)
	b.contact("ten_a", "cnt_1")
	b.send("ten_a", "snd_1", "cnt_1", "")
	b.apply(Outcome{TenantID: "ten_a", SendID: "snd_1", Kind: sendgridevents.Complained})
	if !b.getContact("ten_a", "cnt_1").Suppressed {
		t.Fatal("the complaint did not suppress")
	}
	if err := (&contacts.Suppressions{DB: b.db}).Remove(b.ctx, "ten_a", "cnt_1@example.com"); err != nil {
		t.Fatal(err)
	}
	if b.getContact("ten_a", "cnt_1").Suppressed {
		t.Fatal("the suppression was not lifted")
	}
	b.apply(Outcome{TenantID: "ten_a", SendID: "snd_1", Kind: sendgridevents.BouncedHard})
	if s := b.getSend("ten_a", "snd_1"); s.DeliveryStatus != sendgridevents.StatusComplained {
		t.Fatalf("status %s: the case needs the bounce to leave it complained", s.DeliveryStatus)
	}
	if !b.getContact("ten_a", "cnt_1").Suppressed {
		t.Fatal("the hard bounce did not suppress the contact")
	}
	var reason string
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT reason FROM suppressions WHERE tenant_id = 'ten_a' AND email = 'cnt_1@example.com'`).Scan(&reason); err != nil || reason != "hard_bounce" {
		t.Fatalf("suppression %q, %v", reason, err)
	}
}
