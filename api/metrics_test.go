package api

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"tidings/internal/delivery"
	"tidings/internal/events"
	"tidings/internal/sendgridevents"
	"tidings/internal/tracking"
)

// keysOf returns the sorted keys of a JSON object.
func keysOf(m map[string]any) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return strings.Join(ks, ",")
}

const counterKeys = "bounced,bouncedHard,bouncedSoft,cancelled,clicked,complained,delivered,machineClicked,machineOpened,opened,replied,scheduled,sent,updatedAt"

// wantCounters checks some counters of a metrics object (the others must
// be 0) and that it carries exactly the API's counters.
func wantCounters(t *testing.T, what string, m any, want map[string]float64) {
	t.Helper()
	obj, _ := m.(map[string]any)
	keys := keysOf(obj)
	if _, ok := obj["date"]; ok { // a day of a range
		keys = strings.Replace(keys, "date,", "", 1)
	}
	if keys != counterKeys {
		t.Fatalf("%s: keys %s", what, keysOf(obj))
	}
	for _, k := range strings.Split(counterKeys, ",") {
		if k == "updatedAt" {
			continue
		}
		if obj[k] != want[k] {
			t.Fatalf("%s: %s = %v, want %v (%v)", what, k, obj[k], want[k], obj)
		}
	}
	if (obj["updatedAt"] == nil) != (len(want) == 0) {
		t.Fatalf("%s: updatedAt %v", what, obj["updatedAt"])
	}
}

// A drip and a transactional send, their outcomes and an unsubscribe, read
// back through every metrics route: tenant month, day and range, the
// sequence, the templates (transactional and sequence sends together), the
// lists, and the tenant's monthlySendCount; another tenant sees none of it.
func TestMetricsFollowSendsAndOutcomes(t *testing.T) {
	t.Parallel()
	f := newSeqFixture(t, "org_metrics")
	b := f.b
	before := b.expect("GET", "/api/tenant", f.key, nil, 200)
	month := time.Now().UTC().Format("2006-01")
	if before.body["monthlySendCount"] != float64(0) || before.body["monthlySendCountPeriod"] != month {
		t.Fatalf("tenant before: %s", before.raw)
	}
	r := b.expect("GET", "/api/metrics", f.key, nil, 200)
	if keysOf(r.body) != "metrics,period,yearMonth" || r.body["period"] != "monthly" || r.body["yearMonth"] != month {
		t.Fatalf("%s", r.raw)
	}
	wantCounters(t, "empty month", r.body["metrics"], nil)

	f.putSequence("onboarding", dripYAML, true)
	f.event("signed_up", map[string]any{"plan": "pro"}) // scheduled: welcome
	b.expect("POST", "/api/send", f.key, map[string]any{"to": "ann@example.com", "template": "welcome",
		"variables": map[string]any{"name": "Ann"}}, 200) // sent: welcome, transactional
	wantOutcomes(t, f.runDue(), "sent") // sent: welcome by the sequence; scheduled: tips
	sends := b.expect("GET", "/api/sends", f.key, nil, 200).items()
	if len(sends) != 2 {
		t.Fatalf("%d sends", len(sends))
	}
	ids := []string{sends[0].(map[string]any)["sendId"].(string), sends[1].(map[string]any)["sendId"].(string)}
	outcomes := &delivery.Outcomes{DB: b.db, Events: &events.Recorder{DB: b.db}}
	for _, id := range ids {
		for range 2 { // a repeated delivered changes nothing
			if err := outcomes.Record(context.Background(), delivery.Outcome{TenantID: f.org, SendID: id,
				Kind: sendgridevents.Delivered}); err != nil {
				t.Fatal(err)
			}
		}
	}
	signer, err := tracking.NewSigner(b.cfg.TrackingSecret)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := signer.OpenToken(tracking.IDs{TenantID: f.org, SendID: sequenceSend(sends), ContactID: f.contactID})
	if err != nil {
		t.Fatal(err)
	}
	// Minutes later, as a person opens it (a hit within 2 s of the
	// sending is a prefetcher's).
	f.exec(`UPDATE sends SET sent_at = sent_at - interval '1 minute' WHERE tenant_id = $1`, f.org)
	for range 3 { // three pixel hits, one first open
		if res := b.do("GET", "/t/o/"+tok, "", nil); res.status != 200 {
			t.Fatalf("pixel %d", res.status)
		}
	}
	// Unsubscribing cancels the pending tips step.
	b.expect("PATCH", "/api/contacts/"+f.contactID, f.key, map[string]any{"subscribed": false}, 200)

	tenantWant := map[string]float64{"scheduled": 2, "sent": 2, "cancelled": 1, "delivered": 2, "opened": 1}
	r = b.expect("GET", "/api/metrics?period=monthly&yearMonth="+month, f.key, nil, 200)
	wantCounters(t, "month", r.body["metrics"], tenantWant)
	ten := b.expect("GET", "/api/tenant", f.key, nil, 200)
	if ten.body["monthlySendCount"] != float64(2) || ten.body["monthlySendCountPeriod"] != month {
		t.Fatalf("tenant after: %v %v", ten.body["monthlySendCount"], ten.body["monthlySendCountPeriod"])
	}

	day := b.expect("GET", "/api/metrics?period=daily", f.key, nil, 200)
	today := day.body["date"].(string)
	if keysOf(day.body) != "date,metrics,period,yearMonth" || day.body["period"] != "daily" || today[:7] != day.body["yearMonth"] {
		t.Fatalf("%s", day.raw)
	}
	wantCounters(t, "today", day.body["metrics"], tenantWant)
	t0, _ := time.Parse("2006-01-02", today)
	start := t0.AddDate(0, 0, -2).Format("2006-01-02")
	rng := b.expect("GET", "/api/metrics?startDate="+start+"&endDate="+today, f.key, nil, 200)
	if keysOf(rng.body) != "endDate,metrics,startDate" || rng.body["startDate"] != start || rng.body["endDate"] != today {
		t.Fatalf("%s", rng.raw)
	}
	days, _ := rng.body["metrics"].([]any)
	if len(days) != 3 || days[0].(map[string]any)["date"] != start || days[2].(map[string]any)["date"] != today {
		t.Fatalf("range: %s", rng.raw)
	}
	wantCounters(t, "range day 1", days[0], nil)
	wantCounters(t, "range day 2", days[1], nil)
	wantCounters(t, "range day 3", days[2], tenantWant)

	seq := b.expect("GET", "/api/metrics/sequences/onboarding", f.key, nil, 200)
	if keysOf(seq.body) != "metrics,sequenceId,yearMonth" || seq.body["sequenceId"] != "onboarding" || seq.body["yearMonth"] != month {
		t.Fatalf("%s", seq.raw)
	}
	wantCounters(t, "sequence", seq.body["metrics"], map[string]float64{"scheduled": 2, "sent": 1, "cancelled": 1,
		"delivered": 1, "opened": 1})
	wel := b.expect("GET", "/api/metrics/templates/welcome?yearMonth="+month, f.key, nil, 200)
	if keysOf(wel.body) != "metrics,templateId,yearMonth" || wel.body["templateId"] != "welcome" {
		t.Fatalf("%s", wel.raw)
	}
	wantCounters(t, "template welcome", wel.body["metrics"], map[string]float64{"scheduled": 1, "sent": 2,
		"delivered": 2, "opened": 1})
	list := b.expect("GET", "/api/metrics/templates?limit=1", f.key, nil, 200)
	if keysOf(list.body) != "items,nextCursor,yearMonth" || len(list.items()) != 1 || list.body["nextCursor"] == nil {
		t.Fatalf("%s", list.raw)
	}
	first := list.items()[0].(map[string]any)
	if keysOf(first) != "metrics,templateId" || first["templateId"] != "tips" {
		t.Fatalf("%s", list.raw)
	}
	wantCounters(t, "template tips", first["metrics"], map[string]float64{"scheduled": 1, "cancelled": 1})
	list = b.expect("GET", "/api/metrics/templates?limit=1&cursor="+list.body["nextCursor"].(string), f.key, nil, 200)
	if len(list.items()) != 1 || list.items()[0].(map[string]any)["templateId"] != "welcome" || list.body["nextCursor"] != nil {
		t.Fatalf("%s", list.raw)
	}
	seqs := b.expect("GET", "/api/metrics/sequences", f.key, nil, 200)
	if len(seqs.items()) != 1 || seqs.items()[0].(map[string]any)["sequenceId"] != "onboarding" {
		t.Fatalf("%s", seqs.raw)
	}
	// A month without counts: zeros and a null updatedAt, for a template
	// that exists.
	empty := b.expect("GET", "/api/metrics/templates/welcome?yearMonth=2001-01", f.key, nil, 200)
	wantCounters(t, "January 2001", empty.body["metrics"], nil)

	// Another tenant of the same database sees nothing of it.
	other := b.apiKey(b.tenant("org_metrics_other"))
	wantCounters(t, "other tenant", b.expect("GET", "/api/metrics", other, nil, 200).body["metrics"], nil)
	b.expectError("GET", "/api/metrics/sequences/onboarding", other, nil, 404, "SEQUENCE_NOT_FOUND")
	b.expectError("GET", "/api/metrics/templates/welcome", other, nil, 404, "TEMPLATE_NOT_FOUND")
	if l := b.expect("GET", "/api/metrics/templates", other, nil, 200); len(l.items()) != 0 {
		t.Fatalf("%s", l.raw)
	}
	if o := b.expect("GET", "/api/tenant", other, nil, 200); o.body["monthlySendCount"] != float64(0) {
		t.Fatalf("%s", o.raw)
	}
	// Deleting the sequence: its metrics route is 404, the tenant's counts stay.
	b.expect("DELETE", "/api/sequences/onboarding", f.key, nil, http.StatusNoContent)
	b.expectError("GET", "/api/metrics/sequences/onboarding", f.key, nil, 404, "SEQUENCE_NOT_FOUND")
	wantCounters(t, "month after delete", b.expect("GET", "/api/metrics", f.key, nil, 200).body["metrics"], tenantWant)
}

// sequenceSend returns the id of the send a sequence made.
func sequenceSend(sends []any) string {
	for _, s := range sends {
		if m := s.(map[string]any); m["sequenceId"] != nil {
			return m["sendId"].(string)
		}
	}
	return ""
}

// Every parameter of the metrics routes is checked, naming the field.
func TestMetricsValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.apiKey(b.tenant("org_metrics_val"))
	for _, tc := range []struct {
		query  string
		fields string
	}{
		{"/api/metrics?period=yearly", "period"},
		{"/api/metrics?yearMonth=2026-13", "yearMonth"},
		{"/api/metrics?yearMonth=26-11", "yearMonth"},
		{"/api/metrics?period=daily&date=2026-11-31", "date"},
		{"/api/metrics?date=tomorrow", "date"},
		{"/api/metrics?period=monthly&date=2026-11-01", "date"},
		{"/api/metrics?period=daily&yearMonth=2026-11", "yearMonth"},
		{"/api/metrics?startDate=2026-11-02", "endDate"},
		{"/api/metrics?endDate=2026-11-02", "startDate"},
		{"/api/metrics?startDate=2026-11-03&endDate=2026-11-02", "startDate"},
		{"/api/metrics?startDate=2026-01-01&endDate=2026-04-04", "endDate"},
		{"/api/metrics?startDate=2026-01-01&endDate=2026-04-03&date=2026-01-01", "date"},
		{"/api/metrics?startDate=2026-1-1&endDate=x", "endDate,startDate"},
		{"/api/metrics/sequences?yearMonth=2026/11", "yearMonth"},
		{"/api/metrics/sequences?limit=0", "limit"},
		{"/api/metrics/templates?limit=101", "limit"},
		{"/api/metrics/templates?cursor=abc", "cursor"},
		{"/api/metrics/sequences/x?yearMonth=bad", "yearMonth"},
		{"/api/metrics/templates/x?yearMonth=2026-00", "yearMonth"},
	} {
		r := b.expectError("GET", tc.query, key, nil, 400, "VALIDATION_ERROR")
		if keysOf(r.fields()) != tc.fields {
			t.Fatalf("%s: fields %s, want %s", tc.query, keysOf(r.fields()), tc.fields)
		}
	}
	r := b.expect("GET", "/api/metrics?startDate=2026-01-01&endDate=2026-04-03", key, nil, 200)
	if days, _ := r.body["metrics"].([]any); len(days) != 93 {
		t.Fatalf("93-day range: %d days", len(days))
	}
	r = b.expect("GET", "/api/metrics?date=2024-02-29", key, nil, 200)
	if r.body["period"] != "daily" || r.body["yearMonth"] != "2024-02" {
		t.Fatalf("%s", r.raw)
	}
	b.expectError("GET", "/api/metrics/sequences/nope", key, nil, 404, "SEQUENCE_NOT_FOUND")
	b.expectError("GET", "/api/metrics/templates/nope", key, nil, 404, "TEMPLATE_NOT_FOUND")
	b.expectError("GET", "/api/metrics", "", nil, 401, "UNAUTHORIZED")
}
