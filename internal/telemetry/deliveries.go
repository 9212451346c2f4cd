package telemetry

import (
	"context"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// CountsCollector serves one gauge per label value, read from the
// database at scrape time through count (the worker passes the query;
// telemetry does not import the store). A value count does not return is
// served as 0.
type CountsCollector struct {
	count  func(ctx context.Context) (map[string]int64, error)
	values []string
	desc   *prometheus.Desc
}

// NewDeliveriesCollector serves the outbound webhook deliveries kept, per
// state.
func NewDeliveriesCollector(count func(ctx context.Context) (map[string]int64, error)) *CountsCollector {
	return &CountsCollector{count: count, values: []string{"outbox", "pending", "succeeded", "failed"},
		desc: prometheus.NewDesc("tidings_webhook_deliveries",
			"Outbound webhook deliveries kept (30 days), per status; status outbox counts facts not yet fanned out into deliveries.",
			[]string{"status"}, nil)}
}

// NewPausedCollector serves the tenants whose sending is paused, per
// reason (complaint_rate, bounce_rate: the deliverability guard; manual).
func NewPausedCollector(count func(ctx context.Context) (map[string]int64, error)) *CountsCollector {
	return &CountsCollector{count: count, values: []string{"complaint_rate", "bounce_rate", "manual"},
		desc: prometheus.NewDesc("tidings_tenants_paused",
			"Tenants whose sending is paused, per reason (complaint_rate and bounce_rate are the deliverability guard's).",
			[]string{"reason"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *CountsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector; a failed read serves nothing.
func (c *CountsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, err := c.count(ctx)
	if err != nil {
		return
	}
	for _, v := range c.values {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n[v]), v)
	}
}

// InDoubtWindow is how far back tidings_sends_in_doubt counts.
const InDoubtWindow = time.Hour

// NewInDoubtGauge serves the sends recorded within InDoubtWindow that are
// in doubt (the provider's answer never came: never sent again, perhaps
// delivered), read from the database at scrape time through count; a
// failed read serves NaN, which no alert threshold crosses.
func NewInDoubtGauge(count func(ctx context.Context, since time.Time) (int64, error)) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tidings_sends_in_doubt",
		Help: "Sends recorded in the last hour whose provider call ended without an answer (in doubt)."},
		func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			n, err := count(ctx, time.Now().Add(-InDoubtWindow))
			if err != nil {
				return math.NaN()
			}
			return float64(n)
		})
}
