package worker

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hibiken/asynq"

	"tidings/internal/apperr"
	"tidings/internal/tasks"
)

// Segment computes (ADDENDUM 10, 26). TypeSegmentCompute runs on the
// segments role so that a compute over a large tenant, one long statement,
// holds a segments worker and never a slot of the sends; it keeps the
// SEGMENT_COMPUTE_INTERVAL of every compute (segments.Store.ComputeThrottled).

// HandleSegmentCompute computes one segment; exported for tests and the
// roles benchmark.
func HandleSegmentCompute(d Deps) asynq.HandlerFunc {
	return func(ctx context.Context, t *asynq.Task) error {
		var p tasks.SegmentPayload
		if err := json.Unmarshal(t.Payload(), &p); err != nil || p.TenantID == "" || p.ID == "" {
			return fmt.Errorf("segment compute payload %q: %w", t.Payload(), asynq.SkipRetry)
		}
		res, err := d.Segments.ComputeThrottled(ctx, p.TenantID, p.ID)
		switch {
		case err == nil:
			d.Log.Info("segment computed", "tenant_id", p.TenantID, "segment_id", p.ID,
				"processed", res.Processed, "changed", res.Changed)
			return nil
		case apperr.IsKind(err, apperr.KindRateLimited):
			// Computed within the interval: that compute is this one.
			return nil
		case apperr.IsKind(err, apperr.KindNotFound), apperr.IsKind(err, apperr.KindInvalid):
			// Deleted or disabled meanwhile: nothing to compute.
			return fmt.Errorf("segment %s: %w: %w", p.ID, err, asynq.SkipRetry)
		default:
			return err
		}
	}
}
