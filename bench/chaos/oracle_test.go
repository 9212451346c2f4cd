package main

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)

// cleanFacts is a small settled run every check passes: a drip of one step
// for one contact, a broadcast to two, a transactional send retried after
// a refusal, a batch message in doubt.
func cleanFacts() *Facts {
	return &Facts{
		Now: t0.Add(time.Hour), Grace: 10 * time.Second, RatePerSecond: 10, CapPerDay: 2,
		Window: &WindowFact{SequenceID: "trial", From: t0, To: t0.Add(time.Minute)},
		Steps:  map[string][]string{"drip": {"s1"}, "trial": {"w1"}},
		Requests: []Request{
			{At: t0.Add(1 * time.Second), SendID: "snd_1", To: "a@x", Unit: "seq:drip:s1:ctc_a", Answer: "202", Taken: true},
			{At: t0.Add(2 * time.Second), SendID: "snd_2", To: "a@x", Unit: "bc:bc-0:ctc_a", Answer: "202", Taken: true},
			{At: t0.Add(3 * time.Second), SendID: "snd_3", To: "b@x", Unit: "bc:bc-0:ctc_b", Answer: "400"},
			{At: t0.Add(4 * time.Second), SendID: "snd_4", To: "b@x", Unit: "tx:k1", Answer: "500"},
			{At: t0.Add(5 * time.Second), SendID: "snd_5", To: "b@x", Unit: "tx:k1", Answer: "202", Taken: true},
			{At: t0.Add(6 * time.Second), SendID: "snd_6", To: "b@x", Unit: "batch:k2:0", Answer: "hang", Taken: true},
			{At: t0.Add(7 * time.Second), SendID: "snd_7", To: "a@x", Unit: "seq:trial:w1:ctc_a", Answer: "drop-before"},
		},
		Records: []Record{
			{ID: "snd_1", ContactID: "ctc_a", To: "a@x", ScheduledSendID: "ss_1"},
			{ID: "snd_2", ContactID: "ctc_a", To: "a@x", BroadcastID: "brd_0"},
			{ID: "snd_5", ContactID: "ctc_b", To: "b@x"},
			{ID: "snd_6", ContactID: "ctc_b", To: "b@x", InDoubt: true},
			{ID: "snd_7", ContactID: "ctc_a", To: "a@x", InDoubt: true, ScheduledSendID: "ss_2"},
		},
		Scheduled: []Scheduled{
			{ID: "ss_1", EnrolmentID: "enr_1", SequenceID: "drip", StepID: "s1", ContactID: "ctc_a", Status: "sent", SendID: "snd_1"},
			{ID: "ss_2", EnrolmentID: "enr_2", SequenceID: "trial", StepID: "w1", ContactID: "ctc_a", Status: "sent", SendID: "snd_7"},
		},
		Enrolments: []Enrolment{{ID: "enr_1", SequenceID: "drip", ContactID: "ctc_a", Status: "completed"},
			{ID: "enr_2", SequenceID: "trial", ContactID: "ctc_a", Status: "completed"}},
		Broadcasts: []Broadcast{{ID: "brd_0", Template: "bc-0", Topic: "news", Status: "sent"}},
		Recipients: []Recipient{
			{BroadcastID: "brd_0", ContactID: "ctc_a", Status: "sent", SendID: "snd_2"},
			{BroadcastID: "brd_0", ContactID: "ctc_b", Status: "failed"},
		},
		Told:     []Told{{Unit: "tx:k1", Status: "sent", SendID: "snd_5"}, {Unit: "batch:k2:0", Status: "in_doubt", SendID: "snd_6"}},
		SignedUp: []string{"ctc_a"},
		Consent:  []Consent{{Email: "b@x", ContactID: "ctc_b", Kind: "topic:news", At: t0.Add(time.Second)}},
	}
}

// failed runs the oracle and returns the failing checks by name.
func failed(t *testing.T, f *Facts) map[string]Result {
	t.Helper()
	out := map[string]Result{}
	for _, r := range Check(f) {
		if r.Failed() {
			out[r.Name] = r
		}
	}
	return out
}

// only asserts that the named check, and it alone, fails.
func only(t *testing.T, f *Facts, name string) {
	t.Helper()
	got := failed(t, f)
	if _, ok := got[name]; !ok || len(got) != 1 {
		names := []string{}
		for n, r := range got {
			names = append(names, n+": "+strings.Join(r.Examples, "; "))
		}
		t.Fatalf("want only %s to fail, got %v", name, names)
	}
}

func TestCleanFactsPass(t *testing.T) {
	t.Parallel()
	if got := failed(t, cleanFacts()); len(got) != 0 {
		t.Fatalf("clean facts failed: %v", got)
	}
}

// A duplicate is two deliveries the provider took of one unit, even under
// two send ids each with its own record.
func TestDuplicateUnderFreshSendID(t *testing.T) {
	t.Parallel()
	f := cleanFacts()
	f.Requests = append(f.Requests, Request{At: t0.Add(9 * time.Second), SendID: "snd_9", To: "b@x", Unit: "tx:k1", Answer: "202", Taken: true})
	f.Records = append(f.Records, Record{ID: "snd_9", ContactID: "ctc_b", To: "b@x"})
	only(t, f, "duplicates")
}

func TestDuplicateOfSequenceStep(t *testing.T) {
	t.Parallel()
	f := cleanFacts()
	f.CapPerDay = 3
	f.Requests = append(f.Requests, Request{At: t0.Add(9 * time.Second), SendID: "snd_9", To: "a@x", Unit: "seq:drip:s1:ctc_a", Answer: "drop-after", Taken: true})
	f.Records = append(f.Records, Record{ID: "snd_9", ContactID: "ctc_a", To: "a@x", InDoubt: true})
	only(t, f, "duplicates")
}

func TestRequestWithoutRecord(t *testing.T) {
	t.Parallel()
	f := cleanFacts()
	f.Records = f.Records[1:] // snd_1's record deleted though the provider took it
	got := failed(t, f)
	if _, ok := got["requests-without-record"]; !ok {
		t.Fatalf("want requests-without-record, got %v", got)
	}
}

// A deleted contact's records go with it: no loss.
func TestRequestOfDeletedContact(t *testing.T) {
	t.Parallel()
	f := cleanFacts()
	f.Records = f.Records[1:]
	f.Scheduled = f.Scheduled[1:]
	f.Enrolments = f.Enrolments[1:]
	f.Consent = append(f.Consent, Consent{Email: "a@x", ContactID: "ctc_a", Kind: "deleted", At: t0.Add(time.Minute)})
	if got := failed(t, f); len(got) != 0 {
		t.Fatalf("got %v", got)
	}
}

func TestInDoubtWithoutRequest(t *testing.T) {
	t.Parallel()
	f := cleanFacts()
	f.Requests = f.Requests[:len(f.Requests)-1] // snd_7 never reached the provider
	only(t, f, "in-doubt-without-request")
}

func TestAcceptedWithoutRequest(t *testing.T) {
	t.Parallel()
	f := cleanFacts()
	f.Requests = f.Requests[1:] // snd_1 settled as accepted, never received
	only(t, f, "accepted-without-request")
}

// A record settled as accepted after the provider refused it is a loss
// too: no 202.
func TestAcceptedAfterRefusal(t *testing.T) {
	t.Parallel()
	f := cleanFacts()
	f.Records = append(f.Records, Record{ID: "snd_3", ContactID: "ctc_b", To: "b@x", BroadcastID: "brd_0"})
	got := failed(t, f)
	if _, ok := got["accepted-without-request"]; !ok {
		t.Fatalf("want accepted-without-request, got %v", got)
	}
}

func TestRecipientCancelledThoughTaken(t *testing.T) {
	t.Parallel()
	f := cleanFacts()
	f.Recipients[0].Status = "cancelled"
	only(t, f, "status-lies")
}

func TestRecipientQueuedThoughTaken(t *testing.T) {
	t.Parallel()
	f := cleanFacts()
	f.Recipients[0].Status = "queued"
	got := failed(t, f)
	if _, ok := got["status-lies"]; !ok {
		t.Fatalf("want status-lies, got %v", got)
	}
}

func TestScheduledCancelledThoughTaken(t *testing.T) {
	t.Parallel()
	f := cleanFacts()
	f.Scheduled[0].Status, f.Scheduled[0].CancelReason = "cancelled", "manual"
	got := failed(t, f)
	if _, ok := got["status-lies"]; !ok {
		t.Fatalf("want status-lies, got %v", got)
	}
}

func TestRefusedAnswerThoughTaken(t *testing.T) {
	t.Parallel()
	f := cleanFacts()
	f.Told[0] = Told{Unit: "tx:k1", Status: "refused"}
	only(t, f, "status-lies")
}

func TestSentStatusWithoutRecord(t *testing.T) {
	t.Parallel()
	f := cleanFacts()
	f.Told[1].SendID = "snd_nope"
	only(t, f, "status-unbacked")
}

func TestUnfinishedAndWaiting(t *testing.T) {
	t.Parallel()
	f := cleanFacts()
	f.Scheduled = append(f.Scheduled, Scheduled{ID: "ss_9", EnrolmentID: "enr_9", SequenceID: "drip", StepID: "s1",
		ContactID: "ctc_c", Status: "pending", ScheduledFor: f.Now.Add(time.Hour)})
	if got := failed(t, f); len(got) != 0 {
		t.Fatalf("a send waiting past the run failed: %v", got)
	}
	f.Scheduled[len(f.Scheduled)-1].ScheduledFor = f.Now.Add(-time.Minute)
	only(t, f, "unfinished")
	// A broadcast never accepted for sending owes nothing; one sending does.
	f = cleanFacts()
	f.Broadcasts = append(f.Broadcasts, Broadcast{ID: "brd_draft", Template: "bc-9", Status: "draft"})
	if got := failed(t, f); len(got) != 0 {
		t.Fatalf("a draft broadcast failed: %v", got)
	}
	f.Broadcasts[len(f.Broadcasts)-1].Status = "sending"
	only(t, f, "unfinished")
}

func TestDripsMissingStep(t *testing.T) {
	t.Parallel()
	f := cleanFacts()
	f.Steps["drip"] = []string{"s1", "s2"} // completed without s2
	only(t, f, "drips")
	f = cleanFacts()
	f.SignedUp = append(f.SignedUp, "ctc_z") // never enrolled
	only(t, f, "drips")
}

func TestConsentBreach(t *testing.T) {
	t.Parallel()
	f := cleanFacts()
	// a's opt-out of the topic, and a later broadcast message on it.
	f.Consent = append(f.Consent, Consent{Email: "a@x", ContactID: "ctc_a", Kind: "topic:news", At: t0.Add(-time.Minute)})
	only(t, f, "consent")
	// Within the grace it is fine.
	f.Consent[len(f.Consent)-1].At = t0.Add(-5 * time.Second)
	if got := failed(t, f); len(got) != 0 {
		t.Fatalf("within grace: %v", got)
	}
	// A suppression covers every message.
	f = cleanFacts()
	f.Consent = append(f.Consent, Consent{Email: "b@x", ContactID: "ctc_b", Kind: "suppressed", At: t0.Add(-time.Minute)})
	only(t, f, "consent")
}

func TestWindow(t *testing.T) {
	t.Parallel()
	f := cleanFacts()
	f.CapPerDay = 3
	f.Requests = append(f.Requests, Request{At: t0.Add(2 * time.Minute), SendID: "snd_7b", To: "a@x", Unit: "seq:trial:w1:ctc_a", Answer: "202", Taken: true})
	f.Records = append(f.Records, Record{ID: "snd_7b", ContactID: "ctc_a", To: "a@x", ScheduledSendID: "ss_2b"})
	only(t, f, "window")
}

func TestCap(t *testing.T) {
	t.Parallel()
	f := cleanFacts()
	f.CapPerDay = 1 // a got a drip step and a broadcast on one day
	only(t, f, "cap")
}

func TestRate(t *testing.T) {
	t.Parallel()
	f := cleanFacts()
	for i := range 20 {
		f.Requests = append(f.Requests, Request{At: t0.Add(time.Hour + time.Duration(i)*10*time.Millisecond), SendID: "x", Unit: "u", Answer: "429"})
	}
	f.RatePerSecond = 10 // 20 in 200 ms; allowed 10 + 2 bursts + 2 = 14
	only(t, f, "rate")
	// Refused by an outage and handed on at once: those requests are not
	// the rate's turns.
	for i := range 10 {
		f.Requests[len(f.Requests)-1-i].Answer = "outage"
	}
	if got := failed(t, f); len(got) != 0 {
		t.Fatalf("outage refusals counted in the rate: %v", got)
	}
}

// The fake SMTP finds the send id in the Message-ID and the unit in a
// quoted-printable part of a multipart message, a soft line break inside
// it, as the SMTP provider writes them.
func TestParseSMTP(t *testing.T) {
	t.Parallel()
	raw := "Message-ID: <snd_abc@mail.example>\r\n" +
		"Content-Type: multipart/alternative; boundary=\"b1\"\r\n\r\n" +
		"--b1\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n" +
		"Hello UNIT[seq:drip:s1:cnt=\r\n_1] bye=3D\r\n" +
		"--b1--\r\n"
	req := parseSMTP([]byte(raw))
	if req.SendID != "snd_abc" || req.Unit != "seq:drip:s1:cnt_1" {
		t.Fatalf("parsed %+v", req)
	}
}

// Side results count in the exit code like the oracle's own.
func TestSideResultsCount(t *testing.T) {
	t.Parallel()
	f := cleanFacts()
	f.Side = []Result{result("metrics", "x", []string{"sent: 1 vs 2"})}
	only(t, f, "metrics")
	if Report(func(string, ...any) {}, Check(f)) != 1 {
		t.Fatal("Report did not count the side result")
	}
}

func TestPickAnswerIsSeeded(t *testing.T) {
	t.Parallel()
	counts := map[string]int{}
	for i := range 2000 {
		a, _ := pickAnswer(7, "tx:k", i)
		b, _ := pickAnswer(7, "tx:k", i)
		if a != b {
			t.Fatalf("try %d: %s then %s", i, a, b)
		}
		counts[a]++
	}
	for _, a := range []string{"202", "429", "400", "500", "503", "hang", "drop-before", "drop-after"} {
		if counts[a] == 0 {
			t.Errorf("never answered %s in 2000 tries: %v", a, counts)
		}
	}
}

func TestParseMail(t *testing.T) {
	t.Parallel()
	raw := `{"personalizations":[{"to":[{"email":"a@x"}]}],"custom_args":{"send_id":"snd_1","tenant_id":"org"},
		"content":[{"type":"text/plain","value":" "},{"type":"text/html","value":"<p>Hi UNIT[bc:bc-3:ctc_a]</p>"}]}`
	r, err := parseMail([]byte(raw))
	if err != nil || r.SendID != "snd_1" || r.TenantID != "org" || r.To != "a@x" || r.Unit != "bc:bc-3:ctc_a" {
		t.Fatalf("%+v %v", r, err)
	}
}

func TestWorkerGroups(t *testing.T) {
	t.Parallel()
	g := workerGroups("sends,sends,webhooks+maintenance", 2)
	if len(g) != 3 || g["worker-sends-2"] != "sends" || g["worker-webhooks-maintenance-1"] != "webhooks,maintenance" {
		t.Fatalf("%v", g)
	}
	if g := workerGroups("", 2); len(g) != 2 || g["worker1"] != "" {
		t.Fatalf("%v", g)
	}
}
