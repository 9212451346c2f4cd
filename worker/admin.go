package worker

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/hibiken/asynqmon"
	"github.com/prometheus/client_golang/prometheus"

	"tidings/internal/tasks"
	"tidings/internal/telemetry"
)

// AdminOptions configure the admin listener.
type AdminOptions struct {
	// ReadOnly keeps asynqmon from changing tasks (ASYNQMON_READONLY).
	ReadOnly bool
	// Hosts are the names, besides the loopback ones, that the dashboard
	// answers to (ADMIN_HOSTS).
	Hosts []string
	// Roles are the process's roles, named by /healthz.
	Roles []Role
}

// AdminHandler serves asynqmon at /monitoring/, Prometheus metrics at
// /metrics (the process's and asynq's queues, telemetry) and a liveness
// check at /healthz (with the process's roles) for operators. asynqmon can
// delete, retry and archive tasks; ReadOnly (the default) lets it only
// look. The listener binds loopback by default (WORKER_ADMIN_ADDR) for the
// same reason: the dashboard has no login of its own. Loopback alone does
// not keep a browser out: a page whose name its owner rebinds to 127.0.0.1
// reaches the dashboard as same-origin (DNS rebinding), so the dashboard
// answers only requests whose Host is a loopback name or one of Hosts.
// /metrics and /healthz answer any Host (orchestrators probe by address);
// they hold no task and change nothing.
func AdminHandler(opt asynq.RedisConnOpt, ins *asynq.Inspector, o AdminOptions, extra ...prometheus.Collector) (http.Handler, func()) {
	mon := asynqmon.New(asynqmon.Options{RootPath: "/monitoring", RedisConnOpt: opt, ReadOnly: o.ReadOnly})
	mux := http.NewServeMux()
	mux.Handle("/monitoring/", hostCheck(o.Hosts, mon))
	mux.Handle("/metrics", telemetry.Handler(append([]prometheus.Collector{
		telemetry.NewQueueCollector(ins, tasks.QueueRole)}, extra...)...))
	health, _ := json.Marshal(struct {
		Status string `json:"status"`
		Roles  []Role `json:"roles"`
	}{"ok", slices.Concat([]Role{}, o.Roles)})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(health)
	})
	return mux, func() { _ = mon.Close() }
}

// hostCheck refuses a request whose Host is neither a loopback name
// (localhost, 127.0.0.1, ::1; any port) nor one of hosts.
func hostCheck(hosts []string, next http.Handler) http.Handler {
	allowed := map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true}
	for _, h := range hosts {
		allowed[hostName(strings.TrimSpace(h))] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allowed[hostName(r.Host)] {
			http.Error(w, "the admin listener answers loopback names only; list this one in ADMIN_HOSTS",
				http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostName is the name of a Host header, lower case, without its port or
// the brackets of an IPv6 address.
func hostName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else {
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	}
	return strings.ToLower(host)
}

// AdminCollectors are the gauges the admin listener reads from the
// database at scrape time: outbound deliveries per state, paused tenants
// per reason.
func AdminCollectors(d Deps) []prometheus.Collector {
	return []prometheus.Collector{telemetry.NewDeliveriesCollector(d.Outbound.DeliveryCounts),
		telemetry.NewPausedCollector(d.Tenants.PausedCounts),
		telemetry.NewInDoubtGauge(func(ctx context.Context, since time.Time) (int64, error) {
			return d.DB.SendCountInDoubtSince(ctx, since)
		})}
}
