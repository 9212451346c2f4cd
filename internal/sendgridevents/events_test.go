package sendgridevents

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// sampleBatch has the shape of SendGrid's documented sample events, with
// our custom_args (send_id, tenant_id) flattened in as SendGrid does.
const sampleBatch = `[
  {"email":"example@test.com","timestamp":1513299569,"smtp-id":"<14c5d75ce93.dfd.64b469@ismtpd-555>","event":"processed","category":"cat facts","sg_event_id":"rbtnWrG1DVDGGGFHFyun0A==","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.000000000000000000000","send_id":"snd_1","tenant_id":"ten_1"},
  {"email":"example@test.com","timestamp":1513299569,"smtp-id":"<14c5d75ce93.dfd.64b469@ismtpd-555>","event":"deferred","category":"cat facts","sg_event_id":"t7LEShmowp86DTdUW8M-GQ==","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.000000000000000000000","response":"400 try again later","attempt":"5","send_id":"snd_1","tenant_id":"ten_1"},
  {"email":"example@test.com","timestamp":1513299569,"smtp-id":"<14c5d75ce93.dfd.64b469@ismtpd-555>","event":"delivered","category":"cat facts","sg_event_id":"rWVYmVk90MjZJ9iohOBa3w==","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.000000000000000000000","response":"250 OK","send_id":"snd_1","tenant_id":"ten_1"},
  {"email":"example@test.com","timestamp":1513299569,"smtp-id":"<14c5d75ce93.dfd.64b469@ismtpd-555>","event":"open","sg_machine_open":false,"category":"cat facts","sg_event_id":"FOTFFO0ecsBE-zxFXfs6WA==","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.000000000000000000000","useragent":"Mozilla/4.0 (compatible; MSIE 6.1; Windows XP; .NET CLR 1.1.4322; .NET CLR 2.0.50727)","ip":"255.255.255.255","send_id":"snd_1","tenant_id":"ten_1"},
  {"email":"example@test.com","timestamp":1513299569,"smtp-id":"<14c5d75ce93.dfd.64b469@ismtpd-555>","event":"open","sg_machine_open":true,"category":["cat facts","dogs"],"sg_event_id":"machineopen00000000000==","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.000000000000000000000","send_id":"snd_1","tenant_id":"ten_1"},
  {"email":"example@test.com","timestamp":1513299569,"smtp-id":"<14c5d75ce93.dfd.64b469@ismtpd-555>","event":"click","category":"cat facts","sg_event_id":"kCAi1KttyQdEKHhdC-nuEA==","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.000000000000000000000","useragent":"Mozilla/4.0","ip":"255.255.255.255","url":"http://www.sendgrid.com/","send_id":"snd_1","tenant_id":"ten_1"},
  {"email":"example@test.com","timestamp":1513299569,"smtp-id":"<14c5d75ce93.dfd.64b469@ismtpd-555>","event":"bounce","category":"cat facts","sg_event_id":"6g4ZI7SA-xmRDv57GoPIPw==","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.000000000000000000000","reason":"500 unknown recipient","status":"5.0.0","type":"bounce","bounce_classification":"Invalid Address","send_id":"snd_2","tenant_id":"ten_1"},
  {"email":"example@test.com","timestamp":1513299569,"smtp-id":"<14c5d75ce93.dfd.64b469@ismtpd-555>","event":"bounce","category":"cat facts","sg_event_id":"blocked0000000000000000==","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.000000000000000000000","reason":"550 blocked for reputation","status":"5.7.1","type":"blocked","bounce_classification":"Reputation","send_id":"snd_3","tenant_id":"ten_1"},
  {"email":"example@test.com","timestamp":1513299569,"smtp-id":"<14c5d75ce93.dfd.64b469@ismtpd-555>","event":"dropped","category":"cat facts","sg_event_id":"zmzJhfJgAfUSOW80yEbPyw==","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.000000000000000000000","reason":"Bounced Address","status":"5.0.0","send_id":"snd_4","tenant_id":"ten_1"},
  {"email":"example@test.com","timestamp":1513299569,"smtp-id":"<14c5d75ce93.dfd.64b469@ismtpd-555>","event":"spamreport","category":"cat facts","sg_event_id":"37nvH5QBz858KGVYCM4uOA==","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.000000000000000000000","send_id":"snd_1","tenant_id":"ten_1"},
  {"email":"example@test.com","timestamp":1513299569,"smtp-id":"<14c5d75ce93.dfd.64b469@ismtpd-555>","event":"unsubscribe","category":"cat facts","sg_event_id":"Krfn-RCIaS0rqjgBXNj9Eg==","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.000000000000000000000","send_id":"snd_1","tenant_id":"ten_1"},
  {"email":"example@test.com","timestamp":1513299569,"smtp-id":"<14c5d75ce93.dfd.64b469@ismtpd-555>","event":"group_unsubscribe","category":"cat facts","sg_event_id":"ahSCB7xYcXFb-hEaawsPRw==","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.000000000000000000000","useragent":"Mozilla/4.0","ip":"255.255.255.255","url":"http://www.sendgrid.com/","asm_group_id":10,"send_id":"snd_1","tenant_id":"ten_1"},
  {"email":"example@test.com","timestamp":1513299569,"smtp-id":"<14c5d75ce93.dfd.64b469@ismtpd-555>","event":"group_resubscribe","category":"cat facts","sg_event_id":"w_u0vJhLT-OFfprar5N93g==","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.000000000000000000000","asm_group_id":10,"send_id":"snd_1","tenant_id":"ten_1"},
  {"email":"other@test.com","timestamp":1513299569,"event":"delivered","sg_event_id":"notours000000000000000==","sg_message_id":"x"},
  {"email":"example@test.com","timestamp":1513299569,"event":"delivered","sg_message_id":"x","send_id":"snd_1","tenant_id":"ten_1"},
  {"email":42,"event":"delivered","sg_event_id":"badtype","send_id":"snd_1","tenant_id":"ten_1"},
  {"email":"example@test.com","timestamp":"1513299570","event":"brand_new_event","sg_event_id":"new","send_id":"snd_1","tenant_id":"ten_1"}
]`

func TestParseSampleBatch(t *testing.T) {
	t.Parallel()
	events, err := Parse([]byte(sampleBatch))
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Unix(1513299569, 0).UTC()
	want := []struct {
		typ     string
		outcome Outcome
		reason  string
	}{
		{"processed", Processed, ""},
		{"deferred", Processed, ""},
		{"delivered", Delivered, ""},
		{"open", Opened, ""},
		{"open", Opened, ""},
		{"click", Clicked, ""},
		{"bounce", BouncedHard, ""},
		{"bounce", BouncedSoft, ""},
		{"dropped", Rejected, ""},
		{"spamreport", Complained, ""},
		{"unsubscribe", Unsubscribed, ""},
		{"group_unsubscribe", Unsubscribed, ""},
		{"group_resubscribe", Ignored, ""},
		{"delivered", Ignored, "no send_id or tenant_id"},
		{"delivered", Ignored, "no sg_event_id"},
		{"", Ignored, "malformed event"},
		{"brand_new_event", Ignored, ""},
	}
	if len(events) != len(want) {
		t.Fatalf("%d events, want %d", len(events), len(want))
	}
	for i, w := range want {
		e := events[i]
		if e.Type != w.typ || e.Outcome != w.outcome || e.IgnoreReason != w.reason {
			t.Errorf("event %d: %q %v %q, want %q %v %q", i, e.Type, e.Outcome, e.IgnoreReason, w.typ, w.outcome, w.reason)
		}
	}
	bounce := events[6]
	if bounce.EventID != "6g4ZI7SA-xmRDv57GoPIPw==" || bounce.SendID != "snd_2" || bounce.TenantID != "ten_1" ||
		bounce.Email != "example@test.com" || !bounce.Timestamp.Equal(ts) || bounce.BounceType != "bounce" ||
		bounce.BounceClassification != "Invalid Address" || bounce.Status != "5.0.0" || bounce.Reason != "500 unknown recipient" ||
		!strings.HasPrefix(bounce.MessageID, "14c5d75ce93.dfd.64b469.filter0001") {
		t.Errorf("bounce fields: %+v", bounce)
	}
	if c := events[5]; c.URL != "http://www.sendgrid.com/" {
		t.Errorf("click URL %q", c.URL)
	}
	if events[3].MachineOpen || !events[4].MachineOpen {
		t.Errorf("sg_machine_open: %v %v", events[3].MachineOpen, events[4].MachineOpen)
	}
	if got := events[16].Timestamp; !got.Equal(ts.Add(time.Second)) {
		t.Errorf("string timestamp read as %v", got)
	}
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc    string
		body    string
		tooBig  bool
		wantErr bool
	}{
		{desc: "empty", body: "", wantErr: true},
		{desc: "object", body: `{"event":"delivered"}`, wantErr: true},
		{desc: "array of strings", body: `["delivered"]`, wantErr: true},
		{desc: "array with null", body: `[null]`, wantErr: true},
		{desc: "truncated", body: `[{"event":"delivered"`, wantErr: true},
		{desc: "trailing garbage", body: `[] x`, wantErr: true},
		{desc: "too many events", body: "[" + strings.Repeat(`{},`, MaxEvents) + "{}]", tooBig: true, wantErr: true},
		{desc: "too large", body: `[{"reason":"` + strings.Repeat("x", MaxBodyBytes) + `"}]`, tooBig: true, wantErr: true},
		{desc: "empty array", body: `[]`},
		{desc: "empty objects", body: `[{}, {"event": null}]`},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.body))
			if (err != nil) != tt.wantErr || errors.Is(err, ErrTooLarge) != tt.tooBig {
				t.Fatalf("Parse err = %v, wantErr %v tooBig %v", err, tt.wantErr, tt.tooBig)
			}
		})
	}
}

func TestParseBounds(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 2000)
	events, err := Parse([]byte(`[{"event":"bounce","reason":"` + long + `","sg_event_id":"e","send_id":"` +
		strings.Repeat("s", 300) + `","tenant_id":"t","timestamp":-5}]`))
	if err != nil {
		t.Fatal(err)
	}
	e := events[0]
	if len(e.Reason) > maxReasonLen || !strings.HasPrefix(long, e.Reason) {
		t.Errorf("reason not cut on a rune boundary: %d bytes", len(e.Reason))
	}
	if e.Outcome != Ignored || e.IgnoreReason != "no send_id or tenant_id" {
		t.Errorf("over-long send id: %v %q", e.Outcome, e.IgnoreReason)
	}
	if !e.Timestamp.IsZero() {
		t.Errorf("negative timestamp read as %v", e.Timestamp)
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		event, bounceType string
		want              Outcome
	}{
		{"delivered", "", Delivered},
		{"bounce", "bounce", BouncedHard},
		{"bounce", "", BouncedHard},
		{"bounce", "blocked", BouncedSoft},
		{"blocked", "", BouncedSoft},
		{"dropped", "", Rejected},
		{"spamreport", "", Complained},
		{"open", "", Opened},
		{"click", "", Clicked},
		{"unsubscribe", "", Unsubscribed},
		{"group_unsubscribe", "", Unsubscribed},
		{"group_resubscribe", "", Ignored},
		{"processed", "", Processed},
		{"deferred", "", Processed},
		{"Delivered", "", Ignored},
		{"", "", Ignored},
	}
	for _, tt := range tests {
		if got := Classify(tt.event, tt.bounceType); got != tt.want {
			t.Errorf("Classify(%q, %q) = %v, want %v", tt.event, tt.bounceType, got, tt.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	// Small seeds: the engine minimises every new interesting input, and
	// that is slow for a multi-kilobyte batch. TestParseSampleBatch covers
	// the full sample.
	f.Add([]byte(`[{"event":"delivered","sg_event_id":"e","send_id":"s","tenant_id":"t","timestamp":1513299569}]`))
	f.Add([]byte(`[{"event":"bounce","type":"blocked","reason":"550 x","status":"5.7.1","sg_event_id":"e","send_id":"s","tenant_id":"t"}]`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`[{"event":"bounce","type":"blocked","timestamp":1.5e9,"status":5}]`))
	f.Add([]byte(`[{"timestamp":"x","sg_machine_open":"yes"}]`))
	f.Add([]byte(`[{"event":"click","url":"https://x/\u0000","reason":"\ud800","sg_event_id":"e\u0000","send_id":"s","tenant_id":"t"}]`))
	f.Add([]byte("[{\"event\":\"open\",\"email\":\"\xff\"}, 1]"))
	f.Add([]byte(`[{"event":"bounce","status":"` + strings.Repeat("5", 300) + `","timestamp":1e300}]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		events, err := Parse(body)
		var raws []json.RawMessage
		wellFormed := json.Unmarshal(body, &raws) == nil
		for _, r := range raws {
			if tr := bytes.TrimSpace(r); len(tr) == 0 || tr[0] != '{' {
				wellFormed = false
			}
		}
		if err != nil {
			// Only a body that is not an array of objects, or too large.
			if wellFormed && len(raws) <= MaxEvents && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("refused an array of %d objects: %v", len(raws), err)
			}
			return
		}
		if !wellFormed || len(events) != len(raws) {
			t.Fatalf("accepted %q as %d events", body, len(events))
		}
		if len(events) > MaxEvents {
			t.Fatalf("%d events", len(events))
		}
		for _, e := range events {
			if e.Outcome < Ignored || e.Outcome > Unsubscribed {
				t.Fatalf("outcome %d", e.Outcome)
			}
			if e.Outcome != Ignored && (e.EventID == "" || e.SendID == "" || e.TenantID == "") {
				t.Fatalf("unattributable event acted on: %+v", e)
			}
			if len(e.Reason) > maxReasonLen || len(e.Status) > maxFieldLen {
				t.Fatalf("unbounded field: %+v", e)
			}
			// Everything kept can be stored: valid UTF-8, no NUL.
			for _, s := range []string{e.Type, e.Email, e.EventID, e.MessageID, e.BounceType,
				e.BounceClassification, e.Status, e.Reason, e.URL, e.SendID, e.TenantID} {
				if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
					t.Fatalf("unstorable text %q in %+v", s, e)
				}
			}
			if !e.Timestamp.IsZero() && (e.Timestamp.Unix() <= 0 || e.Timestamp.Unix() >= 1<<40) {
				t.Fatalf("timestamp %v", e.Timestamp)
			}
		}
	})
}
