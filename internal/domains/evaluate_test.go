package domains_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"tidings/internal/domains"
)

func TestEvaluate(t *testing.T) {
	t.Parallel()
	recs := []domains.DNSRecord{
		{Type: "TXT", Name: "_tidings.example.com"},
		{Type: "CNAME", Name: "a._domainkey.example.com"},
		{Type: "CNAME", Name: "b._domainkey.example.com"},
		{Type: "CNAME", Name: "c._domainkey.example.com"},
	}
	// found marks the records at the given indexes present.
	found := func(present ...int) []domains.Found {
		out := make([]domains.Found, len(recs))
		for i, r := range recs {
			out[i].Record = r
		}
		for _, i := range present {
			out[i].Present = true
		}
		return out
	}
	timedOut := found(0, 1, 2)
	timedOut[3].Err = errors.New("i/o timeout")
	created := t0
	for _, tc := range []struct {
		desc        string
		found       []domains.Found
		age         time.Duration
		current     string
		want        domains.Outcome
		msgContains []string
		msgLacks    []string
	}{
		{desc: "all present verifies a pending domain", found: found(0, 1, 2, 3), age: time.Minute, current: "pending",
			want: domains.Outcome{Status: "verified", Health: "healthy", Missing: []string{}}},
		{desc: "none present: verifying", found: found(), age: time.Hour, current: "pending",
			want:        domains.Outcome{Status: "verifying", Health: "degraded", Missing: []string{recs[0].Name, recs[1].Name, recs[2].Name, recs[3].Name}},
			msgContains: []string{"TXT _tidings.example.com", "CNAME a._domainkey", "CNAME c._domainkey", "72 hours"}},
		{desc: "some present: verifying, only the missing named", found: found(0, 2), age: time.Hour, current: "verifying",
			want:        domains.Outcome{Status: "verifying", Health: "degraded", Missing: []string{recs[1].Name, recs[3].Name}},
			msgContains: []string{"a._domainkey", "c._domainkey"}, msgLacks: []string{"_tidings", "b._domainkey"}},
		{desc: "just under 72 hours: still verifying", found: found(), age: 72*time.Hour - time.Second, current: "verifying",
			want: domains.Outcome{Status: "verifying", Health: "degraded", Missing: []string{recs[0].Name, recs[1].Name, recs[2].Name, recs[3].Name}}},
		{desc: "72 hours: failed", found: found(1), age: 72 * time.Hour, current: "verifying",
			want:        domains.Outcome{Status: "failed", Health: "degraded", Missing: []string{recs[0].Name, recs[2].Name, recs[3].Name}},
			msgContains: []string{"Verification failed"}},
		{desc: "pending past 72 hours fails at its first check", found: found(), age: 100 * time.Hour, current: "pending",
			want: domains.Outcome{Status: "failed", Health: "degraded", Missing: []string{recs[0].Name, recs[1].Name, recs[2].Name, recs[3].Name}}},
		{desc: "failed stays failed while records are missing", found: found(0, 1, 2), age: 200 * time.Hour, current: "failed",
			want: domains.Outcome{Status: "failed", Health: "degraded", Missing: []string{recs[3].Name}}},
		{desc: "failed recovers when all are present", found: found(0, 1, 2, 3), age: 200 * time.Hour, current: "failed",
			want: domains.Outcome{Status: "verified", Health: "healthy", Missing: []string{}}},
		{desc: "verified losing a record stays verified, degraded", found: found(0, 1, 3), age: 500 * time.Hour, current: "verified",
			want:        domains.Outcome{Status: "verified", Health: "degraded", Missing: []string{recs[2].Name}},
			msgContains: []string{"CNAME b._domainkey.example.com", "stays verified"}},
		{desc: "a failed lookup counts as missing and says so", found: timedOut, age: time.Hour, current: "verifying",
			want:        domains.Outcome{Status: "verifying", Health: "degraded", Missing: []string{recs[3].Name}},
			msgContains: []string{"CNAME c._domainkey.example.com (lookup failed: i/o timeout)"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got := domains.Evaluate(tc.found, created, created.Add(tc.age), tc.current)
			if got.Status != tc.want.Status || got.Health != tc.want.Health || strings.Join(got.Missing, ",") != strings.Join(tc.want.Missing, ",") || got.Missing == nil {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for _, s := range tc.msgContains {
				if !strings.Contains(got.Message, s) {
					t.Errorf("message %q lacks %q", got.Message, s)
				}
			}
			for _, s := range tc.msgLacks {
				if strings.Contains(got.Message, s) {
					t.Errorf("message %q names %q", got.Message, s)
				}
			}
		})
	}
}
