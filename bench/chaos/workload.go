package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"tidings/internal/auth"
)

// Every message's body names its unit (oracle.go): the templates render
// it from the contact's id, or from the `unit` variable of a
// transactional send.
const (
	dripYAML = "name: Chaos drip\ntrigger: {event: signed_up}\nsteps:\n" +
		"  - id: s1\n    action: email\n    template: seq-drip-s1\n  - delay: 2s\n" +
		"  - id: s2\n    action: email\n    template: seq-drip-s2\n  - delay: 3s\n" +
		"  - id: s3\n    action: email\n    template: seq-drip-s3\n"
	trialYAML = "name: Chaos trial\ntrigger: {event: trial_started}\n%ssteps:\n" +
		"  - id: w1\n    action: email\n    template: seq-trial-w1\n  - delay: 20s\n" +
		"  - id: w2\n    action: email\n    template: seq-trial-w2\n"
)

// The contact pools: contact i is deleted mid-flight when i%10 == 7 (and
// then gets no pings nor transactional sends, which would bring it back),
// suppressed when i%10 == 3 (its transactional sends must be refused),
// opted out of the topic when i%10 == 5.
func doomed(i int) bool { return i%10 == 7 }

func contactEmail(i int) string { return fmt.Sprintf("c%d@chaos.example", i) }

func unitBody(unit string) string {
	return "<mjml><mj-body><mj-section><mj-column><mj-text>Hi {{ contact.email }} UNIT[" + unit +
		"]</mj-text></mj-column></mj-section></mj-body></mjml>"
}

func (r *run) setup(ctx context.Context) error {
	tok, err := auth.MintHS256(jwtSecret, "chaos", org, time.Hour)
	if err != nil {
		return err
	}
	sess := map[string]string{"Authorization": tok}
	api := r.apis[0]
	if _, err := r.call(ctx, api, "POST", "/api/tenant", map[string]any{"name": "Chaos"}, sess, nil); err != nil {
		return err
	}
	var key struct {
		RawKey string `json:"rawKey"`
	}
	if _, err := r.call(ctx, api, "POST", "/api/api-keys", map[string]any{"name": "chaos"}, sess, &key); err != nil {
		return err
	}
	r.key = key.RawKey
	// A verified sending domain: DNS verification is not what this run is
	// about, so the row is written as a verified domain would be.
	db, err := pgx.Connect(ctx, r.dbURL)
	if err != nil {
		return err
	}
	defer db.Close(ctx)
	if _, err := db.Exec(ctx, `INSERT INTO domains (tenant_id, domain, status, sending_enabled, verification_token, dkim_tokens)
		VALUES ($1, 'chaos.example', 'verified', true, 't', '{a,b,c}')`, org); err != nil {
		return err
	}
	if _, err := r.call(ctx, api, "PATCH", "/api/tenant", map[string]any{"sendingStatus": "enabled",
		"defaultFromAddress": "news@chaos.example", "frequencyCap": map[string]any{"max": capPerDay, "period": "day"}}, nil, nil); err != nil {
		return err
	}
	if _, err := r.call(ctx, api, "POST", "/api/topics", map[string]any{"topicId": "news", "name": "News", "default": "opt_out"}, nil, nil); err != nil {
		return err
	}
	templates := map[string]string{"tx": "{{ unit }}"}
	for _, s := range []string{"s1", "s2", "s3"} {
		templates["seq-drip-"+s] = "seq:drip:" + s + ":{{ contact.contactId }}"
	}
	for _, s := range []string{"w1", "w2"} {
		templates["seq-trial-"+s] = "seq:trial:" + s + ":{{ contact.contactId }}"
	}
	for id, unit := range templates {
		if err := r.putTemplate(ctx, id, unit); err != nil {
			return err
		}
	}
	if _, err := r.call(ctx, api, "PUT", "/api/sequences/drip", map[string]any{"content": dripYAML}, nil, nil); err != nil {
		return err
	}
	// The trial's window opens about 40 s into the run and lasts a
	// minute: steps due before it wait for it, steps after it wait for
	// tomorrow. (Skipped when it would wrap past midnight.)
	from := time.Now().UTC().Add(40 * time.Second).Truncate(time.Minute).Add(time.Minute)
	to := from.Add(time.Minute)
	window := ""
	if to.Day() == from.Day() {
		window = fmt.Sprintf("window: {from: %q, to: %q}\n", from.Format("15:04"), to.Format("15:04"))
		r.window = &WindowFact{SequenceID: "trial", From: from, To: to}
	}
	if _, err := r.call(ctx, api, "PUT", "/api/sequences/trial", map[string]any{"content": fmt.Sprintf(trialYAML, window)}, nil, nil); err != nil {
		return err
	}
	r.contactIDs = map[string]string{}
	for i := range *nContacts {
		var c struct {
			ContactID string `json:"contactId"`
		}
		if _, err := r.call(ctx, api, "PUT", "/api/contacts", map[string]any{"email": contactEmail(i)}, nil, &c); err != nil {
			return err
		}
		r.contactIDs[contactEmail(i)] = c.ContactID
	}
	// Every contact: the audience of the broadcasts the workload sends.
	var seg struct {
		SegmentID string `json:"segmentId"`
	}
	if _, err := r.call(ctx, api, "POST", "/api/segments", map[string]any{"name": "Everyone",
		"rules": map[string]any{"operator": "and", "conditions": []any{
			map[string]any{"type": "property", "field": "nothing", "operator": "notExists"}}}}, nil, &seg); err != nil {
		return err
	}
	r.segment = seg.SegmentID
	// An outbound webhook endpoint taking every event type, on the
	// harness's receiver (which fails one delivery in ten, so retries run).
	if _, err := r.call(ctx, api, "POST", "/api/webhooks", map[string]any{"url": r.hooks.url}, nil, nil); err != nil {
		return err
	}
	return nil
}

func (r *run) putTemplate(ctx context.Context, id, unit string) error {
	_, err := r.call(ctx, r.apis[0], "PUT", "/api/templates/"+id, map[string]any{"name": id,
		"subject": "Hello {{ contact.email }}", "content": unitBody(unit)}, nil, nil)
	return err
}

type workload struct {
	r        *run
	mu       sync.Mutex
	eventIDs []string
	// eventEmails are the emails of the accepted events, in eventIDs' order.
	eventEmails []string
	// signedUp are the contacts whose signed_up was accepted.
	signedUp []string
	told     map[string]Told
	// broadcastIDs are the broadcasts sent; paused and cancelled count
	// those the workload paused (and resumed) and cancelled, abTests the
	// A/B ones.
	broadcastIDs               []string
	paused, cancelled, abTests int
	pausedNow                  map[string]bool
	consentDone                []Consent
	txUnits, batchUnits        int
	batchCount                 int
	failed                     atomic.Int64
	next                       atomic.Int64
}

func newWorkload(r *run) *workload {
	return &workload{r: r, told: map[string]Told{}, pausedNow: map[string]bool{}}
}

// rng is a lane's own seeded source, so each lane's choices follow from
// the seed whatever the others do.
func laneRNG(lane uint64) *rand.Rand { return rand.New(rand.NewPCG(uint64(*seed), 1000+lane)) }

func (w *workload) tell(unit, status, sendID string) {
	w.mu.Lock()
	t := w.told[unit]
	t.Unit, t.Status, t.SendID = unit, status, sendID
	w.told[unit] = t
	w.mu.Unlock()
}

// answered notes one attempt's answer for the unit's evidence.
func (w *workload) answered(unit string, status int, err error) {
	a := fmt.Sprint(status)
	if status == 0 && err != nil {
		a = "no answer"
	} else if err != nil {
		if m := codeRE.FindStringSubmatch(err.Error()); m != nil {
			a += " " + m[1]
		}
	}
	w.mu.Lock()
	t := w.told[unit]
	t.Answers = append(t.Answers, a)
	w.told[unit] = t
	w.mu.Unlock()
}

var codeRE = regexp.MustCompile(`"code":"([A-Z_]+)"`)

// events posts signed_up for the next contact (each enters the drip
// once), every fourth of them also trial_started, and a ping that
// triggers nothing, to either api.
func (w *workload) events(ctx context.Context, lane int) {
	rng := laneRNG(uint64(lane))
	for n := 0; ctx.Err() == nil; n++ {
		name, i := "ping", rng.IntN(*nContacts)
		if n%2 == 0 {
			if j := int(w.next.Add(1) - 1); j < *nContacts {
				name, i = "signed_up", j
			}
		}
		for name == "ping" && doomed(i) {
			i = rng.IntN(*nContacts)
		}
		w.event(ctx, r0(w.r, lane+n), name, i)
		if name == "signed_up" && i%4 == 0 {
			w.event(ctx, r0(w.r, lane+n+1), "trial_started", i)
		}
		sleep(ctx, 150*time.Millisecond)
	}
}

func r0(r *run, n int) string { return r.apis[n%2] }

func (w *workload) event(ctx context.Context, base, name string, i int) {
	var out struct {
		Event struct {
			EventID string `json:"eventId"`
		} `json:"event"`
	}
	if _, err := w.r.call(ctx, base, "POST", "/api/events", map[string]any{"email": contactEmail(i), "name": name}, nil, &out); err != nil {
		w.failed.Add(1)
		return
	}
	w.mu.Lock()
	w.eventIDs = append(w.eventIDs, out.Event.EventID)
	w.eventEmails = append(w.eventEmails, contactEmail(i))
	if name == "signed_up" {
		w.signedUp = append(w.signedUp, w.r.contactIDs[contactEmail(i)])
	}
	w.mu.Unlock()
}

// sends posts transactional sends with an Idempotency-Key, retrying a
// failed request with the same key and the same body on the other api
// until it is answered: a 200 (sent), a 502 in doubt (a retry would only
// replay it), or a refusal the client gives up on.
func (w *workload) sends(ctx context.Context, lane int) {
	rng := laneRNG(10 + uint64(lane))
	for n := 0; ctx.Err() == nil; n++ {
		key := fmt.Sprintf("chaos-tx-%d-%d", lane, n)
		unit := "tx:" + key
		i := rng.IntN(*nContacts)
		for doomed(i) {
			i = rng.IntN(*nContacts)
		}
		body := map[string]any{"to": contactEmail(i), "template": "tx", "variables": map[string]any{"unit": unit}}
		w.mu.Lock()
		w.txUnits++
		w.mu.Unlock()
		w.tell(unit, "failed", "")
		for attempt := 0; attempt < 20; attempt++ {
			var out struct {
				SendID string `json:"sendId"`
			}
			status, err := w.r.call(context.WithoutCancel(ctx), r0(w.r, lane+n+attempt), "POST", "/api/send", body,
				map[string]string{"Idempotency-Key": key}, &out)
			w.answered(unit, status, err)
			if err == nil {
				w.tell(unit, "sent", out.SendID)
				break
			}
			if id := inDoubtSendID(err); id != "" {
				w.tell(unit, "in_doubt", id)
				break
			}
			w.failed.Add(1)
			if status == 502 || (status >= 400 && status < 500 && status != 409 && status != 429) {
				// Refused (the provider, or the contact is suppressed):
				// the key is not kept, so a retry would send again; after
				// a few the client gives up.
				w.tell(unit, "refused", "")
				if status != 502 || attempt >= 3 {
					break
				}
			} else {
				// No answer, or the key still at work (409): the retry after
				// a refusal is a new request whose fate the client does not
				// know until a later answer.
				w.tell(unit, "failed", "")
			}
			time.Sleep(300 * time.Millisecond)
		}
		sleep(ctx, 300*time.Millisecond)
	}
}

// batches posts POST /api/send/batch of 3-8 messages with an
// Idempotency-Key, repeating the same body with the same key until a 200
// answers; each item's answer is what its unit was told.
func (w *workload) batches(ctx context.Context) {
	rng := laneRNG(20)
	for n := 0; ctx.Err() == nil; n++ {
		key := fmt.Sprintf("chaos-batch-%d", n)
		size := 3 + rng.IntN(6)
		msgs := make([]any, size)
		units := make([]string, size)
		for k := range size {
			i := rng.IntN(*nContacts)
			for doomed(i) {
				i = rng.IntN(*nContacts)
			}
			units[k] = fmt.Sprintf("batch:%s:%d", key, k)
			msgs[k] = map[string]any{"to": contactEmail(i), "template": "tx", "variables": map[string]any{"unit": units[k]}}
			w.tell(units[k], "failed", "")
		}
		w.mu.Lock()
		w.batchUnits += size
		w.batchCount++
		w.mu.Unlock()
		body := map[string]any{"messages": msgs}
		for attempt := 0; attempt < 20; attempt++ {
			var out struct {
				Items []struct {
					Status string `json:"status"`
					SendID string `json:"sendId"`
					Error  *struct {
						Code    string `json:"code"`
						Details struct {
							SendID  string `json:"sendId"`
							InDoubt bool   `json:"inDoubt"`
						} `json:"details"`
					} `json:"error"`
				} `json:"items"`
			}
			status, err := w.r.call(context.WithoutCancel(ctx), r0(w.r, n+attempt), "POST", "/api/send/batch", body,
				map[string]string{"Idempotency-Key": key}, &out)
			for _, u := range units {
				w.answered(u, status, err)
			}
			if err != nil {
				w.failed.Add(1)
				time.Sleep(300 * time.Millisecond)
				continue
			}
			for k, it := range out.Items {
				if k >= size {
					break
				}
				switch {
				case it.Status == "sent":
					w.tell(units[k], "sent", it.SendID)
				case it.Error != nil && it.Error.Details.InDoubt:
					w.tell(units[k], "in_doubt", it.Error.Details.SendID)
				default:
					w.tell(units[k], "refused", "")
					if it.Error != nil {
						w.answered(units[k], 200, fmt.Errorf(`item: {"code":"%s"}`, it.Error.Code))
					}
				}
			}
			break
		}
		sleep(ctx, 700*time.Millisecond)
	}
}

// broadcasts sends a broadcast to every contact every 12 s, each with its
// own template (its messages' unit), every other one on the topic; every
// third is an A/B test of two subject lines (half the audience tested, the
// automatic winner 10 s after the start, the rest sent it while the faults
// go on); one in three is paused and resumed mid-send, one in four
// cancelled. Each
// call is retried on the other api (a create that failed made nothing; a
// move that failed is made again, which the status table makes harmless).
func (w *workload) broadcasts(ctx context.Context) {
	rng := laneRNG(30)
	for n := 0; ctx.Err() == nil; n++ {
		if !sleep(ctx, 12*time.Second) {
			return
		}
		tmpl := fmt.Sprintf("bc-%d", n)
		if err := w.retry(ctx, func(base string) (int, error) {
			return 0, w.r.putTemplate(ctx, tmpl, "bc:"+tmpl+":{{ contact.contactId }}")
		}); err != nil {
			w.failed.Add(1)
			continue
		}
		var b struct {
			BroadcastID string `json:"broadcastId"`
		}
		create := map[string]any{"name": fmt.Sprintf("News %d", n), "templateId": tmpl, "segmentId": w.r.segment}
		if n%2 == 1 {
			create["topic"] = "news"
		}
		ab := n%3 == 2
		if ab {
			// Subject lines only: the unit (the template) stays the
			// broadcast's, so a duplicate across test and rest is seen.
			create["experiment"] = map[string]any{"variants": []any{map[string]any{"name": "A", "subject": "A " + tmpl},
				map[string]any{"name": "B", "subject": "B " + tmpl}}, "testFraction": 0.5, "metric": "opened", "waitFor": "10s"}
		}
		if err := w.retry(ctx, func(base string) (int, error) {
			return w.r.call(context.WithoutCancel(ctx), base, "POST", "/api/broadcasts", create,
				map[string]string{"Idempotency-Key": "chaos-broadcast-" + tmpl}, &b)
		}); err != nil {
			w.failed.Add(1)
			continue
		}
		if err := w.move(ctx, b.BroadcastID, "send"); err != nil {
			w.failed.Add(1)
			continue
		}
		w.mu.Lock()
		w.broadcastIDs = append(w.broadcastIDs, b.BroadcastID)
		if ab {
			w.abTests++
		}
		w.mu.Unlock()
		switch roll := rng.IntN(12); {
		case roll < 4:
			sleep(ctx, time.Duration(300+rng.IntN(1500))*time.Millisecond)
			// A pause that failed every try may still have gone through
			// (a 400 after a cut try reads as already paused, or as
			// finished): the broadcast is resumed at the end either way.
			w.mu.Lock()
			w.pausedNow[b.BroadcastID] = true
			w.mu.Unlock()
			if w.move(ctx, b.BroadcastID, "pause") == nil {
				w.mu.Lock()
				w.paused++
				w.mu.Unlock()
				time.Sleep(3 * time.Second)
				if w.move(ctx, b.BroadcastID, "resume") == nil {
					w.mu.Lock()
					delete(w.pausedNow, b.BroadcastID)
					w.mu.Unlock()
				}
			}
		case roll < 7:
			sleep(ctx, time.Duration(300+rng.IntN(1500))*time.Millisecond)
			if w.move(ctx, b.BroadcastID, "cancel") == nil {
				w.mu.Lock()
				w.cancelled++
				w.mu.Unlock()
			}
		}
	}
}

// move makes a broadcast move (send, pause, resume, cancel); a 400 after a
// failed try means an earlier try went through (or the broadcast has
// finished, which leaves nothing to pause or cancel).
func (w *workload) move(ctx context.Context, id, move string) error {
	return w.retry(ctx, func(base string) (int, error) {
		status, err := w.r.call(context.WithoutCancel(ctx), base, "POST", "/api/broadcasts/"+id+"/"+move, map[string]any{}, nil, nil)
		if status == 400 {
			if move == "send" || move == "resume" {
				return status, nil
			}
			return status, errGaveUp
		}
		return status, err
	})
}

// retry calls f on either api until it succeeds, up to 20 times; errGaveUp
// stops it.
func (w *workload) retry(ctx context.Context, f func(base string) (int, error)) error {
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		if _, err = f(w.r.apis[attempt%2]); err == nil || err == errGaveUp {
			return err
		}
		if ctx.Err() != nil && attempt > 10 {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	return err
}

// resumePaused resumes any broadcast left paused when the load ended.
func (w *workload) resumePaused(ctx context.Context) {
	w.mu.Lock()
	var ids []string
	for id := range w.pausedNow {
		ids = append(ids, id)
	}
	w.mu.Unlock()
	for _, id := range ids {
		_ = w.move(ctx, id, "resume")
	}
}

// consent opts contacts out while their messages are under way, every 2 s:
// a topic opt-out, a suppression or a deletion of a contact that has
// signed up. Each is retried until definitely answered; the time of that
// answer is when the opt-out stands (a later message past the grace is a
// breach).
func (w *workload) consent(ctx context.Context) {
	rng := laneRNG(40)
	for n := 0; ctx.Err() == nil; n++ {
		if !sleep(ctx, 2*time.Second) {
			return
		}
		upTo := min(int(w.next.Load()), *nContacts)
		if upTo < 10 {
			continue
		}
		kind := []string{"topic:news", "suppressed", "deleted"}[n%3]
		want := map[string]int{"topic:news": 5, "suppressed": 3, "deleted": 7}[kind]
		i := rng.IntN(upTo/10)*10 + want
		if i >= upTo {
			continue
		}
		email := contactEmail(i)
		id := w.r.contactIDs[email]
		if w.hasConsent(email, kind) || w.hasConsent(email, "deleted") {
			continue
		}
		err := w.retry(ctx, func(base string) (int, error) {
			var status int
			var err error
			switch kind {
			case "topic:news":
				status, err = w.r.call(context.WithoutCancel(ctx), base, "PATCH", "/api/contacts/"+id,
					map[string]any{"topics": map[string]any{"news": false}}, nil, nil)
			case "suppressed":
				status, err = w.r.call(context.WithoutCancel(ctx), base, "POST", "/api/suppressions",
					map[string]any{"email": email, "note": "chaos"}, nil, nil)
				if status == 409 { // an earlier try went through
					err = nil
				}
			case "deleted":
				status, err = w.r.call(context.WithoutCancel(ctx), base, "DELETE", "/api/contacts/"+id, nil, nil, nil)
				if status == 404 {
					err = nil
				}
			}
			return status, err
		})
		if err != nil {
			w.failed.Add(1)
			// Unknown whether it stands: said as standing from now, so
			// the checks err on the side of finding a breach.
		}
		w.mu.Lock()
		w.consentDone = append(w.consentDone, Consent{Email: email, ContactID: id, Kind: kind, At: time.Now()})
		w.mu.Unlock()
	}
}

func (w *workload) hasConsent(email, kind string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.consentDone {
		if c.Email == email && c.Kind == kind {
			return true
		}
	}
	return false
}

func (w *workload) consentKinds() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := map[string]int{}
	for _, c := range w.consentDone {
		n[c.Kind]++
	}
	var out []string
	for k, v := range n {
		out = append(out, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
