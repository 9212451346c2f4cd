package worker

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"tidings/internal/app"
	"tidings/internal/app/apptest"
	"tidings/internal/segments"
	"tidings/internal/tasks"
)

// A segment compute queued for the segments role is computed by a process
// of that role: the membership is written, and a compute asked for while
// one waits is that one.
func TestSegmentComputeTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := newQueue(t)
	log := slog.New(slog.DiscardHandler)
	d := apptest.Services(t, app.Infra{Tasks: tasks.NewClient(q.client, q.inspector, log)})
	if _, err := d.DB.Pool.Exec(ctx, `INSERT INTO tenants (id, name) VALUES ('ten_seg', 'S');
		INSERT INTO contacts (tenant_id, id, email, properties) VALUES
			('ten_seg', 'cnt_1', 'a@example.com', '{"plan": "pro"}'),
			('ten_seg', 'cnt_2', 'b@example.com', '{"plan": "free"}')`); err != nil {
		t.Fatal(err)
	}
	name := "Pro"
	seg, err := d.Segments.Create(ctx, "ten_seg", segments.Input{Name: &name,
		Rules: json.RawMessage(`{"operator": "and", "conditions": [{"type": "property", "field": "plan", "operator": "equals", "value": "pro"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false} {
		queued, err := d.Tasks.SegmentCompute(ctx, "ten_seg", seg.ID)
		if err != nil || queued != want {
			t.Fatalf("SegmentCompute #%d: %v, %v; want %v", i+1, queued, err, want)
		}
	}
	srv := NewServer(q.opt, log, 2, []Role{RoleSegments})
	if err := srv.Start(NewMux(d)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	waitFor(t, 30*time.Second, func() bool {
		s, _, err := d.Segments.Get(ctx, "ten_seg", seg.ID)
		return err == nil && s.LastComputedAt != nil
	})
	var members []string
	rows, err := d.DB.Pool.Query(ctx, `SELECT contact_id FROM segment_members WHERE tenant_id = 'ten_seg' AND segment_id = $1`, seg.ID)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		members = append(members, id)
	}
	if rows.Err() != nil || len(members) != 1 || members[0] != "cnt_1" {
		t.Fatalf("members %v (%v), want [cnt_1]", members, rows.Err())
	}
}
