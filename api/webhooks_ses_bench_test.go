package api

import (
	"testing"
)

// sesApplyFloor is the least SES's apply rate may be of SendGrid's in the
// same run: SES's outcomes (one SNS notification each, one task each) go
// through the same batched apply as SendGrid's batches of 1,000.
const sesApplyFloor = 0.8

// BenchmarkSESWebhook runs the same 20,000 outcomes (4,000 sends of 1,000
// contacts in 5 tenants: delivered, three opens, a click each) through
// SendGrid's webhook (20 signed batches of 1,000) and SES's (20,000 signed
// SNS notifications, one event each), interleaved chunk by chunk (the
// shared driver, webhooks_bench_test.go), and fails when SES's apply rate
// is below sesApplyFloor of SendGrid's. SES's apply is every
// notification's task run: the first of a chunk's takes the 1,000 waiting
// rows and applies them together, the others find theirs applied. Target:
// SES apply ≥ 5,000 events/s, as SendGrid's (reported, not gated: the
// machine is shared).
//
//	go test ./api/ -run '^$' -bench SESWebhook -benchtime 1x
func BenchmarkSESWebhook(b *testing.B) {
	sg, ses := newSendgridArm(b, false), newSESArm(b)
	runWebhookArms(b, benchAudience{tenants: 5, contactsPer: 200, sendsPer: 4}, sg, ses)
	ratio := ses.applyRate() / sg.applyRate()
	b.ReportMetric(ses.acceptRate(), "ses_accept_events/s")
	b.ReportMetric(ses.applyRate(), "ses_apply_events/s")
	b.ReportMetric(sg.acceptRate(), "sendgrid_accept_events/s")
	b.ReportMetric(sg.applyRate(), "sendgrid_apply_events/s")
	b.ReportMetric(ratio, "ses/sendgrid_apply")
	if ratio < sesApplyFloor {
		b.Errorf("SES applied %.0f events/s, %.2f of SendGrid's %.0f in the same run (floor %.2f)",
			ses.applyRate(), ratio, sg.applyRate(), sesApplyFloor)
	}
}
