package broadcasts

import (
	"context"
	"fmt"
	"slices"
	"time"

	"tidings/internal/apperr"
	"tidings/internal/localtime"
	"tidings/internal/store"
	"tidings/internal/tasks"
	"tidings/queries"
)

// Move is a status change a caller asks for.
type Move string

// Moves.
const (
	MoveSend   Move = "send"
	MovePause  Move = "pause"
	MoveResume Move = "resume"
	MoveCancel Move = "cancel"
)

// from is the status table of ADDENDUM 13: which statuses each move leaves.
var from = map[Move][]string{
	MoveSend:   {Draft, Scheduled},
	MovePause:  {Scheduled, Sending},
	MoveResume: {Paused},
	MoveCancel: {Draft, Scheduled, Sending, Paused},
}

// next is where move m takes a broadcast in status (resumeTo: where a
// paused one goes back to; startsLater: a send whose start is still to
// come). A move the table does not allow is a VALIDATION_ERROR naming both.
func next(status string, m Move, resumeTo string, startsLater bool) (string, error) {
	if !slices.Contains(from[m], status) {
		return "", apperr.Invalid("status", fmt.Sprintf("a %s broadcast cannot %s", status, m))
	}
	switch m {
	case MoveSend:
		if startsLater {
			return Scheduled, nil
		}
		return Sending, nil
	case MovePause:
		return Paused, nil
	case MoveResume:
		if resumeTo == Sending {
			return Sending, nil
		}
		return Scheduled, nil
	default:
		return Cancelled, nil
	}
}

// Send schedules the broadcast (its start is in the future) or starts it:
// sendAt, when given, replaces the stored one first. A started broadcast
// is `sending` at once; its audience is written by Start within seconds
// (a task, the sweep as the safety net).
func (s *Store) Send(ctx context.Context, tenantID, id string, sendAt *string) (queries.Broadcast, error) {
	return s.move(ctx, tenantID, id, func(q *store.Tx, b queries.Broadcast) (queries.Broadcast, error) {
		f := fieldsOf(b)
		if sendAt != nil {
			if err := f.merge(Input{SendAt: sendAt, SetSendAt: true}); err != nil {
				return b, err
			}
		}
		if err := s.checkRefs(ctx, tenantID, f); err != nil {
			return b, err
		}
		now := s.now()
		at, err := s.startInstant(ctx, q, tenantID, f, now)
		if err != nil {
			return b, err
		}
		status, err := next(b.Status, MoveSend, "", at.After(now))
		if err != nil {
			return b, err
		}
		if sendAt != nil {
			if b, err = q.BroadcastUpdate(ctx, queries.BroadcastUpdateParams{TenantID: tenantID, ID: id,
				Name: f.name, TemplateID: f.templateID, SegmentID: f.segmentID, CampaignID: f.campaignID,
				FromAddress: f.from, Topic: f.topic, SendAt: f.sendAt, LocalSendAt: f.localSendAt,
				LocalTime: f.localTime, StartsAt: b.StartsAt, Experiment: b.Experiment}); err != nil {
				return b, err
			}
		}
		if status == Sending {
			at = now
		}
		s.scheduleStart(q, tenantID, id, at)
		return q.BroadcastSetStatus(ctx, queries.BroadcastSetStatusParams{TenantID: tenantID, ID: id,
			Status: status, StartsAt: &at})
	})
}

// Pause holds a scheduled or sending broadcast: nothing more leaves (a
// message already handed to the provider is settled as usual).
func (s *Store) Pause(ctx context.Context, tenantID, id string) (queries.Broadcast, error) {
	return s.move(ctx, tenantID, id, func(q *store.Tx, b queries.Broadcast) (queries.Broadcast, error) {
		status, err := next(b.Status, MovePause, "", false)
		if err != nil {
			return b, err
		}
		return q.BroadcastSetStatus(ctx, queries.BroadcastSetStatusParams{TenantID: tenantID, ID: id,
			Status: status, StartsAt: b.StartsAt, ResumeTo: &b.Status})
	})
}

// Resume takes a paused broadcast back to where it was; what came due
// meanwhile goes out at once.
func (s *Store) Resume(ctx context.Context, tenantID, id string) (queries.Broadcast, error) {
	return s.move(ctx, tenantID, id, func(q *store.Tx, b queries.Broadcast) (queries.Broadcast, error) {
		status, err := next(b.Status, MoveResume, deref(b.ResumeTo), false)
		if err != nil {
			return b, err
		}
		at := s.now()
		if status == Scheduled && b.StartsAt != nil && b.StartsAt.After(at) {
			at = *b.StartsAt
		}
		s.scheduleStart(q, tenantID, id, at)
		if status == Sending && b.Snapshotted {
			q.Schedule(tasks.Timer{TenantID: tenantID, ID: id, At: s.now()})
		}
		return q.BroadcastSetStatus(ctx, queries.BroadcastSetStatusParams{TenantID: tenantID, ID: id,
			Status: status, StartsAt: b.StartsAt})
	})
}

// Cancel stops the broadcast: every recipient not yet sent is cancelled.
func (s *Store) Cancel(ctx context.Context, tenantID, id string) (queries.Broadcast, error) {
	return s.move(ctx, tenantID, id, func(q *store.Tx, b queries.Broadcast) (queries.Broadcast, error) {
		status, err := next(b.Status, MoveCancel, "", false)
		if err != nil {
			return b, err
		}
		if err := q.BroadcastCancelRecipients(ctx, queries.BroadcastCancelRecipientsParams{TenantID: tenantID, ID: id}); err != nil {
			return b, err
		}
		return q.BroadcastSetStatus(ctx, queries.BroadcastSetStatusParams{TenantID: tenantID, ID: id,
			Status: status, StartsAt: b.StartsAt})
	})
}

// move runs fn on the locked broadcast.
func (s *Store) move(ctx context.Context, tenantID, id string,
	fn func(q *store.Tx, b queries.Broadcast) (queries.Broadcast, error)) (queries.Broadcast, error) {
	var out queries.Broadcast
	err := s.DB.InTx(ctx, func(q *store.Tx) error {
		b, err := q.BroadcastGetForUpdate(ctx, queries.BroadcastGetForUpdateParams{TenantID: tenantID, ID: id})
		if err != nil {
			return notFound(err)
		}
		out, err = fn(q, b)
		return err
	})
	return out, err
}

// scheduleStart sets the start task's timer once q commits.
func (s *Store) scheduleStart(q *store.Tx, tenantID, id string, at time.Time) {
	q.AfterCommit(func(ctx context.Context) { s.DB.Tasks.BroadcastStart(ctx, tenantID, id, at) })
}

// startInstant is when the broadcast starts: its sendAt (none: now); for a
// local-time broadcast the earliest instant its wall-clock time occurs in
// any zone of the tenant's contacts, or the tenant's own.
func (s *Store) startInstant(ctx context.Context, q *store.Tx, tenantID string, f fields, now time.Time) (time.Time, error) {
	if !f.localTime {
		if f.sendAt == nil || f.sendAt.Before(now) {
			return now, nil
		}
		return *f.sendAt, nil
	}
	if f.localSendAt == nil {
		return now, nil
	}
	wall, _ := localtime.ParseWall(*f.localSendAt)
	zones, tz, err := zonesOf(ctx, q.Queries, tenantID)
	if err != nil {
		return now, err
	}
	first := localtime.At(wall, localtime.Zone(nil, tz))
	for _, z := range zones {
		if at := localtime.At(wall, localtime.Zone(z, tz)); at.Before(first) {
			first = at
		}
	}
	if first.Before(now) {
		return now, nil
	}
	return first, nil
}

// zonesOf reads the distinct zone names of the tenant's contacts and the
// tenant's own zone.
func zonesOf(ctx context.Context, q *queries.Queries, tenantID string) ([]string, string, error) {
	t, err := q.TenantGet(ctx, tenantID)
	if err != nil {
		return nil, "", err
	}
	zones, err := q.BroadcastTenantZones(ctx, tenantID)
	return zones, t.Timezone, err
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
