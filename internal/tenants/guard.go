package tenants

import (
	"context"

	"tidings/internal/store"
	"tidings/queries"
)

// The deliverability guard (ADDENDUM 17): over a tenant's last
// GuardWindow outcomes since its last resume (sends delivered, bounced or
// complained), a complaint rate above MaxComplaintRate or a hard-bounce
// rate above MaxBounceRate pauses its sending, once at least MinSample
// outcomes are in the window. Gmail's and Yahoo's bulk-sender rules reject
// senders past 0.3% complaints; providers suspend accounts at a few
// percent of hard bounces, and one tenant must not burn the shared
// reputation for every other.
const (
	GuardWindow      = 1000
	MaxComplaintRate = 0.003
	MaxBounceRate    = 0.05
)

// Pause reasons.
const (
	PausedComplaintRate = "complaint_rate"
	PausedBounceRate    = "bounce_rate"
	PausedManual        = "manual"
)

// Rates are a tenant's window of outcomes.
type Rates struct {
	Outcomes      int
	ComplaintRate float64
	BounceRate    float64
}

// Judge is the guard's rule, pure: the reason to pause for a window of
// outcomes with complaints and hard bounces among them, or "" to go on.
// Complaints are judged first: they are the stronger signal to mailbox
// providers.
func Judge(outcomes, complaints, hardBounces, minSample int) string {
	if outcomes < max(minSample, 1) {
		return ""
	}
	switch {
	case float64(complaints) > MaxComplaintRate*float64(outcomes):
		return PausedComplaintRate
	case float64(hardBounces) > MaxBounceRate*float64(outcomes):
		return PausedBounceRate
	}
	return ""
}

// Guard applies the rule to tenants whose outcomes just changed.
type Guard struct {
	// MinSample is PAUSE_MIN_SAMPLE.
	MinSample int
	// OnPause, when set, runs after the commit of a pause (telemetry).
	OnPause func(reason string)
}

// RatesOf reads a tenant's window.
func RatesOf(ctx context.Context, q *queries.Queries, tenantID string) (Rates, error) {
	w, err := q.GuardWindow(ctx, queries.GuardWindowParams{TenantID: tenantID, Size: GuardWindow})
	if err != nil {
		return Rates{}, err
	}
	r := Rates{Outcomes: int(w.Outcomes)}
	if w.Outcomes > 0 {
		r.ComplaintRate = float64(w.Complaints) / float64(w.Outcomes)
		r.BounceRate = float64(w.HardBounces) / float64(w.Outcomes)
	}
	return r, nil
}

// Check judges the tenant's window inside the transaction that applied its
// outcomes and pauses it when the rule says so; it returns the reason, ""
// when nothing happened (the rule holds, or the tenant was paused
// already). The pause holds queued sequence and broadcast sends (they wait
// for the resume) and makes transactional sends FORBIDDEN; the database
// emits tenant.paused for outbound webhooks.
func (g Guard) Check(ctx context.Context, q *store.Tx, tenantID string) (string, error) {
	w, err := q.GuardWindow(ctx, queries.GuardWindowParams{TenantID: tenantID, Size: GuardWindow})
	if err != nil {
		return "", err
	}
	reason := Judge(int(w.Outcomes), int(w.Complaints), int(w.HardBounces), g.MinSample)
	if reason == "" {
		return "", nil
	}
	if _, err := q.GuardPause(ctx, queries.GuardPauseParams{ID: tenantID, Reason: &reason}); err != nil {
		if store.IsNoRows(err) {
			return "", nil // paused already
		}
		return "", err
	}
	if g.OnPause != nil {
		q.AfterCommit(func(context.Context) { g.OnPause(reason) })
	}
	return reason, nil
}

// PausedCounts counts the paused tenants per reason (Prometheus).
func (s *Store) PausedCounts(ctx context.Context) (map[string]int64, error) {
	rows, err := s.DB.TenantsPaused(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, r := range rows {
		out[r.Reason] = r.N
	}
	return out, nil
}

// Rates reads the tenant's window of outcomes (GET /api/tenant).
func (s *Store) Rates(ctx context.Context, tenantID string) (Rates, error) {
	return RatesOf(ctx, s.DB.Queries, tenantID)
}
