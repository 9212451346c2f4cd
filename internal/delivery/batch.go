package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"tidings/internal/events"
	"tidings/internal/metrics"
	"tidings/internal/provider"
	"tidings/internal/sendrate"
	"tidings/internal/store"
	"tidings/internal/telemetry"
	"tidings/queries"
)

// Settled is one message of a batch whose record was settled (accepted, or
// in doubt): what the engine marks sent in the same transaction.
type Settled struct {
	// Index is the step's position in the batch.
	Index   int
	SendID  string
	InDoubt bool
}

// StepResult is what became of one step of a batch: Err is nil when the
// provider accepted it, an error wrapping ErrInDoubt (IsInDoubt) when it
// gave no answer (the message counts as sent), any other error when nothing
// was sent.
type StepResult struct {
	Result
	Err error
}

// Recorded is one message of a batch whose record was written (not yet sent).
type Recorded struct {
	// Index is the step's position in the batch.
	Index  int
	SendID string
}

// Refused is one message of a batch the provider refused (or that never
// reached it): its record is deleted, Err says why.
type Refused struct {
	// Index is the step's position in the batch.
	Index  int
	SendID string
	Err    error
}

// BatchHooks run in the ledger's transactions of a batch of steps
// (SendStepsWith), so that what the caller keeps about each message moves
// with its record, with no window between them. Each may be nil.
type BatchHooks struct {
	// Recorded runs in the transaction that writes the records, after they
	// are written and before any provider call. It returns the positions
	// whose messages the caller withdraws (e.g. a claim taken over
	// meanwhile): their records are deleted in that transaction, nothing
	// is sent, and their results carry ErrWithdrawn.
	Recorded func(ctx context.Context, q *store.Tx, recorded []Recorded) (withdraw []int, err error)
	// Refused runs in the transaction that deletes the refused messages'
	// records (only records still `sending` are deleted: one settled
	// meanwhile, in doubt, stays).
	Refused func(ctx context.Context, q *store.Tx, refused []Refused) error
	// Settled runs in the transaction that settles the others (SendSteps's
	// then).
	Settled func(ctx context.Context, q *store.Tx, settled []Settled) error
}

// ErrRecordExists is the result of a step whose message has a record
// already (its scheduled send's or broadcast recipient's): no second record
// is written and nothing is sent; the caller settles the step from the
// record it has. It is that step's alone, never the batch's.
var ErrRecordExists = errors.New("the message has a record already: not sent again")

// ErrWithdrawn is the result of a step whose message BatchHooks.Recorded
// withdrew: its record was deleted before any provider call.
var ErrWithdrawn = errors.New("the message was withdrawn before it was sent")

// ErrNotRecorded is the result of every step of a batch whose records
// could not be written (the database failed): nothing was sent, and the
// steps may be tried again.
var ErrNotRecorded = errors.New("the batch's send records were not written: nothing was sent")

// DefaultParallel is how many provider calls a batch makes at once.
const DefaultParallel = 32

// SendSteps sends a batch of sequence steps through the ledger with a fixed
// number of statements however many there are: the checks and renders of
// each (a template and a sender read once per batch), every record in one
// statement before the provider is called, the provider calls concurrently
// (at most parallel; 0: DefaultParallel), the refused records deleted in
// one statement, and the others settled in one transaction (SendSettleMany,
// their email.sent events through RecordSystemMany) that also runs then
// for them: the engine marks the steps sent there. Step.InRecord is not
// used. Result.InRecordDone says whether then committed for a step; when
// the transaction keeps failing with then, the records are settled without
// it.
func (s *Sender) SendSteps(ctx context.Context, steps []Step, parallel int,
	then func(ctx context.Context, q *store.Tx, settled []Settled) error) []StepResult {
	return s.SendStepsWith(ctx, steps, parallel, BatchHooks{Settled: then})
}

// SendStepsWith is SendSteps with hooks in each of the ledger's
// transactions: a broadcast moves its recipients with their records
// (written, refused, settled).
func (s *Sender) SendStepsWith(ctx context.Context, steps []Step, parallel int, hooks BatchHooks) []StepResult {
	res := make([]StepResult, len(steps))
	preps := s.prepareSteps(ctx, steps, res)
	return s.sendPrepared(ctx, preps, res, parallel, hooks)
}

// SendBatch sends transactional messages (POST /api/send/batch), each
// checked as Send checks it, through the ledger in a few statements
// (sendPrepared): one failing its checks or refused by the provider does
// not stop the others. Request.OnRecord is not used; onRecord, when set,
// runs in each transaction that writes some of the batch's records, with
// their ids by position in reqs (the Idempotency-Key names them there). The
// results are in the order of reqs; an error is Send's for that message.
func (s *Sender) SendBatch(ctx context.Context, tenantID string, reqs []Request, parallel int,
	onRecord func(ctx context.Context, q *store.Tx, sendIDs map[int]string) error) []StepResult {
	res := make([]StepResult, len(reqs))
	preps := make([]*prepared, len(reqs))
	for i, req := range reqs {
		o, err := s.outgoingOf(ctx, tenantID, req)
		if err == nil {
			var p prepared
			if p, err = s.prepare(ctx, o); err == nil {
				preps[i] = &p
			}
		}
		res[i].Err = err
	}
	var hooks BatchHooks
	if onRecord != nil {
		hooks.Recorded = func(ctx context.Context, q *store.Tx, recorded []Recorded) ([]int, error) {
			ids := make(map[int]string, len(recorded))
			for _, r := range recorded {
				ids[r.Index] = r.SendID
			}
			return nil, onRecord(ctx, q, ids)
		}
	}
	out := s.sendPrepared(ctx, preps, res, parallel, hooks)
	for i := range out {
		// As Send answers: a refused message has no record; one in doubt
		// is the 502 that names its record.
		switch err := out[i].Err; {
		case err == nil:
		case IsInDoubt(err):
			out[i].Err = inDoubtError(out[i].SendID, err)
		default:
			out[i].SendID = ""
		}
	}
	return out
}

// sendPrepared sends the prepared messages (nil: failed before, with its
// error in res). The messages go in groups as the shared provider rate
// lets them (all at once without a rate): a group's records are written in
// one statement (with hooks.Recorded in its transaction) only once its
// messages may leave, and its provider calls start at once, concurrently,
// while the next group waits for the rate; no record ever waits for the
// rate (ADDENDUM 19). Once every call has answered, the refused records
// are deleted in one statement (with hooks.Refused) and the others settled
// in one transaction that also runs hooks.Settled.
func (s *Sender) sendPrepared(ctx context.Context, preps []*prepared, res []StepResult, parallel int, hooks BatchHooks) []StepResult {
	var pending []int
	for i, p := range preps {
		if p != nil {
			pending = append(pending, i)
		}
	}
	if len(pending) == 0 {
		return res
	}
	// Sequence steps and broadcasts take what transactional sends leave of
	// the provider's rate.
	prio, stream := sendrate.Low, provider.Marketing
	if r := preps[pending[0]].rec; r.SequenceID == nil && r.BroadcastID == nil {
		prio, stream = sendrate.High, provider.Transactional // a batch of transactional sends
	}
	pool := s.pool()
	if parallel <= 0 {
		parallel = DefaultParallel
	}
	answers := make([]answer, len(preps))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	var idx []int // the messages handed to the provider, in order
	// A message gets its record only once a provider call slot and the
	// rate are both free for it: a recorded message never waits, so a
	// worker that dies leaves no record whose request was never written.
	fail := func(group []int, err error) {
		for _, i := range group {
			res[i].Err = err
		}
	}
	// A destination whose bucket is empty holds its messages before any
	// slot, rate or record is taken for them; the others go on.
	pending, err := s.admit(ctx, preps, pending, res, prio == sendrate.Low)
	if err != nil {
		fail(pending, providerError(&provider.Error{Provider: pool.Plan(stream)[0].Name(), Transient: true, Err: err}))
		return res
	}
	for len(pending) > 0 {
		slots, err := acquire(ctx, sem, len(pending))
		if err == nil {
			var n int
			n, err = s.Rate.Take(ctx, prio, slots)
			for range slots - n {
				<-sem
			}
			slots = n
		}
		if err != nil {
			// A wait cut short sends nothing and writes no record: the
			// step is tried again, the transactional message is a 502.
			fail(pending, providerError(&provider.Error{Provider: pool.Plan(stream)[0].Name(), Transient: true, Err: err}))
			break
		}
		group := pending[:slots]
		pending = pending[slots:]
		// The group's records name the provider first in line now; a
		// failover names the next on its record before handing it on. A
		// record's time is its group's turn to leave, not when it was
		// rendered: the rate wait lies between them.
		plan := pool.Plan(stream)
		first := plan[0].Name()
		at := s.now()
		for _, i := range group {
			preps[i].rec.Provider = &first
			preps[i].rec.SentAt = at
		}
		// The records are not yet the write: a request's audit entry goes
		// with the settling transaction (settleMany). The insert runs
		// without the attempt's deadline: a deadline striking during its
		// COMMIT would leave records committed that this code took for
		// unwritten, never sent and never settled (the ledger sweep then
		// put them in doubt with no request: fault run seed 15).
		ictx, icancel := context.WithTimeout(context.WithoutCancel(store.WithoutAudit(ctx)), settleTimeout)
		unsent, err := s.insertMany(ictx, preps, group, hooks.Recorded)
		icancel()
		if err != nil {
			// Its answer lost with the connection, the write may have
			// committed: then unsent is what it wrote, and its records go.
			var tenants, ids []string
			for _, i := range group {
				if _, out := unsent[i]; !out {
					tenants, ids = append(tenants, preps[i].rec.TenantID), append(ids, preps[i].rec.ID)
				}
			}
			if written := s.committedAnyway(ctx, err, tenants, ids); len(written) > 0 {
				for _, i := range group {
					if _, out := unsent[i]; !out && !written[preps[i].rec.ID] {
						unsent[i] = ErrWithdrawn // written and withdrawn in the same transaction
					}
				}
				err = nil
			}
		}
		if err == nil && ctx.Err() != nil {
			// The attempt ended while its records were written: nothing
			// has been written to the provider, so they go as a definite
			// failure (deleted, the steps tried again), below.
			for _, i := range group {
				if _, ok := unsent[i]; ok {
					<-sem
					res[i].Err = unsent[i]
					continue
				}
				idx = append(idx, i)
				answers[i] = answer{err: &provider.Error{Provider: pool.Plan(stream)[0].Name(), Transient: true, Err: ctx.Err()}}
				<-sem
			}
			fail(pending, providerError(&provider.Error{Provider: pool.Plan(stream)[0].Name(), Transient: true, Err: ctx.Err()}))
			break
		}
		if err != nil {
			for range group {
				<-sem
			}
			fail(group, fmt.Errorf("%w: %w", ErrNotRecorded, err))
			continue
		}
		// Nothing but starting the calls lies between the records' commit
		// and the provider: a worker killed here leaves records in doubt
		// whose requests were never written, the one window the ledger
		// cannot close (the record must come first; docs/decisions.md).
		for _, i := range group {
			if err, ok := unsent[i]; ok {
				// Over the frequency cap, a record there already, or
				// withdrawn: no new record, no message; that step's alone.
				<-sem
				res[i].Err = err
				continue
			}
			idx = append(idx, i)
			wg.Go(func() {
				defer func() { <-sem }()
				rec := preps[i].rec
				name, id, err := pool.Send(ctx, stream, plan, preps[i].msg, s.moveTo(rec.TenantID, rec.ID))
				s.backoff(err)
				telemetry.Send(name, true, err, provider.IsTemporary(err))
				answers[i] = answer{id: id, err: err}
			})
		}
	}
	wg.Wait()
	if len(idx) == 0 {
		return res
	}
	// From here the answers are decided: they are written even if the task
	// has been abandoned meanwhile.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	var refused queries.SendDeleteManyParams
	var refusedOf []Refused
	var settled []Settled
	var rows []settleRow
	for _, i := range idx {
		a, rec := answers[i], preps[i].rec
		res[i].SendID = rec.ID
		switch {
		case a.err == nil:
			res[i].MessageID = a.id
		case provider.IsInDoubt(a.err):
			res[i].InDoubt = true
			res[i].Err = errors.Join(ErrInDoubt, a.err)
			s.Log.Warn("provider gave no answer: send in doubt, not retried", "tenant_id", rec.TenantID,
				"send_id", rec.ID, "err", a.err)
		default:
			res[i].Err = providerError(a.err)
			refused.TenantIds = append(refused.TenantIds, rec.TenantID)
			refused.Ids = append(refused.Ids, rec.ID)
			refusedOf = append(refusedOf, Refused{Index: i, SendID: rec.ID, Err: res[i].Err})
			continue
		}
		settled = append(settled, Settled{Index: i, SendID: rec.ID, InDoubt: res[i].InDoubt})
		rows = append(rows, settleRow{TenantID: rec.TenantID, ID: rec.ID, MessageID: a.id, InDoubt: res[i].InDoubt})
	}
	if len(refused.Ids) > 0 {
		err := s.retryWrite(sctx, "deleting refused sends' records", func() error {
			if hooks.Refused == nil {
				return s.DB.SendDeleteMany(sctx, refused)
			}
			return s.DB.InTx(sctx, func(q *store.Tx) error {
				if err := q.SendDeleteMany(sctx, refused); err != nil {
					return err
				}
				return hooks.Refused(sctx, q, refusedOf)
			})
		})
		if err != nil {
			// The records stay sending; the steps' next claims (or the
			// ledger sweep) settle them in doubt, which overstates but
			// never resends.
			s.Log.Error("refused sends' records not deleted", "err", err, "count", len(refused.Ids))
		}
	}
	if len(settled) == 0 {
		return res
	}
	done, err := s.settleMany(sctx, rows, settled, hooks.Settled)
	if err != nil {
		// The provider has the messages and their records exist, sending:
		// the steps' next claims settle them in doubt with their marks.
		s.Log.Error("sends handed to the provider but not settled", "err", err, "count", len(settled))
	}
	for _, st := range settled {
		res[st.Index].InRecordDone = done
	}
	return res
}

// prepareSteps checks and renders each step, a few at a time (rendering is
// CPU work); a step that fails gets its error in res and a nil entry.
func (s *Sender) prepareSteps(ctx context.Context, steps []Step, res []StepResult) []*prepared {
	preps := make([]*prepared, len(steps))
	cache := newStepCache()
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(steps)) {
		wg.Go(func() {
			for i := range work {
				o, err := s.stepOutgoing(ctx, steps[i], cache)
				if err == nil {
					var p prepared
					if p, err = s.prepare(ctx, o); err == nil {
						preps[i] = &p
					}
				}
				res[i].Err = err
			}
		})
	}
	for i := range steps {
		work <- i
	}
	close(work)
	wg.Wait()
	return preps
}

// insertRow is one row of SendInsertMany's JSON.
type insertRow struct {
	TenantID        string    `json:"tenant_id"`
	ID              string    `json:"id"`
	ContactID       string    `json:"contact_id"`
	TemplateID      string    `json:"template_id"`
	TemplateVersion int32     `json:"template_version"`
	SequenceID      *string   `json:"sequence_id"`
	StepID          *string   `json:"step_id"`
	ScheduledSendID *string   `json:"scheduled_send_id"`
	BroadcastID     *string   `json:"broadcast_id"`
	FromAddress     string    `json:"from_address"`
	ToAddress       string    `json:"to_address"`
	Subject         string    `json:"subject"`
	SentAt          time.Time `json:"sent_at"`
	Locale          *string   `json:"locale"`
	Provider        *string   `json:"provider"`
}

// insertMany commits the records of the prepared steps, before any of
// their messages leaves, in one statement that judges each row alone: a
// row whose message has a record already is not written (ErrRecordExists).
// Steps of tenants with a frequency cap are judged in the same transaction
// (applyCap); recorded, when set, runs in it after the insert and may
// withdraw records (ErrWithdrawn). It returns the steps that got no
// record (or lost it), each with its error.
func (s *Sender) insertMany(ctx context.Context, preps []*prepared, idx []int,
	recorded func(context.Context, *store.Tx, []Recorded) ([]int, error)) (map[int]error, error) {
	warm := false
	for _, i := range idx {
		warm = warm || preps[i].warmup != ""
	}
	var caps []capped
	unsent := map[int]error{}
	insert := func(q *queries.Queries) error {
		rows := make([]insertRow, 0, len(idx))
		for _, i := range idx {
			if _, ok := unsent[i]; ok {
				continue
			}
			r := preps[i].rec
			rows = append(rows, insertRow{TenantID: r.TenantID, ID: r.ID, ContactID: r.ContactID, TemplateID: r.TemplateID,
				TemplateVersion: r.TemplateVersion, SequenceID: r.SequenceID, StepID: r.StepID,
				ScheduledSendID: r.ScheduledSendID, BroadcastID: r.BroadcastID, FromAddress: r.FromAddress, ToAddress: r.ToAddress,
				Subject: r.Subject, SentAt: r.SentAt, Locale: r.Locale, Provider: r.Provider})
		}
		if len(rows) == 0 {
			return nil
		}
		b, err := json.Marshal(rows)
		if err != nil {
			return err
		}
		written, err := q.SendInsertMany(ctx, b)
		if err != nil {
			return err
		}
		ok := make(map[string]bool, len(written))
		for _, id := range written {
			ok[id] = true
		}
		for _, i := range idx {
			if _, out := unsent[i]; !out && !ok[preps[i].rec.ID] {
				unsent[i] = ErrRecordExists
			}
		}
		return nil
	}
	capOn := slices.ContainsFunc(idx, func(i int) bool { return preps[i].capOn })
	if !capOn && !warm && recorded == nil {
		return unsent, insert(s.DB.Queries)
	}
	err := s.DB.InTx(ctx, func(q *store.Tx) error {
		clear(unsent)
		// Warm-up first: a message it holds takes no place under the cap.
		held, err := applyWarmup(ctx, q, s.now(), preps, idx)
		if err != nil {
			return err
		}
		for i, h := range held {
			unsent[i] = h
		}
		caps = caps[:0]
		for _, i := range idx {
			if _, out := unsent[i]; !out && preps[i].capOn {
				c := preps[i].capped
				c.k = i
				caps = append(caps, c)
			}
		}
		over, err := applyCap(ctx, q, s.now(), caps)
		if err != nil {
			return err
		}
		for i, until := range over {
			unsent[i] = &CappedError{Until: until}
		}
		if err := insert(q.Queries); err != nil || recorded == nil {
			return err
		}
		var rec []Recorded
		for _, i := range idx {
			if _, out := unsent[i]; !out {
				rec = append(rec, Recorded{Index: i, SendID: preps[i].rec.ID})
			}
		}
		if len(rec) == 0 {
			return nil
		}
		withdraw, err := recorded(ctx, q, rec)
		if err != nil || len(withdraw) == 0 {
			return err
		}
		var del queries.SendDeleteManyParams
		for _, i := range withdraw {
			unsent[i] = ErrWithdrawn
			del.TenantIds = append(del.TenantIds, preps[i].rec.TenantID)
			del.Ids = append(del.Ids, preps[i].rec.ID)
		}
		return q.SendDeleteMany(ctx, del)
	})
	return unsent, err
}

type answer struct {
	id  string
	err error
}

// acquire takes at least one slot of sem (waiting for it, or ctx's end)
// and then as many more as are free at once, at most n.
func acquire(ctx context.Context, sem chan struct{}, n int) (int, error) {
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	got := 1
	for got < n {
		select {
		case sem <- struct{}{}:
			got++
		default:
			return got, nil
		}
	}
	return got, nil
}

// settleRow is one row of SendSettleMany's JSON.
type settleRow struct {
	TenantID  string `json:"tenant_id"`
	ID        string `json:"id"`
	MessageID string `json:"message_id"`
	InDoubt   bool   `json:"in_doubt"`
}

// settleMany settles records still `sending` in one transaction
// (SendSettleMany, which also counts them sent; a record settled already,
// by the ledger sweep or an earlier try whose commit was lost on the wire,
// is left out), with their email.sent events and the contacts' totalSends
// (RecordSystemMany), and runs then in it. A Postgres blip is retried
// (4 tries over about 2.6 s: settling again is harmless), and the last try
// settles the records without then. It reports whether then ran and
// committed.
func (s *Sender) settleMany(ctx context.Context, rows []settleRow, settled []Settled,
	then func(context.Context, *store.Tx, []Settled) error) (bool, error) {
	b, err := json.Marshal(rows)
	if err != nil {
		return false, err
	}
	tries := 0
	var withThen func(context.Context, *store.Tx, []Settled) error
	err = s.retryWrite(ctx, "settling a batch of sends", func() error {
		tries++
		withThen = then
		if tries == len(writeRetries) {
			withThen = nil
		}
		return s.DB.InTx(ctx, func(q *store.Tx) error {
			recs, err := q.SendSettleMany(ctx, queries.SendSettleManyParams{Batch: b, Count: metrics.Enabled()})
			if err != nil {
				return err
			}
			// The sends a request made (POST /api/send, /api/send/batch)
			// are its audit entries' resources.
			q.AuditResources(sendIDs(settled)...)
			sys := make([]events.System, len(recs))
			for i, r := range recs {
				props := map[string]any{"sendId": r.ID, "templateId": r.TemplateID}
				if r.SequenceID != nil {
					props["sequenceId"], props["stepId"] = *r.SequenceID, deref(r.StepID)
				}
				if r.BroadcastID != nil {
					props["broadcastId"] = *r.BroadcastID
				}
				if r.InDoubt {
					props["inDoubt"] = true
				}
				sys[i] = events.System{TenantID: r.TenantID, ContactID: r.ContactID, Name: events.Sent,
					Properties: props, Timestamp: r.SentAt, Sends: 1}
			}
			// Contacts in key order before their counters move (the lock
			// order: sends, then contacts), as every batch of outcomes does.
			if err := lockContacts(ctx, q, sys, nil); err != nil {
				return err
			}
			if err := s.Events.RecordSystemMany(ctx, q, sys); err != nil {
				return err
			}
			if withThen == nil {
				return nil
			}
			return withThen(ctx, q, settled)
		})
	})
	if err != nil {
		return false, err
	}
	return withThen != nil, nil
}

// writeRetries are the waits before each try of retryWrite.
var writeRetries = []time.Duration{0, 100 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second}

// retryWrite runs a write that may run again through a Postgres blip: 4
// tries over about 2.6 s. Its writers: the settle (settling again is
// harmless) and a refused record's delete (it deletes only what is still
// sending; the hooks move only what the claim still holds). A refused
// record left behind would be settled in doubt by the ledger sweep: a
// message reported as maybe sent that never left (fault run seed 27, a
// backend terminated during the delete).
func (s *Sender) retryWrite(ctx context.Context, what string, write func() error) error {
	var err error
	for attempt, wait := range writeRetries {
		if attempt > 0 {
			s.Log.Warn(what+" failed; retrying", "err", err, "attempt", attempt)
			select {
			case <-ctx.Done():
				return errors.Join(err, ctx.Err())
			case <-time.After(wait):
			}
		}
		if err = write(); err == nil {
			return nil
		}
	}
	return err
}

func sendIDs(settled []Settled) []string {
	out := make([]string, len(settled))
	for i, st := range settled {
		out[i] = st.SendID
	}
	return out
}
