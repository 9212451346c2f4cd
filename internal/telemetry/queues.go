package telemetry

import (
	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
)

// QueueCollector reads asynq's queues when scraped: how many tasks each
// queue holds in each state, and how long its oldest pending task has
// waited, each labelled with its queue and the worker role that serves it
// (which role to scale: docs/operations.md). It asks Redis at scrape time
// rather than polling, so an idle Prometheus costs nothing and a scrape is
// always current.
type QueueCollector struct {
	inspector *asynq.Inspector
	role      func(queue string) string
	up        *prometheus.Desc
	size      *prometheus.Desc
	latency   *prometheus.Desc
}

// NewQueueCollector collects the queues inspector sees; role names the
// worker role of a queue.
func NewQueueCollector(inspector *asynq.Inspector, role func(queue string) string) *QueueCollector {
	return &QueueCollector{
		inspector: inspector,
		role:      role,
		up: prometheus.NewDesc("tidings_asynq_up",
			"1 when the last scrape could read the queues from Redis, else 0.", nil, nil),
		size: prometheus.NewDesc("tidings_asynq_queue_tasks",
			"Tasks in an asynq queue, by queue, the worker role that serves it and state (pending, active, scheduled, retry, archived, completed).",
			[]string{"queue", "role", "state"}, nil),
		latency: prometheus.NewDesc("tidings_asynq_queue_latency_seconds",
			"How long the oldest pending task of an asynq queue has waited, by queue and the worker role that serves it.",
			[]string{"queue", "role"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *QueueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.up
	ch <- c.size
	ch <- c.latency
}

// Collect implements prometheus.Collector.
func (c *QueueCollector) Collect(ch chan<- prometheus.Metric) {
	queues, err := c.inspector.Queues()
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	up := 1.0
	for _, q := range queues {
		info, err := c.inspector.GetQueueInfo(q)
		if err != nil {
			up = 0
			continue
		}
		role := c.role(q)
		for state, n := range map[string]int{"pending": info.Pending, "active": info.Active, "scheduled": info.Scheduled,
			"retry": info.Retry, "archived": info.Archived, "completed": info.Completed} {
			ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(n), q, role, state)
		}
		ch <- prometheus.MustNewConstMetric(c.latency, prometheus.GaugeValue, info.Latency.Seconds(), q, role)
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up)
}
