package main

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// The oracle judges a run by what the fake provider actually received,
// not by what the system says it did (docs/decisions.md "The chaos
// oracle"). Every message of the workload names its unit in its body
// (UNIT[...]): the thing that must reach the provider at most once,
// whatever send ids its attempts had. Facts is everything it reads: the
// fake's log, the database's rows and what the clients were told,
// gathered after the run settled and kept as JSON (-facts), so that
// `chaos -check FILE` judges a run again without processes and the
// self-test can plant anomalies in them.

// Facts is a settled run as the oracle sees it.
type Facts struct {
	Seed int64     `json:"seed"`
	Now  time.Time `json:"now"` // when the facts were gathered
	// RatePerSecond is PROVIDER_RATE_PER_SECOND (0: none).
	RatePerSecond int `json:"ratePerSecond"`
	// Cap is the tenant's frequency cap per UTC day (0: none).
	CapPerDay int `json:"capPerDay"`
	// Window is the windowed sequence's send window today, UTC.
	Window *WindowFact `json:"window,omitempty"`
	// Grace is how long after an opt-out (or a window's end) a message
	// already past its last check may still reach the provider.
	Grace time.Duration `json:"grace"`

	Requests   []Request   `json:"requests"`
	Records    []Record    `json:"records"`
	Scheduled  []Scheduled `json:"scheduled"`
	Recipients []Recipient `json:"recipients"`
	Broadcasts []Broadcast `json:"broadcasts"`
	Enrolments []Enrolment `json:"enrolments"`
	// Steps are the email steps of each sequence, in order.
	Steps map[string][]string `json:"steps"`
	// Told is what the clients of transactional and batch sends were
	// answered last for each unit.
	Told []Told `json:"told"`
	// Consent is every opt-out the workload made, when its answer came.
	Consent []Consent `json:"consent"`
	// SignedUp are the contacts whose signed_up event was accepted (each
	// must be enrolled in the drip).
	SignedUp []string `json:"signedUp"`
	// Side holds the checks made against the database and the webhook
	// receiver while gathering (events stored, webhooks, metrics).
	Side []Result `json:"side"`
	// Kills are the SIGKILLs the run sent (api and worker processes).
	Kills []Kill `json:"kills,omitempty"`
}

// Kill is one SIGKILL: the process (api1, worker2...) and when.
type Kill struct {
	Process string    `json:"process"`
	At      time.Time `json:"at"`
}

// Request is one request the fake provider got, whatever it answered.
type Request struct {
	N        int64     `json:"n"`
	At       time.Time `json:"at"`
	SendID   string    `json:"sendId"`
	TenantID string    `json:"tenantId"`
	To       string    `json:"to"`
	Unit     string    `json:"unit"`
	// Answer: 202, 429, 400, 500, 503, hang (no answer before the client
	// gave up), drop-before (cut before the body was read), drop-after
	// (cut after).
	Answer string `json:"answer"`
	// Taken: the provider has the message (202, hang, half of drop-after).
	Taken bool `json:"taken"`
	// Provider: "" for the fake SendGrid, "smtp" for the pool's second
	// provider (its answer is 250). SendGrid answers "outage" (a 503)
	// while a provider outage lasts.
	Provider string `json:"provider,omitempty"`
}

// Record is a send record (sends).
type Record struct {
	ID        string `json:"id"`
	ContactID string `json:"contactId"`
	To        string `json:"to"`
	InDoubt   bool   `json:"inDoubt"`
	// Sending: the attempt has not ended (its answer is not written).
	Sending         bool   `json:"sending,omitempty"`
	BroadcastID     string `json:"broadcastId,omitempty"`
	ScheduledSendID string `json:"scheduledSendId,omitempty"`
	// SentAt is when the record was written (its group's turn to leave).
	SentAt time.Time `json:"sentAt"`
}

// Scheduled is a scheduled send.
type Scheduled struct {
	ID           string    `json:"id"`
	EnrolmentID  string    `json:"enrolmentId"`
	SequenceID   string    `json:"sequenceId"`
	StepID       string    `json:"stepId"`
	ContactID    string    `json:"contactId"`
	Status       string    `json:"status"`
	CancelReason string    `json:"cancelReason,omitempty"`
	SendID       string    `json:"sendId,omitempty"`
	ScheduledFor time.Time `json:"scheduledFor"`
}

// Recipient is a broadcast recipient.
type Recipient struct {
	BroadcastID string `json:"broadcastId"`
	ContactID   string `json:"contactId"`
	Status      string `json:"status"`
	SkipReason  string `json:"skipReason,omitempty"`
	SendID      string `json:"sendId,omitempty"`
}

// Broadcast is a broadcast; Template names its unit (bc:<template>:<contact>).
type Broadcast struct {
	ID       string `json:"id"`
	Template string `json:"template"`
	Topic    string `json:"topic,omitempty"`
	Status   string `json:"status"`
}

// Enrolment is a contact's enrolment in a sequence.
type Enrolment struct {
	ID         string `json:"id"`
	SequenceID string `json:"sequenceId"`
	ContactID  string `json:"contactId"`
	Status     string `json:"status"`
	ExitReason string `json:"exitReason,omitempty"`
}

// Told is the last answer a client had for a unit of a transactional or
// batch send: sent (with the send id), in_doubt (with it), refused (the
// provider refused; the client gave up), or failed (no answer; nothing
// known).
type Told struct {
	Unit   string `json:"unit"`
	Status string `json:"status"`
	SendID string `json:"sendId,omitempty"`
	// Answers are the HTTP status and error code of every attempt, in
	// order: the evidence of how the client came to its last answer.
	Answers []string `json:"answers,omitempty"`
}

// Consent is an opt-out: kind topic:<id>, suppressed or deleted, of the
// contact with that email, answered at At.
type Consent struct {
	Email     string    `json:"email"`
	ContactID string    `json:"contactId"`
	Kind      string    `json:"kind"`
	At        time.Time `json:"at"`
}

// WindowFact is a sequence's send window as instants.
type WindowFact struct {
	SequenceID string    `json:"sequenceId"`
	From       time.Time `json:"from"`
	To         time.Time `json:"to"`
}

// Result is one check: its name, how many anomalies it found and a few
// of them as evidence. Info results never fail the run.
type Result struct {
	Name     string   `json:"name"`
	Count    int      `json:"count"`
	Summary  string   `json:"summary"`
	Examples []string `json:"examples,omitempty"`
	Info     bool     `json:"info,omitempty"`
}

// Failed reports whether the result fails the run.
func (r Result) Failed() bool { return !r.Info && r.Count > 0 }

// maxExamples bounds the evidence printed per check.
const maxExamples = 8

type results struct{ list []Result }

func (rs *results) add(name, summary string, examples []string) {
	n := len(examples)
	sort.Strings(examples)
	if len(examples) > maxExamples {
		examples = examples[:maxExamples]
	}
	rs.list = append(rs.list, Result{Name: name, Count: n, Summary: summary, Examples: examples})
}

func (rs *results) info(name, summary string, n int, examples []string) {
	sort.Strings(examples)
	if len(examples) > maxExamples {
		examples = examples[:maxExamples]
	}
	rs.list = append(rs.list, Result{Name: name, Count: n, Summary: summary, Examples: examples, Info: true})
}

// Unit keys. A sequence step's message names seq:<sequence>:<step>:<contact>,
// a broadcast recipient's bc:<template>:<contact> (one template per
// broadcast), a transactional send's tx:<key> and a batch message's
// batch:<key>:<index>.
func seqUnit(seq, step, contact string) string { return "seq:" + seq + ":" + step + ":" + contact }
func bcUnit(template, contact string) string   { return "bc:" + template + ":" + contact }

// view is the indexes the checks share.
type view struct {
	f          *Facts
	takenBy    map[string][]Request // unit -> requests the provider took
	bySend     map[string][]Request // send id -> every request
	records    map[string]Record
	deleted    map[string]time.Time // email -> deleted at
	gone       map[string]bool      // contact id -> deleted
	bcTemplate map[string]Broadcast // broadcast id -> broadcast
}

func newView(f *Facts) *view {
	v := &view{f: f, takenBy: map[string][]Request{}, bySend: map[string][]Request{}, records: map[string]Record{},
		deleted: map[string]time.Time{}, gone: map[string]bool{}, bcTemplate: map[string]Broadcast{}}
	for _, r := range f.Requests {
		if r.Taken {
			v.takenBy[r.Unit] = append(v.takenBy[r.Unit], r)
		}
		v.bySend[r.SendID] = append(v.bySend[r.SendID], r)
	}
	for _, r := range f.Records {
		v.records[r.ID] = r
	}
	for _, c := range f.Consent {
		if c.Kind == "deleted" {
			v.deleted[c.Email] = c.At
			v.gone[c.ContactID] = true
		}
	}
	for _, b := range f.Broadcasts {
		v.bcTemplate[b.ID] = b
	}
	return v
}

// Check runs every check over f, in a fixed order.
func Check(f *Facts) []Result {
	v := newView(f)
	rs := &results{}
	checkDuplicates(v, rs)
	checkLedger(v, rs)
	checkStatuses(v, rs)
	checkUnfinished(v, rs)
	checkDrips(v, rs)
	checkConsent(v, rs)
	checkWindow(v, rs)
	checkCap(v, rs)
	checkRate(v, rs)
	rs.list = append(rs.list, f.Side...)
	return rs.list
}

// checkDuplicates: two deliveries the provider took of one unit, whatever
// their send ids.
func checkDuplicates(v *view, rs *results) {
	var ex []string
	for unit, reqs := range v.takenBy {
		if len(reqs) > 1 {
			ids := make([]string, len(reqs))
			for i, r := range reqs {
				ids[i] = fmt.Sprintf("%s(%s)", r.SendID, r.Answer)
			}
			ex = append(ex, fmt.Sprintf("%s taken %d times: %s", unit, len(reqs), strings.Join(ids, " ")))
		}
	}
	rs.add("duplicates", "units the provider took more than once (per sequence step of a contact, broadcast recipient, Idempotency-Key)", ex)
}

// checkLedger compares the provider's requests with the send records, per
// send id.
func checkLedger(v *view, rs *results) {
	var noRecord, doubtNoReq, acceptedNoReq []string
	seen := map[string]bool{}
	for _, r := range v.f.Requests {
		if !r.Taken || seen[r.SendID] {
			continue
		}
		seen[r.SendID] = true
		if _, ok := v.records[r.SendID]; ok {
			continue
		}
		if _, gone := v.deleted[r.To]; gone {
			continue // its records went with the contact
		}
		noRecord = append(noRecord, fmt.Sprintf("%s %s to %s (%s)", r.SendID, r.Unit, r.To, r.Answer))
	}
	inDoubt, doubtTaken, atKill := 0, 0, 0
	noReqKind := map[string]int{}
	for _, rec := range v.f.Records {
		reqs := v.bySend[rec.ID]
		if rec.InDoubt {
			inDoubt++
			if len(reqs) == 0 {
				note := ""
				if k, ok := v.killAfter(rec); ok {
					atKill++
					note = fmt.Sprintf(", %s SIGKILLed %s after it was written", k.Process, k.At.Sub(rec.SentAt).Round(time.Millisecond))
				}
				doubtNoReq = append(doubtNoReq, fmt.Sprintf("%s to %s (%s%s)", rec.ID, rec.To, kindOf(rec), note))
				noReqKind[kindOf(rec)]++
			}
			for _, r := range reqs {
				if r.Taken {
					doubtTaken++
					break
				}
			}
			continue
		}
		ok := false
		for _, r := range reqs {
			ok = ok || r.Answer == "202" || r.Answer == "250"
		}
		if !ok {
			answers := []string{}
			for _, r := range reqs {
				answers = append(answers, r.Answer)
			}
			acceptedNoReq = append(acceptedNoReq, fmt.Sprintf("%s to %s (requests: %v)", rec.ID, rec.To, answers))
		}
	}
	rs.add("requests-without-record", "messages the provider took whose send record does not exist (deleted as refused, or never written)", noRecord)
	rs.add("in-doubt-without-request", fmt.Sprintf("records in doubt whose message never reached the provider (broadcast %d, step %d, transactional %d)",
		noReqKind["broadcast"], noReqKind["step"], noReqKind["transactional"]), doubtNoReq)
	// Evidence, never an excuse: a record written just before a process
	// that could have been sending it was killed is the crash window the
	// ledger cannot close (the record must come first); it still fails
	// the run (docs/decisions.md "The chaos oracle").
	rs.info("in-doubt-without-request-at-a-kill", fmt.Sprintf("of those, records written less than %s before a SIGKILL of a process that sends their kind", killWindow),
		atKill, nil)
	rs.add("accepted-without-request", "records settled as accepted without a request the provider answered 202", acceptedNoReq)
	rs.info("in-doubt", fmt.Sprintf("records in doubt (kept, never sent again); the provider had taken %d of them", doubtTaken), inDoubt, nil)
}

// killWindow bounds how long after its record's write a kill can have
// stopped a message's request: a group's calls start right after its
// commit, and a loaded machine may delay them a little.
const killWindow = 2 * time.Second

// killAfter finds the first SIGKILL of a process that sends rec's kind (a
// worker for steps and broadcasts, an api for transactional sends) within
// killWindow after rec was written.
func (v *view) killAfter(rec Record) (Kill, bool) {
	prefix := "worker"
	if kindOf(rec) == "transactional" {
		prefix = "api"
	}
	for _, k := range v.f.Kills {
		if strings.HasPrefix(k.Process, prefix) && !k.At.Before(rec.SentAt) && k.At.Sub(rec.SentAt) < killWindow {
			return k, true
		}
	}
	return Kill{}, false
}

// kindOf says what a record is for.
func kindOf(r Record) string {
	switch {
	case r.BroadcastID != "":
		return "broadcast"
	case r.ScheduledSendID != "":
		return "step"
	}
	return "transactional"
}

// checkStatuses: statuses that disagree with what the provider took.
func checkStatuses(v *view, rs *results) {
	var lies, unbacked []string
	for _, r := range v.f.Recipients {
		b := v.bcTemplate[r.BroadcastID]
		unit := bcUnit(b.Template, r.ContactID)
		taken := len(v.takenBy[unit]) > 0
		switch {
		case r.Status != "sent" && taken:
			lies = append(lies, fmt.Sprintf("recipient %s of %s is %s %s but the provider took %s at %s%s", r.ContactID, r.BroadcastID, r.Status, r.SkipReason,
				v.takenBy[unit][0].SendID, v.takenBy[unit][0].At.Format(time.StampMilli), v.goneNote(r.ContactID)))
		case r.Status == "sent":
			if _, ok := v.records[r.SendID]; !ok && !v.gone[r.ContactID] {
				unbacked = append(unbacked, fmt.Sprintf("recipient %s of %s is sent as %q, which has no record", r.ContactID, r.BroadcastID, r.SendID))
			} else if taken && v.takenBy[unit][0].SendID != r.SendID {
				lies = append(lies, fmt.Sprintf("recipient %s of %s names %s but the provider took %s", r.ContactID, r.BroadcastID, r.SendID, v.takenBy[unit][0].SendID))
			}
		}
	}
	for _, s := range v.f.Scheduled {
		unit := seqUnit(s.SequenceID, s.StepID, s.ContactID)
		taken := len(v.takenBy[unit]) > 0
		switch {
		case s.Status != "sent" && taken:
			lies = append(lies, fmt.Sprintf("scheduled send %s (%s) is %s %s but the provider took %s at %s%s", s.ID, unit, s.Status, s.CancelReason,
				v.takenBy[unit][0].SendID, v.takenBy[unit][0].At.Format(time.StampMilli), v.goneNote(s.ContactID)))
		case s.Status == "sent" && s.SendID != "":
			if _, ok := v.records[s.SendID]; !ok && !v.gone[s.ContactID] {
				unbacked = append(unbacked, fmt.Sprintf("scheduled send %s (%s) is sent as %q, which has no record", s.ID, unit, s.SendID))
			}
		}
	}
	for _, t := range v.f.Told {
		taken := v.takenBy[t.Unit]
		switch t.Status {
		case "refused":
			if len(taken) > 0 {
				lies = append(lies, fmt.Sprintf("%s was answered refused but the provider took %s (answers: %s)", t.Unit, taken[0].SendID, strings.Join(t.Answers, ", ")))
			}
		case "sent", "in_doubt":
			if _, ok := v.records[t.SendID]; !ok && !v.deletedUnit(taken) {
				unbacked = append(unbacked, fmt.Sprintf("%s was answered %s as %s, which has no record", t.Unit, t.Status, t.SendID))
			}
			if t.Status == "sent" && len(taken) > 0 && taken[0].SendID != t.SendID {
				lies = append(lies, fmt.Sprintf("%s was answered sent as %s but the provider took %s", t.Unit, t.SendID, taken[0].SendID))
			}
		}
	}
	rs.add("status-lies", "statuses and answers that disagree with the provider (not sent, cancelled, refused... though it took the message)", lies)
	rs.add("status-unbacked", "statuses and answers naming a send that has no record", unbacked)
}

// goneNote says when a contact was deleted, for the evidence.
func (v *view) goneNote(contactID string) string {
	for _, c := range v.f.Consent {
		if c.ContactID == contactID && c.Kind == "deleted" {
			return " (contact deleted, answered at " + c.At.Format(time.StampMilli) + ")"
		}
	}
	return ""
}

func (v *view) deletedUnit(reqs []Request) bool {
	for _, r := range reqs {
		if _, ok := v.deleted[r.To]; ok {
			return true
		}
	}
	return false
}

// checkUnfinished: work that should have ended and did not. A scheduled
// send whose time is still ahead (a window or cap moved it) is waiting,
// not lost.
func checkUnfinished(v *view, rs *results) {
	var open []string
	waiting, dead := 0, 0
	ahead := v.f.Now.Add(time.Minute)
	for _, s := range v.f.Scheduled {
		switch s.Status {
		case "pending", "failed", "claimed":
			if s.Status != "claimed" && s.ScheduledFor.After(ahead) {
				waiting++
				continue
			}
			open = append(open, fmt.Sprintf("scheduled send %s %s due %s", s.ID, s.Status, s.ScheduledFor.Format(time.TimeOnly)))
		case "dead":
			dead++ // refused for good; a dead one the provider took is a lie
		}
	}
	for _, r := range v.f.Records {
		if r.Sending {
			open = append(open, fmt.Sprintf("send %s still sending", r.ID))
		}
	}
	for _, b := range v.f.Broadcasts {
		// A draft was never accepted for sending (its send request failed
		// every try as the load ended): nothing is owed for it.
		if b.Status != "sent" && b.Status != "cancelled" && b.Status != "draft" {
			open = append(open, fmt.Sprintf("broadcast %s still %s", b.ID, b.Status))
		}
	}
	for _, r := range v.f.Recipients {
		if r.Status == "queued" {
			open = append(open, fmt.Sprintf("recipient %s of %s still queued", r.ContactID, r.BroadcastID))
		}
	}
	rs.add("unfinished", "scheduled sends, records, broadcasts and recipients left pending, failed, claimed, sending or queued", open)
	rs.info("waiting", "scheduled sends moved past the run by a window or the cap", waiting, nil)
	rs.info("dead", "scheduled sends dead (the provider refused them for good)", dead, nil)
}

// checkDrips: every accepted signed_up enrolled its contact, and every
// enrolment has a scheduled send for each email step it reached: all of
// them when it completed, one open while it is active.
func checkDrips(v *view, rs *results) {
	var bad []string
	byEnrol := map[string]map[string]Scheduled{}
	for _, s := range v.f.Scheduled {
		if byEnrol[s.EnrolmentID] == nil {
			byEnrol[s.EnrolmentID] = map[string]Scheduled{}
		}
		byEnrol[s.EnrolmentID][s.StepID] = s
	}
	enrolled := map[string]bool{}
	for _, e := range v.f.Enrolments {
		if e.SequenceID == "drip" {
			enrolled[e.ContactID] = true
		}
		steps := v.f.Steps[e.SequenceID]
		got := byEnrol[e.ID]
		switch e.Status {
		case "completed":
			for _, st := range steps {
				if s, ok := got[st]; !ok || s.Status != "sent" {
					bad = append(bad, fmt.Sprintf("enrolment %s of %s completed, step %s %s", e.ID, e.ContactID, st, statusOf(s, ok)))
				}
			}
		case "active":
			openStep := false
			for _, s := range got {
				openStep = openStep || s.Status == "pending" || s.Status == "claimed" || s.Status == "failed"
			}
			if !openStep {
				bad = append(bad, fmt.Sprintf("enrolment %s of %s active with no step pending (%d of %d written)", e.ID, e.ContactID, len(got), len(steps)))
			}
		}
	}
	gone := map[string]bool{}
	for _, c := range v.f.Consent {
		gone[c.ContactID] = gone[c.ContactID] || c.Kind == "deleted"
	}
	for _, c := range v.f.SignedUp {
		if !enrolled[c] && !gone[c] {
			bad = append(bad, fmt.Sprintf("contact %s: signed_up accepted, not enrolled in the drip", c))
		}
	}
	rs.add("drips", "enrolments missing a step (completed without every step sent, active with none pending) or accepted signed_up events not enrolled", bad)
}

func statusOf(s Scheduled, ok bool) string {
	if !ok {
		return "never written"
	}
	return s.Status + " " + s.CancelReason
}

// checkConsent: no message reached the provider for a contact after it
// left (topic opt-out for that topic's messages, suppression for any,
// deletion for any), past the grace of a message already checked.
func checkConsent(v *view, rs *results) {
	topicOf := map[string]string{}
	for _, b := range v.f.Broadcasts {
		topicOf["bc:"+b.Template+":"] = b.Topic
	}
	var ex []string
	for _, c := range v.f.Consent {
		for _, r := range v.f.Requests {
			if !r.Taken || r.To != c.Email || !r.At.After(c.At.Add(v.f.Grace)) {
				continue
			}
			applies := true
			if t, ok := strings.CutPrefix(c.Kind, "topic:"); ok {
				applies = topicOf[unitPrefix(r.Unit)] == t && t != ""
			}
			if applies {
				ex = append(ex, fmt.Sprintf("%s (%s at %s) got %s %s at %s", c.Email, c.Kind, c.At.Format(time.StampMilli), r.Unit, r.SendID, r.At.Format(time.StampMilli)))
			}
		}
	}
	rs.add("consent", "messages taken after the contact opted out of their topic, was suppressed or deleted (plus grace)", ex)
}

// unitPrefix is a broadcast unit without its contact: bc:<template>:.
func unitPrefix(unit string) string {
	if !strings.HasPrefix(unit, "bc:") {
		return ""
	}
	i := strings.LastIndex(unit, ":")
	return unit[:i+1]
}

// checkWindow: the windowed sequence's messages reached the provider only
// inside its window (plus grace for one already claimed at its end).
func checkWindow(v *view, rs *results) {
	w := v.f.Window
	var ex []string
	n := 0
	if w != nil {
		prefix := "seq:" + w.SequenceID + ":"
		for _, r := range v.f.Requests {
			if !r.Taken || !strings.HasPrefix(r.Unit, prefix) {
				continue
			}
			n++
			if r.At.Before(w.From.Add(-time.Second)) || r.At.After(w.To.Add(v.f.Grace)) {
				ex = append(ex, fmt.Sprintf("%s %s at %s, window %s-%s", r.Unit, r.SendID, r.At.Format(time.TimeOnly),
					w.From.Format(time.TimeOnly), w.To.Format(time.TimeOnly)))
			}
		}
	}
	rs.add("window", fmt.Sprintf("messages of the windowed sequence taken outside its window (of %d taken)", n), ex)
}

// checkCap: no contact got more sequence and broadcast messages in a UTC
// day than the cap (transactional sends do not count).
func checkCap(v *view, rs *results) {
	var ex []string
	if v.f.CapPerDay > 0 {
		per := map[string]int{}
		for _, r := range v.f.Requests {
			if r.Taken && (strings.HasPrefix(r.Unit, "seq:") || strings.HasPrefix(r.Unit, "bc:")) {
				per[r.To+" "+r.At.UTC().Format(time.DateOnly)]++
			}
		}
		for k, n := range per {
			if n > v.f.CapPerDay {
				ex = append(ex, fmt.Sprintf("%s: %d messages, cap %d", k, n, v.f.CapPerDay))
			}
		}
	}
	rs.add("cap", "contacts over the frequency cap in a day", ex)
}

// checkRate: the provider never got more requests in any one second than
// the shared rate allows: the rate, its burst, and one more burst for a
// Redis flush that forgot the bucket.
func checkRate(v *view, rs *results) {
	var ex []string
	peak := 0
	if v.f.RatePerSecond > 0 {
		burst := max(1, v.f.RatePerSecond/10)
		allowed := v.f.RatePerSecond + 2*burst + 2
		// A request refused by an outage is handed on to the next provider
		// at once: one message, one turn of the rate, two requests.
		var at []time.Time
		for _, r := range v.f.Requests {
			if r.Answer != "outage" {
				at = append(at, r.At)
			}
		}
		sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
		j := 0
		for i := range at {
			for at[i].Sub(at[j]) >= time.Second {
				j++
			}
			if n := i - j + 1; n > peak {
				peak = n
				if n > allowed {
					ex = append(ex, fmt.Sprintf("%d requests in the second before %s (allowed %d)", n, at[i].Format(time.StampMilli), allowed))
				}
			}
		}
	}
	rs.add("rate", fmt.Sprintf("seconds over PROVIDER_RATE_PER_SECOND %d (peak %d in a second)", v.f.RatePerSecond, peak), ex)
}

// Report prints every result and returns how many failed.
func Report(w func(format string, args ...any), list []Result) int {
	failed := 0
	for _, r := range list {
		mark := "ok  "
		switch {
		case r.Info:
			mark = "info"
		case r.Failed():
			mark = "FAIL"
			failed++
		}
		w("  %s %-26s %6d  %s\n", mark, r.Name, r.Count, r.Summary)
		if r.Failed() || r.Info {
			for _, e := range r.Examples {
				w("         %s\n", e)
			}
		}
	}
	return failed
}
