// Package telemetry holds the Prometheus metrics both processes serve at
// GET /metrics (ADDENDUM section 1): their definitions, the one-line calls
// the code makes where a fact happens, the HTTP middleware's recorder and
// the asynq queue collector. docs/operations.md lists every name; the
// tests check that each listed name is served.
//
// These are operational metrics for operators (rates, latencies, queue
// depth), not the per-tenant counters of GET /api/metrics, which live in
// the database (internal/metrics).
package telemetry

import (
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

var (
	httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tidings_http_requests_total",
		Help: "HTTP requests answered, by route template, method and status code.",
	}, []string{"route", "method", "code"})
	httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "tidings_http_request_duration_seconds",
		Help:    "Time to answer an HTTP request, by route template and method.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"route", "method"})
	sends = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tidings_sends_total",
		Help: "Messages handed to the email provider, by kind (transactional, sequence) and outcome (accepted, failed).",
	}, []string{"kind", "outcome"})
	providerErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tidings_provider_errors_total",
		Help: "Email provider failures, by provider and class (temporary: retried; permanent: not).",
	}, []string{"provider", "class"})
	providerSends = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tidings_provider_sends_total",
		Help: "Messages handed to each provider of the pool, by provider, stream (transactional, marketing) and outcome (accepted, refused, in_doubt).",
	}, []string{"provider", "stream", "outcome"})
	providerFailovers = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tidings_provider_failovers_total",
		Help: "Messages moved on from a provider to the next of their stream, by the provider that failed and stream.",
	}, []string{"provider", "stream"})
	webhookEvents = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tidings_webhook_events_total",
		Help: "Provider webhook events (SendGrid, SES) processed by the worker, by result (applied, duplicate, dropped, ignored, other_provider).",
	}, []string{"result"})
	scheduledRuns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tidings_scheduled_sends_processed_total",
		Help: "Scheduled sends the worker ran, by outcome (sent, skipped, held, cancelled, exited, failed, dead, none).",
	}, []string{"outcome"})
	webhookDeliveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tidings_webhook_deliveries_total",
		Help: "Outbound webhook delivery attempts, by outcome (succeeded, failed: any non-2xx, timeout or refused address).",
	}, []string{"outcome"})
	webhookAttemptSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "tidings_webhook_attempt_duration_seconds",
		Help:    "Duration of one outbound webhook attempt, connection to answer.",
		Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15},
	})
	machineHits = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tidings_machine_engagement_total",
		Help: "Opens and clicks recorded as a machine's (mail scanners, prefetchers: not counted as opened or clicked), by kind (open, click).",
	}, []string{"kind"})
	tenantPauses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tidings_tenant_pauses_total",
		Help: "Tenants the deliverability guard paused, by reason (complaint_rate, bounce_rate). Per-tenant rates are not labels: they are in GET /api/tenant.",
	}, []string{"reason"})
	broadcastRecipients = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tidings_broadcast_recipients_total",
		Help: "Broadcast recipients the worker processed, by outcome (sent, skipped, failed, retry).",
	}, []string{"outcome"})
	ingestEvents = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tidings_ingest_events_total",
		Help: "POST /api/events events by what the group commit did with them: batched (written in a batch transaction, whatever each one's own answer), refused (queue full or shutting down: 503), abandoned (the request gave up before a batch took it: 503).",
	}, []string{"outcome"})
	liveRepairs = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tidings_live_segment_repairs_total",
		Help: "Live segment memberships the periodic full compute had to repair (joined plus left): what incremental evaluation missed; 0 when nothing was lost.",
	})
	ingestBatch = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "tidings_ingest_batch_events",
		Help:    "Events per group-commit transaction of POST /api/events.",
		Buckets: []float64{1, 2, 5, 10, 25, 50, 100, 250, 500, 1000},
	})
)

// Label values known in advance are created at start, so every series is
// served (at 0) before its first event and rate() works from the start.
var (
	sendKinds      = []string{"transactional", "sequence"}
	sendOutcomes   = []string{"accepted", "failed"}
	errorClasses   = []string{"temporary", "permanent"}
	webhookResults = []string{"applied", "duplicate", "dropped", "ignored", "other_provider"}
	// runOutcomes are engine.Outcomes (telemetry cannot import the engine,
	// which sends through delivery, which counts here); the worker's tests
	// check the two lists are the same.
	runOutcomes = []string{"sent", "skipped", "held", "cancelled", "exited", "failed", "dead", "none"}
	// recipientOutcomes are what a broadcast recipient's dispatch ends in.
	recipientOutcomes = []string{"sent", "skipped", "failed", "retry"}
	ingestOutcomes    = []string{"batched", "refused", "abandoned"}
)

// own are Tidings's collectors, served by every process's registry.
var own = []prometheus.Collector{httpRequests, httpDuration, sends, providerErrors, providerSends, providerFailovers, webhookEvents, scheduledRuns,
	broadcastRecipients, webhookDeliveries, webhookAttemptSeconds, tenantPauses, machineHits, ingestEvents, ingestBatch, liveRepairs}

var createSeries sync.Once

func createKnownSeries() {
	for _, k := range sendKinds {
		for _, o := range sendOutcomes {
			sends.WithLabelValues(k, o)
		}
	}
	for _, c := range errorClasses {
		for _, p := range []string{"sendgrid", "smtp", "outbox", "ses"} {
			providerErrors.WithLabelValues(p, c)
		}
	}
	for _, r := range webhookResults {
		webhookEvents.WithLabelValues(r)
	}
	// The pool's series exist from the start, so a dashboard sees zeros
	// before the first failover (the provider names are the known ones).
	for _, p := range []string{"sendgrid", "smtp", "outbox", "ses"} {
		for _, st := range []string{"transactional", "marketing"} {
			providerFailovers.WithLabelValues(p, st)
			for _, o := range []string{"accepted", "refused", "in_doubt"} {
				providerSends.WithLabelValues(p, st, o)
			}
		}
	}
	for _, o := range runOutcomes {
		scheduledRuns.WithLabelValues(o)
	}
	for _, o := range recipientOutcomes {
		broadcastRecipients.WithLabelValues(o)
	}
	webhookDeliveries.WithLabelValues("succeeded")
	webhookDeliveries.WithLabelValues("failed")
	tenantPauses.WithLabelValues("complaint_rate")
	tenantPauses.WithLabelValues("bounce_rate")
	machineHits.WithLabelValues("open")
	machineHits.WithLabelValues("click")
	for _, o := range ingestOutcomes {
		ingestEvents.WithLabelValues(o)
	}
}

// IngestBatch counts a group-commit transaction of n events.
func IngestBatch(n int) {
	ingestBatch.Observe(float64(n))
	ingestEvents.WithLabelValues("batched").Add(float64(n))
}

// IngestNotWritten counts an event the group commit did not write:
// refused (queue full, shutting down) or abandoned (its request gave up
// first).
func IngestNotWritten(abandoned bool) {
	if abandoned {
		ingestEvents.WithLabelValues("abandoned").Inc()
		return
	}
	ingestEvents.WithLabelValues("refused").Inc()
}

// MachineHits counts opens and clicks recorded as machines'.
func MachineHits(opens, clicks int64) {
	if opens > 0 {
		machineHits.WithLabelValues("open").Add(float64(opens))
	}
	if clicks > 0 {
		machineHits.WithLabelValues("click").Add(float64(clicks))
	}
}

// LiveRepairs counts memberships a live segment's reconcile repaired.
func LiveRepairs(n int) { liveRepairs.Add(float64(n)) }

// TenantPaused counts a pause by the deliverability guard.
func TenantPaused(reason string) { tenantPauses.WithLabelValues(reason).Inc() }

// Handler serves, in the Prometheus text format, a registry of the
// process's own: Go runtime and process metrics, Tidings's metrics, and the
// extra collectors given (the worker's queue collector). A registry of its
// own rather than the global default, so nothing a library registers on
// the default ends up served by accident.
func Handler(extra ...prometheus.Collector) http.Handler {
	createSeries.Do(createKnownSeries)
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	r.MustRegister(own...)
	r.MustRegister(extra...)
	return promhttp.HandlerFor(r, promhttp.HandlerOpts{Timeout: 10 * time.Second})
}

// ObserveHTTP records one answered request. route is the route template
// (`/api/contacts/:id`), never the raw path, so the label set stays
// bounded; it must be a string that outlives the request (fiber's
// registered route paths are).
func ObserveHTTP(route, method string, code int, took time.Duration) {
	m := methodLabel(method)
	httpRequests.WithLabelValues(route, m, statusText(code)).Inc()
	httpDuration.WithLabelValues(route, m).Observe(took.Seconds())
}

// methodLabel maps the request's method to a constant string: fasthttp
// hands out strings that alias buffers it reuses for the next request, and
// a label value is kept for good; an unknown method is "other", which also
// bounds the label set.
func methodLabel(m string) string {
	for _, known := range []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"} {
		if m == known {
			return known
		}
	}
	return "other"
}

// Send records a message handed to the provider: sequence tells the kind,
// err the outcome. temporary classifies a failure (provider.IsTemporary).
func Send(providerName string, sequence bool, err error, temporary bool) {
	kind := "transactional"
	if sequence {
		kind = "sequence"
	}
	if err == nil {
		sends.WithLabelValues(kind, "accepted").Inc()
		return
	}
	sends.WithLabelValues(kind, "failed").Inc()
	class := "permanent"
	if temporary {
		class = "temporary"
	}
	providerErrors.WithLabelValues(providerName, class).Inc()
}

// ProviderSend records one provider's answer to one message of a stream:
// outcome is accepted, refused or in_doubt.
func ProviderSend(providerName, stream, outcome string) {
	providerSends.WithLabelValues(providerName, stream, outcome).Inc()
}

// ProviderFailover records a message moved on from providerName to the
// next provider of its stream.
func ProviderFailover(providerName, stream string) {
	providerFailovers.WithLabelValues(providerName, stream).Inc()
}

// WebhookEvents records what a webhook batch did with its events.
func WebhookEvents(applied, duplicates, dropped, ignored, otherProvider int) {
	webhookEvents.WithLabelValues("applied").Add(float64(applied))
	webhookEvents.WithLabelValues("duplicate").Add(float64(duplicates))
	webhookEvents.WithLabelValues("dropped").Add(float64(dropped))
	webhookEvents.WithLabelValues("ignored").Add(float64(ignored))
	webhookEvents.WithLabelValues("other_provider").Add(float64(otherProvider))
}

// RunOutcomes are the outcome label values of scheduled-send runs.
func RunOutcomes() []string { return slices.Clone(runOutcomes) }

// WebhookDelivery records one outbound webhook attempt.
func WebhookDelivery(ok bool, d time.Duration) {
	outcome := "failed"
	if ok {
		outcome = "succeeded"
	}
	webhookDeliveries.WithLabelValues(outcome).Inc()
	webhookAttemptSeconds.Observe(d.Seconds())
}

// BroadcastRecipients counts a dispatch batch's broadcast recipients by
// outcome.
func BroadcastRecipients(sent, skipped, failed, retry int) {
	for o, n := range map[string]int{"sent": sent, "skipped": skipped, "failed": failed, "retry": retry} {
		if n > 0 {
			broadcastRecipients.WithLabelValues(o).Add(float64(n))
		}
	}
}

// ScheduledRun records the outcome of one run of a scheduled send.
func ScheduledRun(outcome string) { scheduledRuns.WithLabelValues(outcome).Inc() }

// statusText is the code label: three digits, bounded by HTTP itself.
// The labels are made once (statusTexts): this runs for every request.
func statusText(code int) string {
	if code < 100 || code > 599 {
		return "other"
	}
	return statusTexts[code-100]
}

var statusTexts = func() (t [500]string) {
	for i := range t {
		t[i] = strconv.Itoa(100 + i)
	}
	return t
}()
