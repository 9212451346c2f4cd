package segments_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"tidings/internal/apperr"
	"tidings/internal/segments"
	"tidings/internal/testenv"
)

// newThrottle gives a test its own key prefix and a log to read.
func newThrottle(t *testing.T, every time.Duration) (*segments.Throttle, *bytes.Buffer) {
	t.Helper()
	rdb, prefix := testenv.Redis(t)
	var log bytes.Buffer
	return &segments.Throttle{Redis: rdb, Prefix: prefix, Every: every,
		Log: slog.New(slog.NewTextHandler(&log, nil))}, &log
}

// failingDel is a Redis client whose DEL fails, as when Redis goes away
// between taking a slot and giving it back.
type failingDel struct{ redis.UniversalClient }

func (failingDel) Del(ctx context.Context, _ ...string) *redis.IntCmd {
	cmd := redis.NewIntCmd(ctx)
	cmd.SetErr(errors.New("connection reset"))
	return cmd
}

func TestThrottle(t *testing.T) {
	t.Parallel()
	ok := func(context.Context) error { return nil }
	boom := errors.New("compute failed")
	tests := []struct {
		desc string
		// first runs in the first slot; ctx is what Do is given.
		first   func(ctx context.Context) error
		ctx     func() (context.Context, context.CancelFunc)
		wantErr error
		// wantFree says whether a second Do right after may run.
		wantFree bool
	}{
		{desc: "a compute that happened keeps its slot", first: ok},
		{desc: "a failed compute gives its slot back", first: func(context.Context) error { return boom },
			wantErr: boom, wantFree: true},
		{desc: "a compute that ran out of time gives its slot back on its own context",
			first: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() },
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 50*time.Millisecond)
			},
			wantErr: context.DeadlineExceeded, wantFree: true},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			th, _ := newThrottle(t, time.Hour)
			ctx, cancel := context.Background(), func() {}
			if tt.ctx != nil {
				ctx, cancel = tt.ctx()
			}
			defer cancel()
			if err := th.Do(ctx, "ten_a", "seg_1", tt.first); !errors.Is(err, tt.wantErr) {
				t.Fatalf("first: %v, want %v", err, tt.wantErr)
			}
			ran := false
			err := th.Do(context.Background(), "ten_a", "seg_1", func(context.Context) error { ran = true; return nil })
			if tt.wantFree {
				if err != nil || !ran {
					t.Fatalf("slot not given back: %v", err)
				}
				return
			}
			e, isApp := apperr.As(err)
			if !isApp || e.Code != "RATE_LIMITED" || ran || e.RetryAfter < 3599 || e.RetryAfter > 3600 {
				t.Fatalf("second within the interval: %v ran=%v", err, ran)
			}
			// The slot is per segment and per tenant.
			for _, other := range [][2]string{{"ten_a", "seg_2"}, {"ten_b", "seg_1"}} {
				if err := th.Do(context.Background(), other[0], other[1], ok); err != nil {
					t.Fatalf("%v: %v", other, err)
				}
			}
		})
	}
}

// A release that fails is logged; the caller still sees why the compute
// failed, and the slot frees at the end of the interval.
func TestThrottleReleaseFailureIsLogged(t *testing.T) {
	t.Parallel()
	th, log := newThrottle(t, 200*time.Millisecond)
	th.Redis = failingDel{th.Redis}
	boom := errors.New("compute failed")
	if err := th.Do(context.Background(), "ten_a", "seg_1", func(context.Context) error { return boom }); err != boom {
		t.Fatalf("got %v, want the compute's error", err)
	}
	if !strings.Contains(log.String(), "slot was not released") || !strings.Contains(log.String(), "connection reset") {
		t.Fatalf("log: %s", log)
	}
	if err := th.Do(context.Background(), "ten_a", "seg_1", func(context.Context) error { return nil }); !apperr.IsCode(err, "RATE_LIMITED") {
		t.Fatalf("slot should still be taken: %v", err)
	}
	time.Sleep(250 * time.Millisecond)
	if err := th.Do(context.Background(), "ten_a", "seg_1", func(context.Context) error { return nil }); err != nil {
		t.Fatalf("slot should have expired: %v", err)
	}
}

func TestComputeThrottled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.segs.Throttle, _ = newThrottle(t, time.Hour)
	b.contact(t, tenantA, "a@example.com", map[string]any{"plan": "pro"})
	s := b.create(t, tenantA, "pro", propRules("plan", "equals", "pro"))
	off, err := b.segs.Create(b.ctx, tenantA, segments.Input{Name: ptr("off"), Rules: allRules, Enabled: new(false)})
	if err != nil {
		t.Fatal(err)
	}

	_, err = b.segs.ComputeThrottled(b.ctx, tenantA, "seg_missing")
	wantErr(t, err, apperr.KindNotFound, "SEGMENT_NOT_FOUND")
	_, err = b.segs.ComputeThrottled(b.ctx, tenantA, off.ID)
	wantErr(t, err, apperr.KindInvalid, "VALIDATION_ERROR")
	// Neither compute happened, so neither used up its interval.
	if _, _, err := b.segs.Update(b.ctx, tenantA, off.ID, segments.Input{Enabled: new(true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.segs.ComputeThrottled(b.ctx, tenantA, off.ID); err != nil {
		t.Fatal(err)
	}

	res, err := b.segs.ComputeThrottled(b.ctx, tenantA, s.ID)
	if err != nil || res.Changed != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	_, err = b.segs.ComputeThrottled(b.ctx, tenantA, s.ID)
	wantErr(t, err, apperr.KindRateLimited, "RATE_LIMITED")
}
