// Package broadcasts sends one template to a segment's members (ADDENDUM
// 13): drafts and their edits, the status moves (send, pause, resume,
// cancel), the audience snapshot when sending starts (Start), and the
// dispatch of its recipients through the send ledger (Dispatcher). The
// recipient rows are the truth of what became of each contact; the
// broadcast's counters move in the same statements as they do.
package broadcasts

import (
	"context"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"tidings/internal/apperr"
	"tidings/internal/ids"
	"tidings/internal/localtime"
	"tidings/internal/page"
	"tidings/internal/segments"
	"tidings/internal/store"
	"tidings/internal/templates"
	"tidings/internal/topics"
	"tidings/queries"
)

// Statuses of a broadcast.
const (
	Draft     = "draft"
	Scheduled = "scheduled"
	Sending   = "sending"
	Paused    = "paused"
	Sent      = "sent"
	Cancelled = "cancelled"
)

// Statuses lists them in the order of their life.
var Statuses = []string{Draft, Scheduled, Sending, Paused, Sent, Cancelled}

// Recipient statuses.
const (
	RecipientQueued    = "queued"
	RecipientSent      = "sent"
	RecipientSkipped   = "skipped"
	RecipientFailed    = "failed"
	RecipientCancelled = "cancelled"
)

// RecipientStatuses lists them.
var RecipientStatuses = []string{RecipientQueued, RecipientSent, RecipientSkipped, RecipientFailed, RecipientCancelled}

// NotFound is the broadcast 404.
func NotFound() *apperr.Error { return apperr.NotFound("NOT_FOUND", "broadcast") }

func notFound(err error) error { return apperr.Specific(err, apperr.KindNotFound, NotFound()) }

// FromChecker checks a sender as a send would (delivery.Sender.CheckFrom).
type FromChecker interface {
	CheckFrom(ctx context.Context, tenantID, given string) error
}

// Store keeps broadcasts.
type Store struct {
	DB   *store.DB
	From FromChecker
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Input is a create or a PATCH; for a PATCH nil fields stay as they are,
// and a Set flag with a nil value clears an optional one.
type Input struct {
	Name, TemplateID, SegmentID *string
	From                        *string
	SetFrom                     bool
	CampaignID                  *string
	SetCampaign                 bool
	Topic                       *string
	SetTopic                    bool
	// SendAt is as given: an instant with offset, or with LocalTime a
	// wall-clock time without one.
	SendAt    *string
	SetSendAt bool
	LocalTime *bool
	// Experiment replaces the A/B test whole (ADDENDUM 20); SetExperiment
	// with a nil one makes the broadcast plain again.
	Experiment    *ExperimentInput
	SetExperiment bool
}

func (in Input) empty() bool {
	return in.Name == nil && in.TemplateID == nil && in.SegmentID == nil && !in.SetFrom && !in.SetCampaign &&
		!in.SetTopic && !in.SetSendAt && in.LocalTime == nil && !in.SetExperiment
}

// fields is a broadcast's editable fields, merged from the row and an Input.
type fields struct {
	name, templateID, segmentID string
	from, campaignID, topic     *string
	sendAt                      *time.Time
	localSendAt                 *string
	localTime                   bool
	experiment                  *Experiment
}

func fieldsOf(b queries.Broadcast) fields {
	return fields{name: b.Name, templateID: b.TemplateID, segmentID: b.SegmentID, from: b.FromAddress,
		campaignID: b.CampaignID, topic: b.Topic, sendAt: b.SendAt, localSendAt: b.LocalSendAt, localTime: b.LocalTime,
		experiment: ExperimentOf(b)}
}

// rawSendAt is the stored sendAt as the caller wrote it.
func (f fields) rawSendAt() *string {
	if f.localTime {
		return f.localSendAt
	}
	if f.sendAt == nil {
		return nil
	}
	s := f.sendAt.UTC().Format(time.RFC3339Nano)
	return &s
}

// merge applies in to f and checks the result; the error names every
// field that is wrong.
func (f *fields) merge(in Input) error {
	var e apperr.Fields
	if in.Name != nil {
		n := strings.TrimSpace(*in.Name)
		e.Check(n != "" && utf8.RuneCountInString(n) <= 200, "name", "must be 1-200 characters")
		f.name = n
	}
	if in.TemplateID != nil {
		e.Check(ids.Valid(*in.TemplateID), "templateId", "must be a template id")
		f.templateID = *in.TemplateID
	}
	if in.SegmentID != nil {
		e.Check(*in.SegmentID != "" && len(*in.SegmentID) <= 64, "segmentId", "must be a segment id")
		f.segmentID = *in.SegmentID
	}
	if in.SetFrom {
		if in.From != nil {
			v := strings.TrimSpace(*in.From)
			e.Check(v != "" && len(v) <= 320, "from", "must be an email address, optionally with a name: Name <addr@domain>")
			in.From = &v
		}
		f.from = in.From
	}
	if in.SetCampaign {
		f.campaignID = in.CampaignID
	}
	if in.SetTopic {
		if in.Topic != nil {
			e.Check(ids.Valid(*in.Topic), "topic", "must be a topic id")
		}
		f.topic = in.Topic
	}
	if in.SetExperiment {
		f.experiment = nil
		if in.Experiment != nil {
			f.experiment = in.Experiment.build(&e)
		}
	}
	raw := f.rawSendAt()
	if in.SetSendAt {
		raw = in.SendAt
	}
	if in.LocalTime != nil {
		f.localTime = *in.LocalTime
	}
	f.sendAt, f.localSendAt = nil, nil
	if raw != nil {
		if f.localTime {
			if w, ok := localtime.ParseWall(*raw); ok {
				s := w.Format(localtime.WallLayout)
				f.localSendAt = &s
			} else {
				e.Add("sendAt", "with localTime must be a wall-clock time without offset, e.g. 2026-12-01T09:00:00")
			}
		} else {
			if t, err := time.Parse(time.RFC3339Nano, *raw); err == nil {
				f.sendAt = &t
			} else {
				e.Add("sendAt", "must be an ISO 8601 time with an offset or Z, e.g. 2026-12-01T09:00:00Z (or set localTime)")
			}
		}
	}
	if f.name == "" && in.Name == nil {
		e.Add("name", "is required, 1-200 characters")
	}
	if f.templateID == "" && in.TemplateID == nil {
		e.Add("templateId", "is required")
	}
	if f.segmentID == "" && in.SegmentID == nil {
		e.Add("segmentId", "is required")
	}
	return e.Err()
}

// checkRefs answers the references' own 404s (ADDENDUM 13): the template,
// the segment, the campaign, the topic; then the sender, as a send checks
// it.
func (s *Store) checkRefs(ctx context.Context, tenantID string, f fields) error {
	ok, err := s.DB.TemplateExists(ctx, queries.TemplateExistsParams{TenantID: tenantID, ID: f.templateID})
	if err != nil {
		return err
	}
	if !ok {
		return templates.NotFound()
	}
	if ok, err = s.DB.SegmentExists(ctx, queries.SegmentExistsParams{TenantID: tenantID, ID: f.segmentID}); err != nil {
		return err
	} else if !ok {
		return segments.NotFound()
	}
	if f.campaignID != nil {
		if ok, err = s.DB.CampaignExists(ctx, queries.CampaignExistsParams{TenantID: tenantID, ID: *f.campaignID}); err != nil {
			return err
		} else if !ok {
			return apperr.NotFound("NOT_FOUND", "campaign")
		}
	}
	if f.topic != nil {
		if err := topics.Exists(ctx, s.DB.Queries, tenantID, *f.topic); err != nil {
			return err
		}
	}
	if f.experiment != nil {
		if err := s.checkVariants(ctx, tenantID, f.experiment); err != nil {
			return err
		}
	}
	if f.from != nil && s.From != nil {
		return s.From.CheckFrom(ctx, tenantID, *f.from)
	}
	return nil
}

// Create adds a draft.
func (s *Store) Create(ctx context.Context, tenantID string, in Input) (queries.Broadcast, error) {
	var f fields
	if err := f.merge(in); err != nil {
		return queries.Broadcast{}, err
	}
	if err := s.checkRefs(ctx, tenantID, f); err != nil {
		return queries.Broadcast{}, err
	}
	var b queries.Broadcast
	err := s.DB.InTx(ctx, func(q *store.Tx) error {
		var err error
		b, err = q.BroadcastInsert(ctx, queries.BroadcastInsertParams{TenantID: tenantID, ID: ids.New(ids.Broadcast),
			Name: f.name, TemplateID: f.templateID, SegmentID: f.segmentID, CampaignID: f.campaignID,
			FromAddress: f.from, Topic: f.topic, SendAt: f.sendAt, LocalSendAt: f.localSendAt, LocalTime: f.localTime,
			Experiment: f.experiment.marshal()})
		q.AuditResource(b.ID)
		return err
	})
	return b, err
}

// Get returns one broadcast.
func (s *Store) Get(ctx context.Context, tenantID, id string) (queries.Broadcast, error) {
	b, err := s.DB.BroadcastGet(ctx, queries.BroadcastGetParams{TenantID: tenantID, ID: id})
	return b, notFound(err)
}

// List returns a page of broadcasts, newest first, of one status when
// status is not "".
func (s *Store) List(ctx context.Context, tenantID, status string, p page.Params) ([]queries.Broadcast, *page.Cursor, error) {
	arg := queries.BroadcastListParams{TenantID: tenantID}
	if status != "" {
		if !slices.Contains(Statuses, status) {
			return nil, nil, apperr.Invalid("status", "must be one of "+strings.Join(Statuses, ", "))
		}
		arg.Status = &status
	}
	return page.List(p, func(q page.Query) ([]queries.Broadcast, error) {
		arg.BeforeTime, arg.BeforeID, arg.Lim = q.BeforeTime, q.BeforeID, q.Limit
		return s.DB.BroadcastList(ctx, arg)
	}, func(b queries.Broadcast) page.Cursor { return page.Cursor{Time: b.CreatedAt, ID: b.ID} })
}

// Update edits a draft or scheduled broadcast. A scheduled one keeps its
// status with its start recomputed from the new sendAt.
func (s *Store) Update(ctx context.Context, tenantID, id string, in Input) (queries.Broadcast, error) {
	if in.empty() {
		return queries.Broadcast{}, apperr.AtLeastOne("name", "templateId", "segmentId", "from", "sendAt",
			"localTime", "campaignId", "topic", "experiment")
	}
	var out queries.Broadcast
	err := s.DB.InTx(ctx, func(q *store.Tx) error {
		b, err := q.BroadcastGetForUpdate(ctx, queries.BroadcastGetForUpdateParams{TenantID: tenantID, ID: id})
		if err != nil {
			return notFound(err)
		}
		if b.Status != Draft && b.Status != Scheduled {
			return apperr.Invalid("status", "a "+b.Status+" broadcast cannot be edited (only draft or scheduled)")
		}
		f := fieldsOf(b)
		if err := f.merge(in); err != nil {
			return err
		}
		if err := s.checkRefs(ctx, tenantID, f); err != nil {
			return err
		}
		startsAt := b.StartsAt
		if b.Status == Scheduled {
			at, err := s.startInstant(ctx, q, tenantID, f, s.now())
			if err != nil {
				return err
			}
			startsAt = &at
			s.scheduleStart(q, tenantID, id, at)
		}
		out, err = q.BroadcastUpdate(ctx, queries.BroadcastUpdateParams{TenantID: tenantID, ID: id,
			Name: f.name, TemplateID: f.templateID, SegmentID: f.segmentID, CampaignID: f.campaignID,
			FromAddress: f.from, Topic: f.topic, SendAt: f.sendAt, LocalSendAt: f.localSendAt,
			LocalTime: f.localTime, StartsAt: startsAt, Experiment: f.experiment.marshal()})
		return err
	})
	return out, err
}

// Delete removes a draft, scheduled or cancelled broadcast with its
// recipients; its send records stay (they are history).
func (s *Store) Delete(ctx context.Context, tenantID, id string) error {
	return s.DB.InTx(ctx, func(q *store.Tx) error {
		b, err := q.BroadcastGetForUpdate(ctx, queries.BroadcastGetForUpdateParams{TenantID: tenantID, ID: id})
		if err != nil {
			return notFound(err)
		}
		if !slices.Contains([]string{Draft, Scheduled, Cancelled}, b.Status) {
			return apperr.Invalid("status", "a "+b.Status+" broadcast cannot be deleted (only draft, scheduled or cancelled; cancel it first)")
		}
		return q.BroadcastDelete(ctx, queries.BroadcastDeleteParams{TenantID: tenantID, ID: id})
	})
}

// Stats are a broadcast's counters (ADDENDUM 13).
type Stats struct {
	Recipients, Queued, Sent, Skipped, Failed, Cancelled          int64
	Delivered, Opened, Clicked, Bounced, Complained, Unsubscribed int64
}

// StatsOf reads the stats of broadcasts: the recipient counters and the
// outcomes (metrics counters), two statements for all of them.
func (s *Store) StatsOf(ctx context.Context, tenantID string, bs []queries.Broadcast) ([]Stats, error) {
	out := make([]Stats, len(bs))
	idList := make([]string, len(bs))
	for i, b := range bs {
		idList[i] = b.ID
		out[i].Recipients = b.Recipients
	}
	if len(bs) == 0 {
		return out, nil
	}
	counts, err := s.DB.BroadcastCounts(ctx, queries.BroadcastCountsParams{TenantID: tenantID, Ids: idList})
	if err != nil {
		return nil, err
	}
	for _, c := range counts {
		if i := slices.Index(idList, c.BroadcastID); i >= 0 {
			out[i].Sent, out[i].Skipped, out[i].Failed, out[i].Cancelled = c.Sent, c.Skipped, c.Failed, c.Cancelled
		}
	}
	for i := range out {
		st := &out[i]
		st.Queued = max(0, st.Recipients-st.Sent-st.Skipped-st.Failed-st.Cancelled)
	}
	rows, err := s.DB.BroadcastEngagement(ctx, queries.BroadcastEngagementParams{TenantID: tenantID, Ids: idList})
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		i := slices.Index(idList, r.BroadcastID)
		if i < 0 {
			continue
		}
		out[i].Delivered, out[i].Opened, out[i].Clicked = r.Delivered, r.Opened, r.Clicked
		out[i].Bounced, out[i].Complained, out[i].Unsubscribed = r.Bounced, r.Complained, r.Unsubscribed
	}
	return out, nil
}

// Complete marks sent every sending broadcast whose recipients have all
// ended (the sweep's check, for a completion whose batch died before it):
// it returns how many it completed.
func (s *Store) Complete(ctx context.Context) (int, error) {
	rows, err := s.DB.BroadcastsSending(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range rows {
		tag, err := s.DB.BroadcastComplete(ctx, queries.BroadcastCompleteParams(r))
		if err != nil {
			return n, err
		}
		n += int(tag)
	}
	return n, nil
}

// Recipients returns a page of a broadcast's recipients, by contact id,
// of one status when status is not "". Once an A/B broadcast's winner is
// picked, the rest not yet claimed carry the winner's variant: it is
// theirs, written as the dispatch claims each (release).
func (s *Store) Recipients(ctx context.Context, tenantID, id, status string, p page.Params) ([]queries.BroadcastRecipient, *page.Cursor, error) {
	if status != "" && !slices.Contains(RecipientStatuses, status) {
		return nil, nil, apperr.Invalid("status", "must be one of "+strings.Join(RecipientStatuses, ", "))
	}
	b, err := s.Get(ctx, tenantID, id)
	if err != nil {
		return nil, nil, err
	}
	arg := queries.BroadcastRecipientListParams{TenantID: tenantID, BroadcastID: id}
	if status != "" {
		arg.Status = &status
	}
	return page.List(p, func(q page.Query) ([]queries.BroadcastRecipient, error) {
		arg.After, arg.Lim = q.AfterID, q.Limit
		rows, err := s.DB.BroadcastRecipientList(ctx, arg)
		for i := range rows {
			if rows[i].Held && rows[i].VariantID == nil {
				rows[i].VariantID = b.WinnerVariantID
			}
		}
		return rows, err
	}, func(r queries.BroadcastRecipient) page.Cursor { return page.Cursor{ID: r.ContactID} })
}
