package broadcasts_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"tidings/internal/segments"
)

// BenchmarkSnapshot: the audience of a broadcast to a segment of
// BROADCAST_SNAPSHOT_N (default 100,000) contacts (a property rule every
// contact matches), written by Start, against a bare INSERT ... SELECT of
// the same rows by the same predicate into an unindexed copy of the table
// in the same run.
//
//	BROADCAST_SNAPSHOT_N=1000000 go test -run '^$' -bench Snapshot -benchtime 1x -timeout 30m ./internal/broadcasts/
func BenchmarkSnapshot(b *testing.B) {
	n := 100000
	if v := os.Getenv("BROADCAST_SNAPSHOT_N"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	f := newFixture(b, nil)
	ctx := context.Background()
	f.exec(`INSERT INTO contacts (tenant_id, id, email, properties, created_at)
		SELECT $1, 'cnt_' || g, 'c' || g || '@example.com', '{"plan":"pro"}', now() - interval '1 hour'
		FROM generate_series(1, $2::int) g`, tenant, n)
	f.exec(`VACUUM ANALYZE contacts`)
	f.exec(`INSERT INTO broadcasts (tenant_id, id, name, template_id, segment_id, status, starts_at, started_at)
		VALUES ($1, 'brd_snap', 'S', 'news', $2, 'sending', now(), now())`, tenant, f.segment)
	b.ResetTimer()
	start := time.Now()
	if err := f.svc.Broadcasts.Start(ctx, tenant, "brd_snap"); err != nil {
		b.Fatal(err)
	}
	snap := time.Since(start)
	b.StopTimer()
	var got int64
	if err := f.svc.DB.Pool.QueryRow(ctx, `SELECT recipients FROM broadcasts WHERE id = 'brd_snap'`).Scan(&got); err != nil || int(got) != n {
		b.Fatalf("recipients %d, want %d (%v)", got, n, err)
	}
	pred, args, err := segments.Predicate(ctx, f.svc.DB.Queries, tenant, f.segment, 3)
	if err != nil {
		b.Fatal(err)
	}
	f.exec(`CREATE TABLE bare (LIKE broadcast_recipients INCLUDING DEFAULTS)`)
	start = time.Now()
	f.exec(fmt.Sprintf(`INSERT INTO bare (tenant_id, broadcast_id, contact_id, email, scheduled_for)
		SELECT c.tenant_id, $2, c.id, c.email, now() FROM contacts c WHERE c.tenant_id = $1 AND (%s)`, pred),
		append([]any{tenant, "brd_bare"}, args...)...)
	bare := time.Since(start)
	b.ReportMetric(snap.Seconds(), "snapshot-s")
	b.ReportMetric(bare.Seconds(), "bare-insert-s")
	b.ReportMetric(snap.Seconds()/bare.Seconds(), "ratio")
	b.ReportMetric(float64(n)/snap.Seconds(), "recipients/s")
}
