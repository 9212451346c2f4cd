package worker

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"tidings/internal/store"
	"tidings/internal/testenv"
	"tidings/internal/throttle"
)

// heldTables are the tables of held work: a statement naming one of them
// reads or claims held rows (or looks for them).
var heldTables = []string{"broadcast_recipients", "scheduled_sends"}

// stmtCounter counts the statements the services' pool runs that name a
// held table, and the rows they return or change.
type stmtCounter struct{ stmts, rows atomic.Int64 }

type heldStmtKey struct{}

func (c *stmtCounter) start(ctx context.Context, sql string) context.Context {
	for _, t := range heldTables {
		if strings.Contains(sql, t) {
			c.stmts.Add(1)
			return context.WithValue(ctx, heldStmtKey{}, true)
		}
	}
	return ctx
}

func (c *stmtCounter) end(ctx context.Context, tag int64) {
	if ctx.Value(heldStmtKey{}) != nil {
		c.rows.Add(tag)
	}
}

func (c *stmtCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	return c.start(ctx, d.SQL)
}

func (c *stmtCounter) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	c.end(ctx, d.CommandTag.RowsAffected())
}

func (c *stmtCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (c *stmtCounter) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	c.end(c.start(ctx, d.SQL), d.CommandTag.RowsAffected())
}

func (c *stmtCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// redisCounter counts the commands sent to the throttle's Redis.
type redisCounter struct{ n atomic.Int64 }

func (r *redisCounter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (r *redisCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmd)
	}
}

func (r *redisCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// A held recipient or step costs nothing while it is held: with a
// broadcast's recipients and a sequence's step held by their destination's
// bucket (google.com at 2 a minute: one message, then one each 30 s), the
// worker's own server (the timers the holds set) runs no statement that
// names broadcast_recipients or scheduled_sends, and sends no command to
// the throttle's Redis, until the first hold ends. The periodic sweeps are
// not running: they cost one look a period whatever is held. A hold that
// woke its work at once (until now) would claim and judge it again and
// again: this test then fails.
func TestHeldWorkCostsNothingWhileHeld(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	stmts := &stmtCounter{}
	s := newSeqBenchOn(t, 10, func(url string) *store.DB {
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ConnConfig.Tracer = stmts
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return store.New(pool)
	})
	s.exec(`UPDATE contacts SET created_at = now() - interval '1 hour', email = 'g' || substr(id, 5) || '@gmail.com'
		WHERE tenant_id = $1`, benchTenant)
	s.exec(`INSERT INTO segments (tenant_id, id, name, rules) VALUES ($1, 'seg_all', 'All', '{"operator":"and","conditions":[]}')`, benchTenant)
	def := s.putSequence("held", "name: Held\ntrigger: {event: go}\nsteps: [{send: reset}]\n")
	s.exec(`INSERT INTO enrolments (tenant_id, id, sequence_id, contact_id, current_step, current_step_index)
		VALUES ($1, 'enr_1', 'held', 'cnt_1', $2, 1)`, benchTenant, def.Steps[0].ID)
	s.exec(`INSERT INTO scheduled_sends (tenant_id, id, contact_id, enrolment_id, sequence_id, sequence_version, step_id, template_id, scheduled_for)
		VALUES ($1, 'sch_1', 'cnt_1', 'enr_1', 'held', 1, $2, 'reset', now())`, benchTenant, def.Steps[0].ID)
	z := testenv.DNS(t)
	z.Add(t, "gmail.com. 3600 IN MX 5 gmail-smtp-in.l.google.com.")
	rdb, prefix := testenv.Redis(t)
	calls := &redisCounter{}
	rdb.AddHook(calls)
	s.svc.Sender.Throttle = throttle.New(rdb, prefix, []throttle.Limit{{Suffix: "google.com", PerMinute: 2}}, &throttle.MX{Server: z.Addr})

	srv := NewServer(s.opt, s.log, 4, AllRoles)
	if err := srv.Start(NewMux(s.svc)); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	start := time.Now()
	s.exec(`INSERT INTO broadcasts (tenant_id, id, name, template_id, segment_id, status, starts_at)
		VALUES ($1, 'brd_held', 'Held', 'reset', 'seg_all', 'scheduled', now())`, benchTenant)
	s.tasks.BroadcastStart(ctx, benchTenant, "brd_held", time.Now())
	_, _ = s.tasks.FanOut(ctx, 1) // the step is due now

	// Everything held but the one message the bucket had (the test's own
	// queries go through its own pool, not the counted one).
	var firstHold *time.Time
	for {
		var held, sent int
		if err := s.db.Pool.QueryRow(ctx, `SELECT
				(SELECT count(*) FROM broadcast_recipients WHERE tenant_id = $1 AND status = 'queued' AND held_by = 'destination:google.com'
				   AND claimed_at IS NULL)
				+ (SELECT count(*) FROM scheduled_sends WHERE tenant_id = $1 AND status = 'pending' AND held_by = 'destination:google.com'),
				(SELECT count(*) FROM sends WHERE tenant_id = $1),
				least((SELECT min(scheduled_for) FROM broadcast_recipients WHERE tenant_id = $1 AND status = 'queued'),
				      (SELECT min(scheduled_for) FROM scheduled_sends WHERE tenant_id = $1 AND status = 'pending'))`,
			benchTenant).Scan(&held, &sent, &firstHold); err != nil {
			t.Fatal(err)
		}
		if held == 10 && sent == 1 {
			break
		}
		if time.Since(start) > 25*time.Second {
			t.Fatalf("%d held, %d sent; want 10 held (9 recipients, 1 step) and 1 sent", held, sent)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Let the dispatch that held the last of them end (its completion
	// check), then count over a window that ends well before the first
	// hold does.
	time.Sleep(time.Second)
	window := 3 * time.Second
	stmts0, rows0, calls0 := stmts.stmts.Load(), stmts.rows.Load(), calls.n.Load()
	time.Sleep(window)
	dStmts, dRows, dCalls := stmts.stmts.Load()-stmts0, stmts.rows.Load()-rows0, calls.n.Load()-calls0
	t.Logf("over %v while held: %d statements naming %v (%d rows), %d throttle Redis commands", window, dStmts, heldTables, dRows, dCalls)
	if dStmts != 0 || dRows != 0 || dCalls != 0 {
		t.Fatalf("held work cost %d statements (%d rows) and %d Redis commands over %v; want none", dStmts, dRows, dCalls, window)
	}
	if firstHold.Before(time.Now()) {
		t.Fatalf("the first hold ended at %v, within the window watched", *firstHold)
	}
}
