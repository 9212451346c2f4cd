package sesevents_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"tidings/internal/provider/ses/sestest"
	"tidings/internal/sendgridevents"
	"tidings/internal/sesevents"
)

func verifier(s *sestest.SNS, topics ...string) *sesevents.Verifier {
	return sesevents.NewVerifier([]string{s.Host()}, topics, s.Client())
}

// Both signature versions verify; the certificate is fetched once and
// cached.
func TestVerifyBothVersions(t *testing.T) {
	t.Parallel()
	s := sestest.NewSNS(t)
	v := verifier(s)
	for _, version := range []string{"1", "2"} {
		for range 2 {
			e := s.Notification(sestest.Event("Delivery", "snd_1", "ten_1", "a@b.test", "", time.Now()), version)
			got, err := v.Verify(context.Background(), sestest.Body(e))
			if err != nil || got.MessageID != e.MessageID {
				t.Fatalf("version %s: %v", version, err)
			}
		}
	}
	if n := s.CertFetches(); n != 1 {
		t.Fatalf("certificate fetched %d times, want once (cached)", n)
	}
}

// Unsigned, tampered, wrong version, a certificate from a host not
// allowed (even one serving the right certificate), a plain-HTTP
// certificate URL, or another topic: refused.
func TestVerifyRefuses(t *testing.T) {
	t.Parallel()
	s := sestest.NewSNS(t)
	other := sestest.NewSNS(t) // a valid signer on a host not allowed
	v := verifier(s, s.TopicArn)
	msg := sestest.Event("Bounce", "snd_1", "ten_1", "a@b.test", "Permanent", time.Now())
	cases := []struct {
		desc string
		edit func(e *sesevents.Envelope)
	}{
		{"unsigned", func(e *sesevents.Envelope) { e.Signature = "" }},
		{"tampered message", func(e *sesevents.Envelope) { e.Message = strings.Replace(e.Message, "Permanent", "Transient", 1) }},
		{"tampered topic", func(e *sesevents.Envelope) { e.TopicArn += "x" }},
		{"unknown version", func(e *sesevents.Envelope) { e.SignatureVersion = "3" }},
		{"version swapped", func(e *sesevents.Envelope) { e.SignatureVersion = "1" }},
		{"certificate on another host", func(e *sesevents.Envelope) { other.Sign(e, "2") }},
		{"certificate over http", func(e *sesevents.Envelope) {
			e.SigningCertURL = strings.Replace(e.SigningCertURL, "https://", "http://", 1)
		}},
		{"certificate URL with credentials", func(e *sesevents.Envelope) {
			e.SigningCertURL = strings.Replace(e.SigningCertURL, "https://", "https://u:p@", 1)
		}},
		{"garbage signature", func(e *sesevents.Envelope) { e.Signature = "!!!" }},
	}
	for _, c := range cases {
		e := s.Notification(msg, "2")
		c.edit(e)
		if _, err := v.Verify(context.Background(), sestest.Body(e)); !errors.Is(err, sesevents.ErrRefused) {
			t.Errorf("%s: %v, want refused", c.desc, err)
		}
	}
	// Another topic, correctly signed by SNS: refused by the allowlist.
	s2 := sestest.NewSNS(t)
	s2.TopicArn = "arn:aws:sns:eu-west-1:999999999999:someone-else"
	e := s2.Notification(msg, "2")
	if _, err := sesevents.NewVerifier([]string{s2.Host()}, []string{s.TopicArn}, s2.Client()).Verify(context.Background(), sestest.Body(e)); !errors.Is(err, sesevents.ErrRefused) {
		t.Errorf("another topic: %v", err)
	}
	for _, body := range []string{"", "{}", "[1]", `{"Type":"Notification"}`} {
		if _, err := v.Verify(context.Background(), []byte(body)); !errors.Is(err, sesevents.ErrRefused) {
			t.Errorf("body %q: %v", body, err)
		}
	}
}

// A subscription's confirmation is confirmed by fetching its SubscribeURL,
// only on an allowed host.
func TestConfirmSubscription(t *testing.T) {
	t.Parallel()
	s := sestest.NewSNS(t)
	v := verifier(s)
	e, err := v.Verify(context.Background(), sestest.Body(s.Confirmation("1")))
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Confirm(context.Background(), e); err != nil || s.Confirmed() != 1 {
		t.Fatalf("confirm: %v, confirmed %d", err, s.Confirmed())
	}
	bad := s.Confirmation("2")
	bad.SubscribeURL = "https://attacker.example/?Action=ConfirmSubscription"
	s.Sign(bad, "2")
	e, err = v.Verify(context.Background(), sestest.Body(bad))
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Confirm(context.Background(), e); !errors.Is(err, sesevents.ErrRefused) || s.Confirmed() != 1 {
		t.Fatalf("SubscribeURL elsewhere: %v", err)
	}
}

// SES's event types map to outcomes (ADDENDUM 22).
func TestParse(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		eventType, bounceType string
		want                  sendgridevents.Outcome
	}{
		{"Delivery", "", sendgridevents.Delivered},
		{"Bounce", "Permanent", sendgridevents.BouncedHard},
		{"Bounce", "Transient", sendgridevents.BouncedSoft},
		{"Bounce", "Undetermined", sendgridevents.BouncedSoft},
		{"Complaint", "", sendgridevents.Complained},
		{"Open", "", sendgridevents.Opened},
		{"Click", "", sendgridevents.Clicked},
		{"Send", "", sendgridevents.Processed},
		{"Rendering Failure", "", sendgridevents.Ignored},
	}
	for _, c := range cases {
		e := Parse(c.eventType, c.bounceType, "snd_1", "ten_1", at)
		if e.Outcome != c.want || (c.want != sendgridevents.Ignored && (e.SendID != "snd_1" || e.TenantID != "ten_1" || e.EventID == "")) {
			t.Errorf("%s/%s: %+v, want %v", c.eventType, c.bounceType, e, c.want)
		}
		if c.want != sendgridevents.Ignored && c.eventType != "Send" && !e.At.Equal(at) {
			t.Errorf("%s: at %v", c.eventType, e.At)
		}
	}
	if e := Parse("Delivery", "", "", "ten_1", at); e.Outcome != sendgridevents.Ignored || e.IgnoreReason == "" {
		t.Errorf("no send_id tag: %+v", e)
	}
	if e := sesevents.Parse(&sesevents.Envelope{MessageID: "x", Message: "not json"}); e.Outcome != sendgridevents.Ignored {
		t.Errorf("not json: %+v", e)
	}
}

// Parse builds a notification's event as the apply path reads it.
func Parse(eventType, bounceType, sendID, tenantID string, at time.Time) sesevents.Event {
	e := &sesevents.Envelope{Type: sesevents.TypeNotification, MessageID: "m-" + eventType + bounceType,
		Message: string(sestest.Event(eventType, sendID, tenantID, "a@b.test", bounceType, at))}
	return sesevents.Parse(e)
}

// What is stored of a verified notification parses as the signed body
// does (rows stored before keep the whole body), without the signature.
func TestStoredParsesAsTheSignedBody(t *testing.T) {
	t.Parallel()
	s := sestest.NewSNS(t)
	e := s.Notification(sestest.Event("Bounce", "snd_1", "ten_1", "a@b.test", "Permanent", time.Now()), "2")
	stored := sesevents.Stored(e)
	if strings.Contains(string(stored), e.Signature) || strings.Contains(string(stored), "SigningCertURL") {
		t.Fatalf("stored keeps the signature: %s", stored)
	}
	a, err1 := sesevents.ParseStored(stored)
	b, err2 := sesevents.ParseStored(sestest.Body(e))
	if err1 != nil || err2 != nil || a != b || a.Outcome != sendgridevents.BouncedHard || a.EventID != e.MessageID || a.SendID != "snd_1" {
		t.Fatalf("stored %+v %v; signed body %+v %v", a, err1, b, err2)
	}
}
