package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"tidings/internal/tasks"
)

// Contact imports (docs/decisions.md "Contact import"). The api stages an
// import's rows and commits them before answering, then queues
// TypeContactImport (task id tasks.ImportTaskID); the task processes the
// rows a chunk at a time (contacts.Imports.Run). The sweep queues the task
// again for a running import that has not moved for importStaleAfter: its
// enqueue failed, Redis lost it, or its worker died; it deletes the
// staging rows a finished import still has (its task died just after the
// last chunk), and the expired places of uploads whose api instance died
// (they no longer count, contacts.Imports.BeginUpload).
const (
	importSweepEvery   = 30 * time.Second
	importStaleAfter   = time.Minute
	importSweepBatch   = 100
	importSweepTimeout = 25 * time.Second
)

// HandleContactImport processes one import; exported for tests.
func HandleContactImport(d Deps) asynq.HandlerFunc {
	return func(ctx context.Context, t *asynq.Task) error {
		var p tasks.ImportPayload
		if err := json.Unmarshal(t.Payload(), &p); err != nil || p.TenantID == "" || p.ID == "" {
			return fmt.Errorf("contact import payload %q: %w", t.Payload(), asynq.SkipRetry)
		}
		if err := d.Imports.Run(ctx, p.TenantID, p.ID); err != nil {
			return err
		}
		imp, err := d.Imports.Get(ctx, p.TenantID, p.ID)
		if err == nil {
			d.Log.Info("contact import ran", "tenant_id", p.TenantID, "import_id", p.ID, "status", imp.Status,
				"total", imp.Total, "processed", imp.Processed, "created", imp.Created, "updated", imp.Updated,
				"failed", imp.Failed)
		}
		return nil
	}
}

func importSweepPeriodic() Periodic {
	return Periodic{Name: tasks.TypeContactImportSweep, Every: importSweepEvery, Queue: tasks.QueueMaintenance, Task: func() *asynq.Task {
		return asynq.NewTask(tasks.TypeContactImportSweep, nil, asynq.MaxRetry(0), asynq.Timeout(importSweepTimeout))
	}}
}

// handleContactImportSweep queues the task of every running import that
// has stopped moving; one whose task is waiting or running is left to it.
func handleContactImportSweep(d Deps) asynq.HandlerFunc {
	return func(ctx context.Context, _ *asynq.Task) error {
		stale, err := d.Imports.Stale(ctx, time.Now().Add(-importStaleAfter), importSweepBatch)
		if err != nil {
			return err
		}
		queued := 0
		for _, r := range stale {
			ok, err := d.Tasks.RequeueContactImport(ctx, r.TenantID, r.ID)
			if err != nil {
				return err
			}
			if ok {
				queued++
			}
		}
		if queued > 0 {
			d.Log.Warn("contact imports re-enqueued", "count", queued)
		}
		// Finished imports whose task died before deleting their staging
		// rows.
		left, err := d.Imports.StagedLeft(ctx, time.Now().Add(-importStaleAfter), importSweepBatch)
		if err != nil {
			return err
		}
		for _, r := range left {
			if err := d.Imports.DropRows(ctx, r.TenantID, r.ID); err != nil {
				return err
			}
		}
		_, err = d.Imports.PurgeUploads(ctx)
		return err
	}
}
