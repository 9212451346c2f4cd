package store_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"tidings/internal/store"
	"tidings/internal/testenv"
	"tidings/queries"
)

// resourcesOf lists the resource ids of the entries of request rid.
func resourcesOf(t *testing.T, db *store.DB, rid string) []string {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), `SELECT resource_id FROM audit_log WHERE request_id = $1 ORDER BY resource_id`, rid)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	return out
}

// The request's entry goes with the first of its transactions that
// commits, once: a transaction that fails hands it on, one begun without
// it (WithoutAudit) or with nothing to audit writes none, and a write of
// several resources names each.
func TestAuditWrittenByTheWritesTransaction(t *testing.T) {
	t.Parallel()
	db := testenv.DB(t)
	ctx := context.Background()
	if _, err := db.TenantInsert(ctx, queries.TenantInsertParams{ID: "ten_a", Name: "A"}); err != nil {
		t.Fatal(err)
	}
	entry := func(rid string) *store.Audit {
		return &store.Audit{TenantID: "ten_a", ActorType: "apiKey", ActorID: "key_1", Action: "contact.create",
			ResourceType: "contact", RequestID: rid, IP: "::1"}
	}
	boom := errors.New("boom")
	tests := []struct {
		desc string
		run  func(ctx context.Context) error
		want []string
	}{
		{desc: "committed with the write", want: []string{"cnt_1"}, run: func(ctx context.Context) error {
			return db.InTx(ctx, func(q *store.Tx) error { q.AuditResource("cnt_1"); return nil })
		}},
		{desc: "a failed write leaves none", want: []string{}, run: func(ctx context.Context) error {
			_ = db.InTx(ctx, func(q *store.Tx) error { q.AuditResource("cnt_1"); return boom })
			return nil
		}},
		{desc: "a failed first transaction hands it to the next", want: []string{"cnt_2"}, run: func(ctx context.Context) error {
			_ = db.InTx(ctx, func(q *store.Tx) error { q.AuditResource("cnt_1"); return boom })
			return db.InTx(ctx, func(q *store.Tx) error { q.AuditResource("cnt_2"); return nil })
		}},
		{desc: "written once over several transactions", want: []string{"cnt_1"}, run: func(ctx context.Context) error {
			for _, id := range []string{"cnt_1", "cnt_2"} {
				if err := db.InTx(ctx, func(q *store.Tx) error { q.AuditResource(id); return nil }); err != nil {
					return err
				}
			}
			return nil
		}},
		{desc: "hidden from a step that is not the write", want: []string{"snd_2"}, run: func(ctx context.Context) error {
			if err := db.InTx(store.WithoutAudit(ctx), func(q *store.Tx) error { q.AuditResource("snd_1"); return nil }); err != nil {
				return err
			}
			return db.InTx(ctx, func(q *store.Tx) error { q.AuditResource("snd_2"); return nil })
		}},
		{desc: "one entry per resource", want: []string{"snd_1", "snd_2", "snd_3"}, run: func(ctx context.Context) error {
			return db.InTx(ctx, func(q *store.Tx) error { q.AuditResources("snd_3", "snd_1", "snd_2"); return nil })
		}},
		{desc: "a panic hands it back", want: []string{"cnt_9"}, run: func(ctx context.Context) error {
			func() {
				defer func() { _ = recover() }()
				_ = db.InTx(ctx, func(q *store.Tx) error { panic("boom") })
			}()
			return db.InTx(ctx, func(q *store.Tx) error { q.AuditResource("cnt_9"); return nil })
		}},
	}
	for i, tt := range tests {
		rid := "req_" + string(rune('a'+i))
		a := entry(rid)
		if err := tt.run(store.WithAudit(ctx, a)); err != nil {
			t.Fatalf("%s: %v", tt.desc, err)
		}
		if got := resourcesOf(t, db, rid); !slices.Equal(got, tt.want) {
			t.Errorf("%s: entries about %v, want %v", tt.desc, got, tt.want)
		}
		if a.Written() != (len(tt.want) > 0) {
			t.Errorf("%s: Written() = %v", tt.desc, a.Written())
		}
	}

	// Named by the route, the entry goes with the COMMIT, its text as it is:
	// quotes and backslashes stay as they are; a failed write takes it
	// back.
	odd := `it's a \'quoted\' id`
	for _, fail := range []bool{true, false} {
		fixed := entry("req_fixed")
		fixed.ResourceID = odd
		err := db.InTx(store.WithAudit(ctx, fixed), func(q *store.Tx) error {
			q.AuditResource("ignored: the route named it")
			if fail {
				return boom
			}
			return nil
		})
		want := []string{odd}
		if fail {
			want = []string{}
		}
		if got := resourcesOf(t, db, "req_fixed"); (err != nil) != fail || !slices.Equal(got, want) || fixed.Written() == fail {
			t.Fatalf("fail %v: %v, entries about %q, want %q", fail, err, got, want)
		}
	}

	// Entries carried into another's transaction (a group commit's batch).
	a, c := entry("req_many_a"), entry("req_many_c")
	err := db.InTx(ctx, func(q *store.Tx) error {
		return q.AuditMany(ctx, []*store.Audit{a, c}, []string{"evt_a", "evt_c"})
	})
	if err != nil || !a.Written() || !c.Written() {
		t.Fatalf("AuditMany: %v, written %v %v", err, a.Written(), c.Written())
	}
	if got := resourcesOf(t, db, "req_many_c"); !slices.Equal(got, []string{"evt_c"}) {
		t.Fatalf("AuditMany: %v", got)
	}
	// Without a transaction that took it, the request writes it itself,
	// once.
	late := entry("req_late")
	late.ResourceID = "tpl_1"
	for range 2 {
		if err := db.WriteAudit(ctx, late); err != nil {
			t.Fatal(err)
		}
	}
	if got := resourcesOf(t, db, "req_late"); !slices.Equal(got, []string{"tpl_1"}) {
		t.Fatalf("WriteAudit: %v", got)
	}
}

// countingConn counts the messages the client sends: each Write is one
// flush of the client's buffer, so one round trip of the protocol.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// An entry costs its write no round trip, whether the route named the
// resource (an update) or the transaction names it (a create): the
// transaction sends as many messages as the same one without an entry,
// and the entry is there.
func TestAuditEntryCostsNoRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := testenv.DB(t)
	if _, err := base.TenantInsert(ctx, queries.TenantInsertParams{ID: "ten_a", Name: "A"}); err != nil {
		t.Fatal(err)
	}
	var writes atomic.Int64
	cfg := base.Pool.Config()
	cfg.MaxConns, cfg.MinConns = 1, 0 // one connection: its prepared statements are warm after the first round
	dialer := &net.Dialer{}
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{c, &writes}, nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	db := store.New(pool)
	n := 0
	write := func(ctx context.Context, create bool) int64 {
		n++
		before := writes.Load()
		err := db.InTx(ctx, func(q *store.Tx) error {
			_, err := q.ContactInsert(ctx, queries.ContactInsertParams{TenantID: "ten_a", ID: fmt.Sprintf("cnt_%d", n),
				Email: fmt.Sprintf("c%d@example.com", n), Properties: []byte(`{}`)})
			if create {
				q.AuditResource(fmt.Sprintf("cnt_%d", n))
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return writes.Load() - before
	}
	entry := func(rid, resourceID string) *store.Audit {
		return &store.Audit{TenantID: "ten_a", ActorType: "apiKey", ActorID: "key_1", Action: "contact.create",
			ResourceType: "contact", ResourceID: resourceID, RequestID: rid, IP: "::1"}
	}
	for round := range 2 { // the first round prepares the statements
		bare := write(ctx, false)
		created := write(store.WithAudit(ctx, entry(fmt.Sprintf("req_create_%d", round), "")), true)
		named := write(store.WithAudit(ctx, entry(fmt.Sprintf("req_named_%d", round), "cnt_route")), false)
		if round == 0 {
			continue
		}
		if created != bare || named != bare {
			t.Errorf("messages sent: %d without an entry, %d with one the transaction named, %d with one the route named",
				bare, created, named)
		}
		if got := resourcesOf(t, base, "req_create_1"); !slices.Equal(got, []string{fmt.Sprintf("cnt_%d", n-1)}) {
			t.Errorf("the create's entry is about %v", got)
		}
		if got := resourcesOf(t, base, "req_named_1"); !slices.Equal(got, []string{"cnt_route"}) {
			t.Errorf("the update's entry is about %v", got)
		}
	}
}
