package worker

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"
)

// logTasks writes one structured line per processed task: a failure at
// WARN, a success at DEBUG (the periodic sweeps alone would fill an INFO
// log; a task that moves something says so itself).
func logTasks(log *slog.Logger) asynq.MiddlewareFunc {
	return func(next asynq.Handler) asynq.Handler {
		return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
			start := time.Now()
			err := next.ProcessTask(ctx, t)
			id, _ := asynq.GetTaskID(ctx)
			attrs := []any{"type", t.Type(), "task_id", id, "duration_ms", float64(time.Since(start).Microseconds()) / 1000}
			if err != nil {
				log.Warn("task", append(attrs, "err", err)...)
			} else {
				log.Debug("task", attrs...)
			}
			return err
		})
	}
}

// slogAdapter lets asynq log through slog.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Debug(args ...any) { a.l.Debug(fmt.Sprint(args...), "component", "asynq") }
func (a slogAdapter) Info(args ...any)  { a.l.Info(fmt.Sprint(args...), "component", "asynq") }
func (a slogAdapter) Warn(args ...any)  { a.l.Warn(fmt.Sprint(args...), "component", "asynq") }
func (a slogAdapter) Error(args ...any) { a.l.Error(fmt.Sprint(args...), "component", "asynq") }
func (a slogAdapter) Fatal(args ...any) {
	a.l.Error(fmt.Sprint(args...), "component", "asynq", "fatal", true)
}
