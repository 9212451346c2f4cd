package broadcasts_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"tidings/internal/app"
	"tidings/internal/app/apptest"
	"tidings/internal/apperr"
	"tidings/internal/broadcasts"
	"tidings/internal/page"
	"tidings/internal/provider"
	"tidings/internal/provider/providertest"
	"tidings/internal/segments"
	"tidings/internal/templates"
	"tidings/internal/testenv"
	"tidings/queries"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const tenant = "ten_b"

type fixture struct {
	t       testing.TB
	ctx     context.Context
	svc     *app.Services
	sg      *providertest.SendGrid
	segment string
}

// newFixture is a tenant that may send (enabled, a verified domain), a
// template "news", a segment of the contacts whose property plan is "pro",
// and the contacts given (email → properties JSON).
func newFixture(t testing.TB, contacts map[string]string) *fixture {
	t.Helper()
	return newFixtureWith(t, contacts, nil)
}

// newFixtureWith is newFixture whose provider (the fake SendGrid's client)
// is wrapped by wrap when it is not nil.
func newFixtureWith(t testing.TB, contacts map[string]string, wrap func(provider.Provider) provider.Provider) *fixture {
	t.Helper()
	f := &fixture{t: t, ctx: context.Background(), sg: providertest.NewSendGrid(t)}
	cfg := apptest.Config(t)
	f.sg.Configure(cfg)
	prov, err := provider.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		prov = wrap(prov)
	}
	f.svc = apptest.Services(t, app.Infra{Config: cfg, Provider: prov, MJML: testenv.MJML(t)})
	f.exec(`INSERT INTO tenants (id, name, sending_status, default_from_address) VALUES ($1, 'B', 'enabled', 'B <b@b.example>')`, tenant)
	f.exec(`INSERT INTO domains (tenant_id, domain, status, sending_enabled, verification_token, dkim_tokens)
		VALUES ($1, 'b.example', 'verified', true, 't', '{a,b,c}')`, tenant)
	name, subject := "News", "News for {{ contact.email }}"
	content := `<mjml><mj-body><mj-section><mj-column><mj-text>Hello <a href="https://b.example/x">x</a></mj-text></mj-column></mj-section></mj-body></mjml>`
	if _, _, err := f.svc.Templates.Put(f.ctx, tenant, "news", templates.Put{Name: &name, Subject: &subject, Content: &content}); err != nil {
		t.Fatal(err)
	}
	segName := "Pro"
	seg, err := f.svc.Segments.Create(f.ctx, tenant, segments.Input{Name: &segName,
		Rules: json.RawMessage(`{"operator":"and","conditions":[{"type":"property","field":"plan","operator":"equals","value":"pro"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	f.segment = seg.ID
	i := 0
	for email, props := range contacts {
		i++
		f.exec(`INSERT INTO contacts (tenant_id, id, email, properties, created_at) VALUES ($1, $2, $3, $4, now() - interval '1 minute')`,
			tenant, fmt.Sprintf("cnt_%02d_%s", i, strings.Split(email, "@")[0]), email, props)
	}
	return f
}

func (f *fixture) exec(sql string, args ...any) {
	f.t.Helper()
	if _, err := f.svc.DB.Pool.Exec(f.ctx, sql, args...); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) scalar(sql string, args ...any) any {
	f.t.Helper()
	var v any
	if err := f.svc.DB.Pool.QueryRow(f.ctx, sql, args...).Scan(&v); err != nil {
		f.t.Fatal(err)
	}
	return v
}

func ptr[T any](v T) *T { return &v }

func (f *fixture) create(in broadcasts.Input) queries.Broadcast {
	f.t.Helper()
	if in.Name == nil {
		in.Name = ptr("Launch")
	}
	if in.TemplateID == nil {
		in.TemplateID = ptr("news")
	}
	if in.SegmentID == nil {
		in.SegmentID = &f.segment
	}
	b, err := f.svc.Broadcasts.Create(f.ctx, tenant, in)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

// drain starts what is due and dispatches until nothing is claimed.
func (f *fixture) drain(id string) queries.Broadcast {
	f.t.Helper()
	if err := f.svc.Broadcasts.Start(f.ctx, tenant, id); err != nil {
		f.t.Fatal(err)
	}
	for range 50 {
		n, err := f.svc.BroadcastDispatcher.Dispatch(f.ctx, 100)
		if err != nil {
			f.t.Fatal(err)
		}
		if n.Claimed == 0 {
			break
		}
	}
	b, err := f.svc.Broadcasts.Get(f.ctx, tenant, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

// st is the broadcast's stats.
func (f *fixture) st(b queries.Broadcast) broadcasts.Stats {
	f.t.Helper()
	st, err := f.svc.Broadcasts.StatsOf(f.ctx, tenant, []queries.Broadcast{b})
	if err != nil {
		f.t.Fatal(err)
	}
	return st[0]
}

func (f *fixture) recipients(id string) map[string]queries.BroadcastRecipient {
	f.t.Helper()
	rows, _, err := f.svc.Broadcasts.Recipients(f.ctx, tenant, id, "", page.Params{Limit: 1000})
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string]queries.BroadcastRecipient{}
	for _, r := range rows {
		out[r.Email] = r
	}
	return out
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if !apperr.IsCode(err, code) {
		t.Fatalf("got %v, want %s", err, code)
	}
}

// A broadcast sent now reaches each member once, with its record naming
// the broadcast, List-Unsubscribe, email.sent naming the broadcast, and
// stats that add up; non-members never.
func TestSendNow(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{
		"ann@example.com": `{"plan":"pro"}`, "bob@example.com": `{"plan":"pro"}`, "cy@example.com": `{"plan":"free"}`,
	})
	b := f.create(broadcasts.Input{})
	if b.Status != broadcasts.Draft {
		t.Fatalf("created %s", b.Status)
	}
	b, err := f.svc.Broadcasts.Send(f.ctx, tenant, b.ID, nil)
	if err != nil || b.Status != broadcasts.Sending || b.StartedAt == nil {
		t.Fatalf("send: %+v %v", b, err)
	}
	b = f.drain(b.ID)
	if b.Status != broadcasts.Sent || b.CompletedAt == nil || b.Recipients != 2 || f.st(b).Sent != 2 {
		t.Fatalf("after drain: %+v", b)
	}
	if n := f.sg.Count(); n != 2 {
		t.Fatalf("provider took %d messages, want 2", n)
	}
	for _, m := range f.sg.Messages() {
		if m.Mail.Headers["List-Unsubscribe"] == "" {
			t.Errorf("no List-Unsubscribe on %s", m.Mail.Personalizations[0].To[0].Address)
		}
	}
	rs := f.recipients(b.ID)
	if len(rs) != 2 || rs["cy@example.com"].Email != "" {
		t.Fatalf("recipients %+v", rs)
	}
	for _, r := range rs {
		if r.Status != broadcasts.RecipientSent || r.SendID == nil {
			t.Fatalf("recipient %+v", r)
		}
		if got := f.scalar(`SELECT broadcast_id FROM sends WHERE tenant_id = $1 AND id = $2`, tenant, *r.SendID); got != b.ID {
			t.Fatalf("send's broadcast %v", got)
		}
	}
	if n := f.scalar(`SELECT count(*) FROM events WHERE tenant_id = $1 AND name = 'email.sent' AND properties->>'broadcastId' = $2`,
		tenant, b.ID); n != int64(2) {
		t.Fatalf("%v email.sent events name the broadcast", n)
	}
	stats, err := f.svc.Broadcasts.StatsOf(f.ctx, tenant, []queries.Broadcast{b})
	if err != nil || stats[0].Recipients != 2 || stats[0].Sent != 2 || stats[0].Queued != 0 {
		t.Fatalf("stats %+v %v", stats, err)
	}
	// Broadcast sends count in the tenant's metrics as sends do.
	if n := f.scalar(`SELECT sum(sent)::bigint FROM metric_counts WHERE tenant_id = $1 AND scope = 'broadcast' AND scope_id = $2`,
		tenant, b.ID); n != int64(2) {
		t.Fatalf("broadcast sent counter %v", n)
	}
	// Dispatching again sends nothing more.
	f.drain(b.ID)
	if n := f.sg.Count(); n != 2 {
		t.Fatalf("provider took %d messages after a second drain", n)
	}
}

// Each skip reason that exists today, checked just before the message.
func TestSkipReasons(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{
		"ok@example.com": `{"plan":"pro"}`, "unsub@example.com": `{"plan":"pro"}`,
		"supp@example.com": `{"plan":"pro"}`, "gone@example.com": `{"plan":"pro"}`,
	})
	b := f.create(broadcasts.Input{})
	if _, err := f.svc.Broadcasts.Send(f.ctx, tenant, b.ID, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Broadcasts.Start(f.ctx, tenant, b.ID); err != nil {
		t.Fatal(err)
	}
	// After the snapshot, before the messages.
	f.exec(`UPDATE contacts SET subscribed = false WHERE tenant_id = $1 AND email = 'unsub@example.com'`, tenant)
	f.exec(`UPDATE contacts SET suppressed = true WHERE tenant_id = $1 AND email = 'supp@example.com'`, tenant)
	f.exec(`DELETE FROM contacts WHERE tenant_id = $1 AND email = 'gone@example.com'`, tenant)
	b = f.drain(b.ID)
	want := map[string]string{"unsub@example.com": broadcasts.SkipUnsubscribed, "supp@example.com": broadcasts.SkipSuppressed,
		"gone@example.com": broadcasts.SkipContactDeleted}
	for email, r := range f.recipients(b.ID) {
		if reason, skipped := want[email]; skipped {
			if r.Status != broadcasts.RecipientSkipped || r.SkipReason == nil || *r.SkipReason != reason {
				t.Errorf("%s: %s %v, want skipped %s", email, r.Status, r.SkipReason, reason)
			}
		} else if r.Status != broadcasts.RecipientSent {
			t.Errorf("%s: %s", email, r.Status)
		}
	}
	if b.Status != broadcasts.Sent || f.st(b).Skipped != 3 || f.st(b).Sent != 1 || f.sg.Count() != 1 {
		t.Fatalf("broadcast %+v, provider %d", b, f.sg.Count())
	}

	// In sandbox only the whitelist receives.
	f.exec(`UPDATE tenants SET sending_status = 'sandbox', sandbox_whitelist = '{ok@example.com}' WHERE id = $1`, tenant)
	f.exec(`INSERT INTO contacts (tenant_id, id, email, properties, created_at) VALUES ($1, 'cnt_x', 'x@example.com', '{"plan":"pro"}', now() - interval '1 minute')`, tenant)
	b2 := f.create(broadcasts.Input{})
	if _, err := f.svc.Broadcasts.Send(f.ctx, tenant, b2.ID, nil); err != nil {
		t.Fatal(err)
	}
	f.drain(b2.ID)
	r := f.recipients(b2.ID)["x@example.com"]
	if r.Status != broadcasts.RecipientSkipped || *r.SkipReason != broadcasts.SkipNotWhitelisted {
		t.Fatalf("sandbox recipient %+v", r)
	}
}

// The audience is the segment's members when sending starts: a contact
// created after startedAt never receives it.
func TestAudienceIsSnapshotAtStart(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{"ann@example.com": `{"plan":"pro"}`})
	b := f.create(broadcasts.Input{})
	if _, err := f.svc.Broadcasts.Send(f.ctx, tenant, b.ID, nil); err != nil {
		t.Fatal(err)
	}
	f.exec(`INSERT INTO contacts (tenant_id, id, email, properties, created_at) VALUES ($1, 'cnt_late', 'late@example.com', '{"plan":"pro"}', now() + interval '1 second')`, tenant)
	b = f.drain(b.ID)
	if b.Recipients != 1 || f.recipients(b.ID)["late@example.com"].Email != "" {
		t.Fatalf("recipients %d: %+v", b.Recipients, f.recipients(b.ID))
	}
}

// Every move of the status table, allowed and refused.
func TestStatusMoves(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{"ann@example.com": `{"plan":"pro"}`, "bob@example.com": `{"plan":"pro"}`})
	s := f.svc.Broadcasts
	later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)

	// draft: pause and resume refused, cancel and delete allowed.
	b := f.create(broadcasts.Input{})
	_, err := s.Pause(f.ctx, tenant, b.ID)
	wantCode(t, err, "VALIDATION_ERROR")
	_, err = s.Resume(f.ctx, tenant, b.ID)
	wantCode(t, err, "VALIDATION_ERROR")
	if err := s.Delete(f.ctx, tenant, b.ID); err != nil {
		t.Fatal(err)
	}
	_, err = s.Get(f.ctx, tenant, b.ID)
	wantCode(t, err, "NOT_FOUND")

	// scheduled: PATCH allowed, pause ⇄ resume, cancel, then delete.
	b = f.create(broadcasts.Input{SendAt: &later, SetSendAt: true})
	if b, err = s.Send(f.ctx, tenant, b.ID, nil); err != nil || b.Status != broadcasts.Scheduled {
		t.Fatalf("scheduled: %+v %v", b, err)
	}
	if b, err = s.Update(f.ctx, tenant, b.ID, broadcasts.Input{Name: ptr("Renamed")}); err != nil || b.Name != "Renamed" || b.Status != broadcasts.Scheduled {
		t.Fatalf("patch scheduled: %+v %v", b, err)
	}
	if b, err = s.Pause(f.ctx, tenant, b.ID); err != nil || b.Status != broadcasts.Paused {
		t.Fatalf("pause: %+v %v", b, err)
	}
	_, err = s.Update(f.ctx, tenant, b.ID, broadcasts.Input{Name: ptr("x")})
	wantCode(t, err, "VALIDATION_ERROR")
	if b, err = s.Resume(f.ctx, tenant, b.ID); err != nil || b.Status != broadcasts.Scheduled {
		t.Fatalf("resume: %+v %v", b, err)
	}
	// Not due yet: Start leaves it alone.
	if b = f.drain(b.ID); b.Status != broadcasts.Scheduled || f.sg.Count() != 0 {
		t.Fatalf("started early: %+v", b)
	}
	if b, err = s.Cancel(f.ctx, tenant, b.ID); err != nil || b.Status != broadcasts.Cancelled {
		t.Fatalf("cancel: %+v %v", b, err)
	}
	for _, move := range []func(context.Context, string, string) (queries.Broadcast, error){s.Pause, s.Resume, s.Cancel} {
		_, err = move(f.ctx, tenant, b.ID)
		wantCode(t, err, "VALIDATION_ERROR")
	}
	_, err = s.Send(f.ctx, tenant, b.ID, nil)
	wantCode(t, err, "VALIDATION_ERROR")
	if err := s.Delete(f.ctx, tenant, b.ID); err != nil {
		t.Fatal(err)
	}

	// sending: paused holds every recipient; resume sends them; a sent
	// broadcast can be neither edited, cancelled nor deleted.
	b = f.create(broadcasts.Input{})
	if b, err = s.Send(f.ctx, tenant, b.ID, nil); err != nil || b.Status != broadcasts.Sending {
		t.Fatalf("send: %+v %v", b, err)
	}
	if err := s.Start(f.ctx, tenant, b.ID); err != nil {
		t.Fatal(err)
	}
	if b, err = s.Pause(f.ctx, tenant, b.ID); err != nil || b.Status != broadcasts.Paused {
		t.Fatalf("pause sending: %+v %v", b, err)
	}
	_, err = s.Update(f.ctx, tenant, b.ID, broadcasts.Input{Name: ptr("x")})
	wantCode(t, err, "VALIDATION_ERROR")
	err = s.Delete(f.ctx, tenant, b.ID)
	wantCode(t, err, "VALIDATION_ERROR")
	if n, _ := f.svc.BroadcastDispatcher.Dispatch(f.ctx, 100); n.Claimed != 0 {
		t.Fatalf("a paused broadcast dispatched %d", n.Claimed)
	}
	if b, err = s.Resume(f.ctx, tenant, b.ID); err != nil || b.Status != broadcasts.Sending {
		t.Fatalf("resume sending: %+v %v", b, err)
	}
	if b = f.drain(b.ID); b.Status != broadcasts.Sent || f.sg.Count() != 2 {
		t.Fatalf("after resume: %+v, %d sent", b, f.sg.Count())
	}
	for _, move := range []func(context.Context, string, string) (queries.Broadcast, error){s.Pause, s.Resume, s.Cancel} {
		_, err = move(f.ctx, tenant, b.ID)
		wantCode(t, err, "VALIDATION_ERROR")
	}
	wantCode(t, s.Delete(f.ctx, tenant, b.ID), "VALIDATION_ERROR")
	_, err = s.Update(f.ctx, tenant, b.ID, broadcasts.Input{Name: ptr("x")})
	wantCode(t, err, "VALIDATION_ERROR")
}

// Cancel while sending: the recipients not yet sent are cancelled, the
// broadcast is cancelled, nothing more leaves.
func TestCancelWhileSending(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{"a@example.com": `{"plan":"pro"}`, "b@example.com": `{"plan":"pro"}`, "c@example.com": `{"plan":"pro"}`})
	b := f.create(broadcasts.Input{})
	if _, err := f.svc.Broadcasts.Send(f.ctx, tenant, b.ID, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Broadcasts.Start(f.ctx, tenant, b.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := f.svc.BroadcastDispatcher.Dispatch(f.ctx, 1); err != nil || n.Sent != 1 {
		t.Fatalf("%+v %v", n, err)
	}
	b, err := f.svc.Broadcasts.Cancel(f.ctx, tenant, b.ID)
	if err != nil || b.Status != broadcasts.Cancelled || f.st(b).Cancelled != 2 || f.st(b).Sent != 1 {
		t.Fatalf("cancel: %+v %v", b, err)
	}
	f.drain(b.ID)
	if f.sg.Count() != 1 {
		t.Fatalf("%d messages after cancel", f.sg.Count())
	}
}

// Fields and references are checked on create with the spec's codes.
func TestCreateValidation(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	s := f.svc.Broadcasts
	for name, tc := range map[string]struct {
		in   broadcasts.Input
		code string
	}{
		"no name":           {broadcasts.Input{Name: ptr(""), TemplateID: ptr("news"), SegmentID: &f.segment}, "VALIDATION_ERROR"},
		"long name":         {broadcasts.Input{Name: ptr(strings.Repeat("n", 201)), TemplateID: ptr("news"), SegmentID: &f.segment}, "VALIDATION_ERROR"},
		"unknown template":  {broadcasts.Input{Name: ptr("n"), TemplateID: ptr("nope"), SegmentID: &f.segment}, "TEMPLATE_NOT_FOUND"},
		"unknown segment":   {broadcasts.Input{Name: ptr("n"), TemplateID: ptr("news"), SegmentID: ptr("seg_nope")}, "SEGMENT_NOT_FOUND"},
		"unknown campaign":  {broadcasts.Input{Name: ptr("n"), TemplateID: ptr("news"), SegmentID: &f.segment, CampaignID: ptr("cmp_x"), SetCampaign: true}, "NOT_FOUND"},
		"unknown topic":     {broadcasts.Input{Name: ptr("n"), TemplateID: ptr("news"), SegmentID: &f.segment, Topic: ptr("digest"), SetTopic: true}, "NOT_FOUND"},
		"sendAt no offset":  {broadcasts.Input{Name: ptr("n"), TemplateID: ptr("news"), SegmentID: &f.segment, SendAt: ptr("2026-12-01T09:00:00"), SetSendAt: true}, "VALIDATION_ERROR"},
		"local with offset": {broadcasts.Input{Name: ptr("n"), TemplateID: ptr("news"), SegmentID: &f.segment, SendAt: ptr("2026-12-01T09:00:00Z"), SetSendAt: true, LocalTime: ptr(true)}, "VALIDATION_ERROR"},
		"unknown domain":    {broadcasts.Input{Name: ptr("n"), TemplateID: ptr("news"), SegmentID: &f.segment, From: ptr("x@elsewhere.example"), SetFrom: true}, "DOMAIN_NOT_FOUND"},
	} {
		if _, err := s.Create(f.ctx, tenant, tc.in); !apperr.IsCode(err, tc.code) {
			t.Errorf("%s: %v, want %s", name, err, tc.code)
		}
	}
	if n := f.scalar(`SELECT count(*) FROM broadcasts`); n != int64(0) {
		t.Fatalf("%v broadcasts written by refused creates", n)
	}
}

// Another tenant can neither see nor touch a broadcast.
func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{"ann@example.com": `{"plan":"pro"}`})
	f.exec(`INSERT INTO tenants (id, name) VALUES ('ten_other', 'O')`)
	b := f.create(broadcasts.Input{})
	s := f.svc.Broadcasts
	_, err := s.Get(f.ctx, "ten_other", b.ID)
	wantCode(t, err, "NOT_FOUND")
	_, err = s.Update(f.ctx, "ten_other", b.ID, broadcasts.Input{Name: ptr("x")})
	wantCode(t, err, "NOT_FOUND")
	_, err = s.Send(f.ctx, "ten_other", b.ID, nil)
	wantCode(t, err, "NOT_FOUND")
	_, err = s.Cancel(f.ctx, "ten_other", b.ID)
	wantCode(t, err, "NOT_FOUND")
	wantCode(t, s.Delete(f.ctx, "ten_other", b.ID), "NOT_FOUND")
	_, _, err = s.Recipients(f.ctx, "ten_other", b.ID, "", page.Params{Limit: 10})
	wantCode(t, err, "NOT_FOUND")
	rows, _, err := s.List(f.ctx, "ten_other", "", page.Params{Limit: 10})
	if err != nil || len(rows) != 0 {
		t.Fatalf("other tenant lists %d, %v", len(rows), err)
	}
	// Another tenant's segment or template is unknown.
	_, err = s.Create(f.ctx, "ten_other", broadcasts.Input{Name: ptr("x"), TemplateID: ptr("news"), SegmentID: &f.segment})
	wantCode(t, err, "TEMPLATE_NOT_FOUND")
}

// A paused tenant holds its broadcast's recipients (ADDENDUM 6): nothing
// is cancelled, and they go out once sending resumes.
func TestPausedTenantHolds(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{"ann@example.com": `{"plan":"pro"}`})
	b := f.create(broadcasts.Input{})
	if _, err := f.svc.Broadcasts.Send(f.ctx, tenant, b.ID, nil); err != nil {
		t.Fatal(err)
	}
	f.exec(`UPDATE tenants SET sending_status = 'paused' WHERE id = $1`, tenant)
	if b = f.drain(b.ID); b.Status != broadcasts.Sending || f.st(b).Sent != 0 || f.sg.Count() != 0 {
		t.Fatalf("paused tenant sent: %+v", b)
	}
	f.exec(`UPDATE tenants SET sending_status = 'enabled' WHERE id = $1`, tenant)
	if b = f.drain(b.ID); b.Status != broadcasts.Sent || f.sg.Count() != 1 {
		t.Fatalf("after resume: %+v", b)
	}
}

// A provider that refuses for good fails the recipient; one that asks to
// come back later queues it again with a later scheduledFor.
func TestProviderRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{"ann@example.com": `{"plan":"pro"}`})
	b := f.create(broadcasts.Input{})
	if _, err := f.svc.Broadcasts.Send(f.ctx, tenant, b.ID, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Broadcasts.Start(f.ctx, tenant, b.ID); err != nil {
		t.Fatal(err)
	}
	f.sg.FailNext(1, http.StatusServiceUnavailable, 0)
	n, err := f.svc.BroadcastDispatcher.Dispatch(f.ctx, 100)
	if err != nil || n.Retry != 1 {
		t.Fatalf("temporary: %+v %v", n, err)
	}
	r := f.recipients(b.ID)["ann@example.com"]
	if r.Status != broadcasts.RecipientQueued || r.LastError == nil || !r.ScheduledFor.After(time.Now()) ||
		f.scalar(`SELECT count(*) FROM sends WHERE tenant_id = $1`, tenant) != int64(0) {
		t.Fatalf("after a temporary refusal: %+v", r)
	}
	f.exec(`UPDATE broadcast_recipients SET scheduled_for = now() WHERE tenant_id = $1`, tenant)
	f.sg.FailNext(1, http.StatusBadRequest, 0)
	if n, err = f.svc.BroadcastDispatcher.Dispatch(f.ctx, 100); err != nil || n.Failed != 1 {
		t.Fatalf("permanent: %+v %v", n, err)
	}
	b, _ = f.svc.Broadcasts.Get(f.ctx, tenant, b.ID)
	if b.Status != broadcasts.Sent || f.st(b).Failed != 1 || f.recipients(b.ID)["ann@example.com"].Status != broadcasts.RecipientFailed {
		t.Fatalf("after a permanent refusal: %+v", b)
	}
}

// A recipient whose message has its record (the worker died after writing
// it, whatever happened at the provider) is never sent again: its next
// claim finds the record and marks it sent.
func TestReclaimFindsTheRecord(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{"ann@example.com": `{"plan":"pro"}`})
	b := f.create(broadcasts.Input{})
	if _, err := f.svc.Broadcasts.Send(f.ctx, tenant, b.ID, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Broadcasts.Start(f.ctx, tenant, b.ID); err != nil {
		t.Fatal(err)
	}
	// The state a killed worker leaves: claimed long ago, the record
	// written and still sending.
	cid := f.scalar(`SELECT id FROM contacts WHERE tenant_id = $1`, tenant)
	f.exec(`UPDATE broadcast_recipients SET claimed_at = now() - interval '1 hour', attempts = 1 WHERE tenant_id = $1`, tenant)
	f.exec(`INSERT INTO sends (tenant_id, id, message_id, contact_id, template_id, template_version, broadcast_id,
		from_address, to_address, subject, sent_at, sending, in_doubt)
		VALUES ($1, 'snd_died', '', $2, 'news', 1, $3, 'b@b.example', 'ann@example.com', 's', now(), true, true)`, tenant, cid, b.ID)
	b = f.drain(b.ID)
	r := f.recipients(b.ID)["ann@example.com"]
	if f.sg.Count() != 0 || r.Status != broadcasts.RecipientSent || *r.SendID != "snd_died" || b.Status != broadcasts.Sent {
		t.Fatalf("provider %d, recipient %+v, broadcast %s", f.sg.Count(), r, b.Status)
	}
	if inDoubt := f.scalar(`SELECT in_doubt AND NOT sending FROM sends WHERE id = 'snd_died'`); inDoubt != true {
		t.Fatalf("the record is not settled in doubt")
	}
	// The unique index is the last word: a second record for the
	// recipient is refused.
	if _, err := f.svc.DB.Pool.Exec(f.ctx, `INSERT INTO sends (tenant_id, id, message_id, contact_id, template_id,
		template_version, broadcast_id, from_address, to_address, subject, sent_at)
		VALUES ($1, 'snd_two', '', $2, 'news', 1, $3, 'b@b.example', 'ann@example.com', 's', now())`, tenant, cid, b.ID); err == nil {
		t.Fatal("a second record for one recipient was accepted")
	}
}

// A broadcast's topic (its own, else its template's) is checked just
// before each message: a contact not subscribed to it (left an opt_out
// topic, or never joined an opt_in one) is skipped topic_opt_out.
func TestTopicSkips(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{
		"stays@example.com": `{"plan":"pro"}`, "left@example.com": `{"plan":"pro"}`, "joined@example.com": `{"plan":"pro"}`,
	})
	f.exec(`INSERT INTO topics (tenant_id, id, name, default_mode) VALUES ($1, 'news', 'News', 'opt_out'),
		($1, 'digest', 'Digest', 'opt_in')`, tenant)
	f.exec(`UPDATE contacts SET topics = '{"news": false}' WHERE tenant_id = $1 AND email = 'left@example.com'`, tenant)
	f.exec(`UPDATE contacts SET topics = '{"digest": true}' WHERE tenant_id = $1 AND email = 'joined@example.com'`, tenant)
	// The template's topic: news (opt_out).
	f.exec(`UPDATE templates SET topic = 'news' WHERE tenant_id = $1 AND id = 'news'`, tenant)
	news := f.create(broadcasts.Input{})
	// The broadcast's own topic wins: digest (opt_in).
	digest := f.create(broadcasts.Input{Topic: ptr("digest"), SetTopic: true})
	for _, tc := range []struct {
		b    queries.Broadcast
		sent []string
	}{
		{news, []string{"joined@example.com", "stays@example.com"}},
		{digest, []string{"joined@example.com"}},
	} {
		if _, err := f.svc.Broadcasts.Send(f.ctx, tenant, tc.b.ID, nil); err != nil {
			t.Fatal(err)
		}
		f.drain(tc.b.ID)
		var sent []string
		for email, r := range f.recipients(tc.b.ID) {
			switch {
			case r.Status == broadcasts.RecipientSent:
				sent = append(sent, email)
			case r.Status != broadcasts.RecipientSkipped || *r.SkipReason != broadcasts.SkipTopicOptOut:
				t.Errorf("%s: %s %v", email, r.Status, r.SkipReason)
			}
		}
		slices.Sort(sent)
		if !slices.Equal(sent, tc.sent) {
			t.Errorf("topic of %s: sent to %v, want %v", tc.b.ID, sent, tc.sent)
		}
	}
}
