package worker

import (
	"net/http"

	"github.com/hibiken/asynq"
	"github.com/hibiken/asynqmon"
	"github.com/prometheus/client_golang/prometheus"

	"tidings/internal/telemetry"
)

// AdminHandler serves asynqmon at /monitoring/, Prometheus metrics at
// /metrics (the process's and asynq's queues, telemetry) and a liveness
// check at /healthz for operators. asynqmon can delete, retry and archive
// tasks; readOnly (ASYNQMON_READONLY, the default) lets it only look. The
// listener binds loopback by default (WORKER_ADMIN_ADDR) for the same
// reason: the dashboard has no login of its own.
func AdminHandler(opt asynq.RedisConnOpt, ins *asynq.Inspector, readOnly bool, extra ...prometheus.Collector) (http.Handler, func()) {
	mon := asynqmon.New(asynqmon.Options{RootPath: "/monitoring", RedisConnOpt: opt, ReadOnly: readOnly})
	mux := http.NewServeMux()
	mux.Handle("/monitoring/", mon)
	mux.Handle("/metrics", telemetry.Handler(append([]prometheus.Collector{telemetry.NewQueueCollector(ins)}, extra...)...))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	})
	return mux, func() { _ = mon.Close() }
}

// AdminCollectors are the gauges the admin listener reads from the
// database at scrape time: outbound deliveries per state, paused tenants
// per reason.
func AdminCollectors(d Deps) []prometheus.Collector {
	return []prometheus.Collector{telemetry.NewDeliveriesCollector(d.Outbound.DeliveryCounts),
		telemetry.NewPausedCollector(d.Tenants.PausedCounts)}
}
