package worker

import (
	"net/http"

	"github.com/hibiken/asynq"
	"github.com/hibiken/asynqmon"

	"tidings/internal/telemetry"
)

// AdminHandler serves asynqmon at /monitoring/, Prometheus metrics at
// /metrics (the process's and asynq's queues, telemetry) and a liveness
// check at /healthz for operators.
func AdminHandler(opt asynq.RedisConnOpt) (http.Handler, func()) {
	mon := asynqmon.New(asynqmon.Options{RootPath: "/monitoring", RedisConnOpt: opt})
	inspector := asynq.NewInspector(opt)
	mux := http.NewServeMux()
	mux.Handle("/monitoring/", mon)
	mux.Handle("/metrics", telemetry.Handler(telemetry.NewQueueCollector(inspector)))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	})
	return mux, func() { _ = mon.Close(); _ = inspector.Close() }
}
