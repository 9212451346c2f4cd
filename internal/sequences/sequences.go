// Package sequences stores sequence definitions: the PUT rules (create,
// update, idempotent no-op, version, plan limit, references), PATCH of name,
// enabled and trigger event, list, get and delete. The YAML itself is parsed
// by package definition; enrolments and scheduled sends belong to the
// sequence engine, which hooks into enabling and deleting (OnEnabled,
// OnDelete).
package sequences

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"tidings/internal/apperr"
	"tidings/internal/events"
	"tidings/internal/page"
	"tidings/internal/rules"
	"tidings/internal/sequences/definition"
	"tidings/internal/storable"
	"tidings/internal/store"
	"tidings/internal/topics"
	"tidings/queries"
)

// maxNameLen bounds a name given outside the YAML, as definition does
// inside it.
const maxNameLen = 256

// Store keeps sequence definitions.
type Store struct {
	DB        *store.DB
	FreeLimit int // PLAN_FREE_SEQUENCES

	// OnEnabled, when set, runs in the transaction of a PATCH that changes
	// enabled, after the row is written: the engine pauses or resumes the
	// sequence's enrolments there. An error rolls the PATCH back.
	OnEnabled func(ctx context.Context, q *store.Tx, tenantID, sequenceID string, enabled bool) error
	// OnDelete, when set, runs in the transaction of a DELETE, after the row
	// is deleted: the engine cancels pending sends (sequence_deleted) and
	// exits enrolments there. An error rolls the DELETE back.
	OnDelete func(ctx context.Context, q *store.Tx, tenantID, sequenceID string) error
	// OnNewVersion, when set, runs in the transaction of a PUT that stores
	// a new version, after the row is written: the engine cancels the
	// pending sends of steps the version no longer has (step_removed).
	OnNewVersion func(ctx context.Context, q *store.Tx, tenantID, sequenceID string, d *definition.Definition) error
}

// Put is a PUT body: the YAML and, from the JSON wrapper, an optional name
// (overriding the YAML's) and enabled (taken on create only).
type Put struct {
	Content []byte
	Name    *string
	Enabled *bool
}

// Patch is a PATCH body; nil fields were not sent.
type Patch struct {
	Name, TriggerEvent *string
	Enabled            *bool
}

// Saved is the outcome of a PUT.
type Saved struct {
	Sequence queries.Sequence
	// Warnings are the definition's (valid, probably not meant).
	Warnings []string
	Created  bool
}

// NotFound is the sequence 404.
func NotFound() *apperr.Error { return apperr.NotFound("SEQUENCE_NOT_FOUND", "sequence") }

// checkName validates a name given outside the YAML.
func checkName(f *apperr.Fields, name *string) {
	if name == nil {
		return
	}
	n := utf8.RuneCountInString(*name)
	switch {
	case strings.TrimSpace(*name) == "":
		f.Add("name", "must not be blank")
	case n > maxNameLen:
		f.Add("name", "must be at most 256 characters")
	case storable.Text(*name) != "":
		f.Add("name", storable.Text(*name))
	}
}

// Put creates or updates sequence id from its YAML. The same body twice
// changes nothing the second time. A change of content or trigger event
// makes a new version; a name-only change does not. enabled is taken on
// create only: a PUT never flips it.
func (s *Store) Put(ctx context.Context, tenantID, id string, p Put) (Saved, error) {
	var f apperr.Fields
	checkName(&f, p.Name)
	if err := f.Err(); err != nil {
		return Saved{}, err
	}
	for attempt := 0; ; attempt++ {
		out, err := s.put(ctx, tenantID, id, p)
		// A concurrent PUT created the sequence first: this one is an update.
		if errors.Is(err, errRaced) && attempt == 0 {
			continue
		}
		return out, err
	}
}

var errRaced = errors.New("sequence created concurrently")

func (s *Store) put(ctx context.Context, tenantID, id string, p Put) (out Saved, err error) {
	err = s.DB.InTx(ctx, func(q *store.Tx) error {
		cur, err := q.SequenceGetForUpdate(ctx, queries.SequenceGetForUpdateParams{TenantID: tenantID, ID: id})
		create := store.IsNoRows(err)
		if err != nil && !create {
			return err
		}
		d, err := definition.Parse(p.Content, definition.Options{RequireName: create && p.Name == nil})
		if err != nil {
			return err
		}
		out.Warnings = d.Warnings
		if err := checkRefs(ctx, q, tenantID, d); err != nil {
			return err
		}
		if err := checkSegmentTrigger(ctx, q, tenantID, d); err != nil {
			return err
		}
		name := d.Name
		if p.Name != nil {
			name = *p.Name
		}
		if create {
			out.Created = true
			out.Sequence, err = s.create(ctx, q, tenantID, id, string(p.Content), name, d, p.Enabled)
			if err != nil {
				return err
			}
			return setSegmentTrigger(ctx, q, tenantID, id, d)
		}
		if name == "" {
			name = cur.Name // neither the YAML nor the wrapper renames it
		}
		out.Sequence, err = update(ctx, q, cur, string(p.Content), name, d)
		if err == nil {
			err = setSegmentTrigger(ctx, q, tenantID, id, d)
		}
		if err != nil || out.Sequence.Version == cur.Version || s.OnNewVersion == nil {
			return err
		}
		return s.OnNewVersion(ctx, q, tenantID, id, d)
	})
	return out, err
}

func (s *Store) create(ctx context.Context, q *store.Tx, tenantID, id, content, name string,
	d *definition.Definition, enabled *bool) (queries.Sequence, error) {
	// Lock the tenant row so concurrent creates cannot both take the last
	// slot (as templates and API keys do).
	t, err := q.TenantGetForUpdate(ctx, tenantID)
	if err != nil {
		return queries.Sequence{}, err
	}
	if t.Plan == "free" {
		n, err := q.SequenceCount(ctx, tenantID)
		if err != nil {
			return queries.Sequence{}, err
		}
		if n >= int64(s.FreeLimit) {
			return queries.Sequence{}, apperr.PlanLimit("sequences", s.FreeLimit)
		}
	}
	def, err := stored(d, name, d.Trigger.Event)
	if err != nil {
		return queries.Sequence{}, err
	}
	on := true // ADDENDUM 6: enabled by default on create
	if enabled != nil {
		on = *enabled
	}
	seq, err := q.SequenceInsert(ctx, queries.SequenceInsertParams{TenantID: tenantID, ID: id, Name: name,
		Content: content, Definition: def, TriggerEvent: d.Trigger.Event, Enabled: on})
	if store.IsNoRows(err) {
		return seq, errRaced
	}
	return seq, err
}

// update writes a PUT's new state of cur, when it differs.
func update(ctx context.Context, q *store.Tx, cur queries.Sequence, content, name string,
	d *definition.Definition) (queries.Sequence, error) {
	newVersion := content != cur.Content || d.Trigger.Event != cur.TriggerEvent
	if !newVersion && name == cur.Name {
		return cur, nil
	}
	def, err := stored(d, name, d.Trigger.Event)
	if err != nil {
		return cur, err
	}
	next := queries.SequenceUpdateParams{TenantID: cur.TenantID, ID: cur.ID, Name: name, Content: content,
		Definition: def, TriggerEvent: d.Trigger.Event, Version: cur.Version}
	if newVersion {
		next.Version++
	}
	return q.SequenceUpdate(ctx, next)
}

// stored is the definition column: the definition's JSON form with the
// sequence's name and trigger event as they stand (the wrapper's name, a
// PATCHed trigger event), so the engine reads one document.
func stored(d *definition.Definition, name, trigger string) (json.RawMessage, error) {
	c := *d
	c.Name, c.Trigger.Event = name, trigger
	return json.Marshal(&c)
}

// checkSegmentTrigger refuses a trigger.segment that is not a live segment
// of the tenant (ADDENDUM 21).
func checkSegmentTrigger(ctx context.Context, q *store.Tx, tenantID string, d *definition.Definition) error {
	id := d.Trigger.Segment
	if id == "" {
		return nil
	}
	found, err := q.SegmentsExisting(ctx, queries.SegmentsExistingParams{TenantID: tenantID, Ids: []string{id}})
	if err != nil {
		return err
	}
	if len(found) == 0 {
		return apperr.Invalid("trigger.segment", "unknown segment "+id)
	}
	notLive, err := q.SegmentsNotLive(ctx, queries.SegmentsNotLiveParams{TenantID: tenantID, Ids: []string{id}})
	if err != nil {
		return err
	}
	if len(notLive) > 0 {
		return apperr.Invalid("trigger.segment", "segment "+id+" is not live: only a live segment's entered or exited starts a sequence")
	}
	return nil
}

// setSegmentTrigger records the sequence's segment trigger, if any, where
// the live segments' changes look it up.
func setSegmentTrigger(ctx context.Context, q *store.Tx, tenantID, id string, d *definition.Definition) error {
	p := queries.SequenceSetSegmentTriggerParams{TenantID: tenantID, ID: id}
	if d.Trigger.Segment != "" {
		p.TriggerSegment, p.TriggerOn = &d.Trigger.Segment, &d.Trigger.On
	}
	return q.SequenceSetSegmentTrigger(ctx, p)
}

// checkRefs answers VALIDATION_ERROR for unknown segments in the rule trees
// (naming each leaf by its YAML path), then TEMPLATE_NOT_FOUND for unknown
// templates of the email steps; one query each.
func checkRefs(ctx context.Context, q *store.Tx, tenantID string, d *definition.Definition) error {
	if ids := d.SegmentIDs(); len(ids) > 0 {
		found, err := q.SegmentsExisting(ctx, queries.SegmentsExistingParams{TenantID: tenantID, Ids: ids})
		if err != nil {
			return err
		}
		var f apperr.Fields
		walk := func(root string, n *rules.Node) {
			n.Walk(root, func(path string, m *rules.Node) {
				if m.Type == rules.TypeSegment && !slices.Contains(found, m.SegmentID) {
					f.Add(path+".segmentId", "unknown segment "+m.SegmentID)
				}
			})
		}
		walk("gates", d.Gates)
		walk("exit", d.Exit)
		for i, st := range d.Steps {
			walk("steps["+strconv.Itoa(i)+"].conditions", st.Conditions)
		}
		if err := f.Err(); err != nil {
			return err
		}
	}
	if ids := d.TemplateIDs(); len(ids) > 0 {
		found, err := q.TemplatesExisting(ctx, queries.TemplatesExistingParams{TenantID: tenantID, Ids: ids})
		if err != nil {
			return err
		}
		var missing []string
		for _, id := range ids {
			if !slices.Contains(found, id) {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			// Say which steps: details.fields by step path, as a validation
			// error would, besides the ids.
			fields := map[string]any{}
			for i, st := range d.Steps {
				if st.Kind == definition.KindEmail && slices.Contains(missing, st.Template) {
					fields["steps["+strconv.Itoa(i)+"].template"] = []string{"unknown template " + st.Template}
				}
			}
			e := apperr.NotFound("TEMPLATE_NOT_FOUND", "template")
			e.Message = "template not found: " + strings.Join(missing, ", ")
			e.Details = map[string]any{"templateIds": missing, "fields": fields}
			return e
		}
	}
	if d.Topic != "" {
		if err := topics.Exists(ctx, q.Queries, tenantID, d.Topic); err != nil {
			return err
		}
	}
	return nil
}

// Patch changes name, enabled or trigger event and returns the sequence.
// A new trigger event makes a new version; name and enabled do not. A
// change of enabled runs OnEnabled in the same transaction. A PATCH that
// changes nothing writes nothing.
func (s *Store) Patch(ctx context.Context, tenantID, id string, p Patch) (queries.Sequence, error) {
	if err := p.validate(); err != nil {
		return queries.Sequence{}, err
	}
	var seq queries.Sequence
	err := s.DB.InTx(ctx, func(q *store.Tx) error {
		cur, err := q.SequenceGetForUpdate(ctx, queries.SequenceGetForUpdateParams{TenantID: tenantID, ID: id})
		if err != nil {
			return apperr.Specific(err, apperr.KindNotFound, NotFound())
		}
		seq = cur
		name, trigger := cur.Name, cur.TriggerEvent
		if p.Name != nil {
			name = *p.Name
		}
		if p.TriggerEvent != nil {
			trigger = *p.TriggerEvent
		}
		if name != cur.Name || trigger != cur.TriggerEvent {
			def, err := restate(cur, name, trigger)
			if err != nil {
				return err
			}
			next := queries.SequenceUpdateParams{TenantID: tenantID, ID: id, Name: name, Content: cur.Content,
				Definition: def, TriggerEvent: trigger, Version: cur.Version}
			if trigger != cur.TriggerEvent {
				next.Version++
			}
			if seq, err = q.SequenceUpdate(ctx, next); err != nil {
				return err
			}
		}
		if p.Enabled != nil && *p.Enabled != cur.Enabled {
			if seq, err = q.SequenceSetEnabled(ctx, queries.SequenceSetEnabledParams{TenantID: tenantID, ID: id,
				Enabled: *p.Enabled}); err != nil {
				return err
			}
			if s.OnEnabled != nil {
				return s.OnEnabled(ctx, q, tenantID, id, *p.Enabled)
			}
		}
		return nil
	})
	return seq, err
}

func (p Patch) validate() error {
	if p.Name == nil && p.Enabled == nil && p.TriggerEvent == nil {
		return apperr.AtLeastOne("name", "enabled", "triggerEvent")
	}
	var f apperr.Fields
	checkName(&f, p.Name)
	if t := p.TriggerEvent; t != nil {
		// The rules of trigger.event in the YAML: a custom event name
		// (events.ValidateName).
		switch {
		case strings.TrimSpace(*t) == "":
			f.Add("triggerEvent", "must not be blank")
		case utf8.RuneCountInString(*t) > maxNameLen:
			f.Add("triggerEvent", "must be at most 256 characters")
		case storable.Text(*t) != "":
			f.Add("triggerEvent", storable.Text(*t))
		case events.IsSystem(*t):
			f.Add("triggerEvent", "must be a custom event: names starting with \"email.\" are system events, which do not enrol contacts")
		}
	}
	return f.Err()
}

// restate is cur's definition column with a new name and trigger event. It
// is derived from the stored YAML, the source of truth, which was valid
// when stored.
func restate(cur queries.Sequence, name, trigger string) (json.RawMessage, error) {
	d, err := definition.Parse([]byte(cur.Content), definition.Options{})
	if err != nil {
		return nil, err
	}
	return stored(d, name, trigger)
}

// Get returns a sequence or SEQUENCE_NOT_FOUND.
func (s *Store) Get(ctx context.Context, tenantID, id string) (queries.Sequence, error) {
	seq, err := s.DB.SequenceGet(ctx, queries.SequenceGetParams{TenantID: tenantID, ID: id})
	return seq, apperr.Specific(err, apperr.KindNotFound, NotFound())
}

// Exists answers SEQUENCE_NOT_FOUND for a sequence the tenant lacks, for
// its sub-resources.
func (s *Store) Exists(ctx context.Context, tenantID, id string) error {
	ok, err := s.DB.SequenceExists(ctx, queries.SequenceExistsParams{TenantID: tenantID, ID: id})
	if err == nil && !ok {
		return NotFound()
	}
	return err
}

// List returns a page of sequences, newest first, without their content.
func (s *Store) List(ctx context.Context, tenantID string, p page.Params) ([]queries.SequenceListRow, *page.Cursor, error) {
	return page.List(p, func(q page.Query) ([]queries.SequenceListRow, error) {
		return s.DB.SequenceList(ctx, queries.SequenceListParams{TenantID: tenantID, BeforeTime: q.BeforeTime, BeforeID: q.BeforeID, Lim: q.Limit})
	}, func(r queries.SequenceListRow) page.Cursor { return page.Cursor{Time: r.CreatedAt, ID: r.ID} })
}

// Delete removes a sequence and runs OnDelete in the same transaction.
// Campaigns that list it keep its id (they resolve it to nothing).
func (s *Store) Delete(ctx context.Context, tenantID, id string) error {
	return s.DB.InTx(ctx, func(q *store.Tx) error {
		n, err := q.SequenceDelete(ctx, queries.SequenceDeleteParams{TenantID: tenantID, ID: id})
		if err != nil {
			return err
		}
		if n == 0 {
			return NotFound()
		}
		if s.OnDelete != nil {
			return s.OnDelete(ctx, q, tenantID, id)
		}
		return nil
	})
}

// Steps is the parsed steps of a stored sequence in the definition's JSON
// form (id, action, template or duration, conditions), as GET shows them.
func Steps(seq queries.Sequence) json.RawMessage {
	var d struct {
		Steps json.RawMessage `json:"steps"`
	}
	if json.Unmarshal(seq.Definition, &d) != nil || len(d.Steps) == 0 || string(d.Steps) == "null" {
		return json.RawMessage("[]") // a row written by hand, without a definition
	}
	return d.Steps
}
