package telemetry

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DeliveriesCollector serves the outbound webhook deliveries kept, per
// state, read at scrape time through count (the worker passes the
// database's query; telemetry does not import the store).
type DeliveriesCollector struct {
	count func(ctx context.Context) (map[string]int64, error)
	desc  *prometheus.Desc
}

// NewDeliveriesCollector collects what count reads.
func NewDeliveriesCollector(count func(ctx context.Context) (map[string]int64, error)) *DeliveriesCollector {
	return &DeliveriesCollector{count: count, desc: prometheus.NewDesc("tidings_webhook_deliveries",
		"Outbound webhook deliveries kept (30 days), per status; status outbox counts facts not yet fanned out into deliveries.", []string{"status"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *DeliveriesCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector; a failed read serves nothing.
func (c *DeliveriesCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, err := c.count(ctx)
	if err != nil {
		return
	}
	for _, st := range []string{"outbox", "pending", "succeeded", "failed"} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n[st]), st)
	}
}
