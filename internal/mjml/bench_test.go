package mjml_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"tidings/internal/mjml"
)

// BenchmarkCompileNewsletter compiles the 23 KB newsletter in testdata on a
// warm default-size pool, one compile at a time, and reports the median and
// 90th percentile latency and the resident memory of the node processes.
//
//	go test -run '^$' -bench CompileNewsletter -benchtime 100x ./mjml/
func BenchmarkCompileNewsletter(b *testing.B) {
	src, err := os.ReadFile(filepath.Join("testdata", "newsletter.mjml"))
	if err != nil {
		b.Fatal(err)
	}
	p := newPool(b, mjml.Options{})
	ctx := context.Background()
	// Warm both workers: the first compiles run while V8 is still optimising.
	for range 10 {
		if _, err := p.Compile(ctx, string(src)); err != nil {
			b.Fatal(err)
		}
	}
	var durations []time.Duration
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		start := time.Now()
		if _, err := p.Compile(ctx, string(src)); err != nil {
			b.Fatal(err)
		}
		durations = append(durations, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(durations)
	ms := func(q float64) float64 {
		return float64(durations[int(q*float64(len(durations)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(ms(0.5), "p50-ms")
	b.ReportMetric(ms(0.9), "p90-ms")
	stats := p.Stats()
	b.ReportMetric(float64(stats.RSSBytes)/(1<<20), "pool-rss-MB")
	b.ReportMetric(float64(stats.Running), "processes")
}
