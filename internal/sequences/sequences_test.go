package sequences_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"tidings/internal/apperr"
	"tidings/internal/page"
	"tidings/internal/sequences"
	"tidings/internal/store"
	"tidings/internal/testenv"
	"tidings/queries"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// onboarding is a valid definition sending templates welcome and tips.
const onboarding = `name: Onboarding
trigger:
  event: user.signed_up
steps:
  - send: welcome
  - delay: 1d
  - id: tips
    action: email
    template: tips
`

// bundle is one test's sequences store on its own database.
type bundle struct {
	db    *store.DB
	store *sequences.Store
}

// setup provisions free-plan tenants ten_a and ten_b, each with templates
// welcome and tips and segment vip.
func setup(t *testing.T) *bundle {
	t.Helper()
	db := testenv.DB(t)
	b := &bundle{db: db, store: &sequences.Store{DB: db, FreeLimit: 20}}
	for _, tenant := range []string{"ten_a", "ten_b"} {
		if _, err := db.TenantInsert(t.Context(), queries.TenantInsertParams{ID: tenant, Name: tenant}); err != nil {
			t.Fatal(err)
		}
		for _, tpl := range []string{"welcome", "tips"} {
			if _, err := db.TemplateInsert(t.Context(), queries.TemplateInsertParams{TenantID: tenant, ID: tpl, Name: tpl,
				Subject: "s", Content: "<mjml></mjml>", CompiledHtml: "<p></p>", RequiredVariables: []string{}}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.SegmentInsert(t.Context(), queries.SegmentInsertParams{TenantID: tenant, ID: "vip", Name: "VIP",
			Rules: json.RawMessage(`{"operator":"and","conditions":[]}`), Enabled: true, DependsOn: []string{}}); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

func (b *bundle) put(t *testing.T, tenant, id, yaml string) sequences.Saved {
	t.Helper()
	out, err := b.store.Put(t.Context(), tenant, id, sequences.Put{Content: []byte(yaml)})
	if err != nil {
		t.Fatalf("put %s/%s: %v", tenant, id, err)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// wantCode fails unless err is an apperr with the code (and, when given,
// details.fields naming field).
func wantCode(t *testing.T, err error, code, field string) {
	t.Helper()
	e, ok := apperr.As(err)
	if !ok || e.Code != code {
		t.Fatalf("err = %v, want %s", err, code)
	}
	if field != "" {
		fields, _ := e.Details["fields"].(map[string]any)
		if _, ok := fields[field]; !ok {
			t.Fatalf("details.fields = %v, want %s", fields, field)
		}
	}
}

func TestPutVersionRules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Each step is a PUT on the state the previous one left.
	steps := []struct {
		desc        string
		put         sequences.Put
		wantCreated bool
		wantVersion int32
		wantName    string
		wantTrigger string
		wantTouched bool // updatedAt moved
	}{
		{desc: "create", put: sequences.Put{Content: []byte(onboarding)}, wantCreated: true, wantVersion: 1,
			wantName: "Onboarding", wantTrigger: "user.signed_up", wantTouched: true},
		{desc: "same body is a no-op", put: sequences.Put{Content: []byte(onboarding)}, wantVersion: 1,
			wantName: "Onboarding", wantTrigger: "user.signed_up"},
		{desc: "wrapper name renames without a version", put: sequences.Put{Content: []byte(onboarding), Name: ptr("Hello")},
			wantVersion: 1, wantName: "Hello", wantTrigger: "user.signed_up", wantTouched: true},
		{desc: "same wrapper body is a no-op", put: sequences.Put{Content: []byte(onboarding), Name: ptr("Hello")},
			wantVersion: 1, wantName: "Hello", wantTrigger: "user.signed_up"},
		{desc: "YAML without name keeps the name, content change is a version",
			put:         sequences.Put{Content: []byte("trigger: {event: user.signed_up}\nsteps: [{send: welcome}]\n")},
			wantVersion: 2, wantName: "Hello", wantTrigger: "user.signed_up", wantTouched: true},
		{desc: "a comment is a content change", put: sequences.Put{Content: []byte("# c\ntrigger: {event: user.signed_up}\nsteps: [{send: welcome}]\n")},
			wantVersion: 3, wantName: "Hello", wantTrigger: "user.signed_up", wantTouched: true},
		{desc: "trigger change is a version", put: sequences.Put{Content: []byte("# c\ntrigger: {event: trial.started}\nsteps: [{send: welcome}]\n")},
			wantVersion: 4, wantName: "Hello", wantTrigger: "trial.started", wantTouched: true},
		{desc: "YAML name renames", put: sequences.Put{Content: []byte("# c\nname: Again\ntrigger: {event: trial.started}\nsteps: [{send: welcome}]\n")},
			wantVersion: 5, wantName: "Again", wantTrigger: "trial.started", wantTouched: true},
	}
	var prev queries.Sequence
	for _, st := range steps {
		out, err := b.store.Put(t.Context(), "ten_a", "onb", st.put)
		if err != nil {
			t.Fatalf("%s: %v", st.desc, err)
		}
		s := out.Sequence
		if out.Created != st.wantCreated || s.Version != st.wantVersion || s.Name != st.wantName || s.TriggerEvent != st.wantTrigger {
			t.Errorf("%s: created %v version %d name %q trigger %q", st.desc, out.Created, s.Version, s.Name, s.TriggerEvent)
		}
		if touched := !s.UpdatedAt.Equal(prev.UpdatedAt); touched != st.wantTouched {
			t.Errorf("%s: updatedAt moved = %v", st.desc, touched)
		}
		if s.Content != string(st.put.Content) {
			t.Errorf("%s: content not stored as sent", st.desc)
		}
		var def struct {
			Name    string
			Trigger struct{ Event string }
		}
		if err := json.Unmarshal(s.Definition, &def); err != nil || def.Name != s.Name || def.Trigger.Event != s.TriggerEvent {
			t.Errorf("%s: definition %s out of step with the row (%v)", st.desc, s.Definition, err)
		}
		prev = s
	}
}

func TestPutDefinitionAndWarnings(t *testing.T) {
	t.Parallel()
	b := setup(t)
	out := b.put(t, "ten_a", "onb", onboarding+"  - delay: 3d\n")
	if len(out.Warnings) == 0 {
		t.Error("trailing delay: no warning")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, sequences.Steps(out.Sequence)); err != nil {
		t.Fatal(err)
	}
	got := buf.String()
	want := `[{"id":"step-1","action":"email","template":"welcome"},{"id":"step-2","action":"delay","duration":"1d"},` +
		`{"id":"tips","action":"email","template":"tips"},{"id":"step-4","action":"delay","duration":"3d"}]`
	if got != want {
		t.Errorf("steps = %s\nwant   %s", got, want)
	}
	if again := b.put(t, "ten_a", "onb", onboarding+"  - delay: 3d\n"); len(again.Warnings) == 0 {
		t.Error("no-op PUT lost the warnings")
	}
}

func TestPutEnabled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	out, err := b.store.Put(t.Context(), "ten_a", "off", sequences.Put{Content: []byte(onboarding), Enabled: ptr(false)})
	if err != nil || out.Sequence.Enabled {
		t.Fatalf("create disabled: %+v %v", out.Sequence, err)
	}
	if b.put(t, "ten_a", "on", onboarding).Sequence.Enabled != true {
		t.Error("default enabled is not true")
	}
	// Disabled stays disabled on PUT, whatever the wrapper says.
	out, err = b.store.Put(t.Context(), "ten_a", "off", sequences.Put{Content: []byte(onboarding + "# new\n"), Enabled: ptr(true)})
	if err != nil || out.Sequence.Enabled || out.Sequence.Version != 2 {
		t.Fatalf("PUT new content: enabled %v version %d %v", out.Sequence.Enabled, out.Sequence.Version, err)
	}
	// Enabled stays enabled too.
	out, err = b.store.Put(t.Context(), "ten_a", "on", sequences.Put{Content: []byte(onboarding), Enabled: ptr(false)})
	if err != nil || !out.Sequence.Enabled {
		t.Fatalf("PUT enabled:false on update flipped it: %v", err)
	}
}

func TestPutValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.put(t, "ten_a", "exists", onboarding)
	tests := []struct {
		desc, id, yaml string
		name           *string
		wantCode       string
		wantField      string
	}{
		{desc: "invalid YAML", id: "new", yaml: "name: [", wantCode: "VALIDATION_ERROR", wantField: "content"},
		{desc: "missing name on create", id: "new", yaml: "trigger: {event: a}\nsteps: [{send: welcome}]\n",
			wantCode: "VALIDATION_ERROR", wantField: "name"},
		{desc: "missing trigger", id: "new", yaml: "name: x\nsteps: [{send: welcome}]\n",
			wantCode: "VALIDATION_ERROR", wantField: "trigger.event"},
		{desc: "blank wrapper name", id: "new", yaml: onboarding, name: ptr(" "), wantCode: "VALIDATION_ERROR", wantField: "name"},
		{desc: "unknown segment", id: "exists", yaml: "trigger: {event: a}\ngates:\n  operator: and\n  conditions:\n" +
			"    - {type: segment, segmentId: vip, operator: memberOf}\n    - {type: segment, segmentId: nope, operator: memberOf}\nsteps: [{send: welcome}]\n",
			wantCode: "VALIDATION_ERROR", wantField: "gates.conditions[1].segmentId"},
		{desc: "unknown template", id: "exists", yaml: "trigger: {event: a}\nsteps: [{send: welcome}, {send: nope}, {send: gone}]\n",
			wantCode: "TEMPLATE_NOT_FOUND"},
		{desc: "another tenant's template does not count", id: "new", yaml: "name: x\ntrigger: {event: a}\nsteps: [{send: only_b}]\n",
			wantCode: "TEMPLATE_NOT_FOUND"},
	}
	if _, err := b.db.TemplateInsert(t.Context(), queries.TemplateInsertParams{TenantID: "ten_b", ID: "only_b", Name: "b",
		Subject: "s", Content: "c", CompiledHtml: "h", RequiredVariables: []string{}}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		_, err := b.store.Put(t.Context(), "ten_a", tt.id, sequences.Put{Content: []byte(tt.yaml), Name: tt.name})
		wantCode(t, err, tt.wantCode, tt.wantField)
	}
	e, _ := apperr.As(func() error {
		_, err := b.store.Put(t.Context(), "ten_a", "exists", sequences.Put{Content: []byte("trigger: {event: a}\nsteps: [{send: nope}, {send: welcome}, {send: gone}]\n")})
		return err
	}())
	if got := e.Details["templateIds"]; !slices.Equal(got.([]string), []string{"nope", "gone"}) {
		t.Errorf("templateIds = %v", got)
	}
	// Nothing was written: the existing one is as created, the new one absent.
	if s, err := b.store.Get(t.Context(), "ten_a", "exists"); err != nil || s.Version != 1 || s.Content != onboarding {
		t.Errorf("exists changed: %+v %v", s, err)
	}
	_, err := b.store.Get(t.Context(), "ten_a", "new")
	wantCode(t, err, "SEQUENCE_NOT_FOUND", "")
	// The wrapper's name satisfies the name a create needs.
	out, err := b.store.Put(t.Context(), "ten_a", "named", sequences.Put{Content: []byte("trigger: {event: a}\nsteps: [{send: welcome}]\n"), Name: ptr("Named")})
	if err != nil || out.Sequence.Name != "Named" {
		t.Errorf("wrapper name on create: %+v %v", out.Sequence, err)
	}
}

func TestPutPlanLimitUnderConcurrency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.store.FreeLimit = 3
	b.put(t, "ten_a", "first", onboarding)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = b.store.Put(context.Background(), "ten_a", fmt.Sprintf("s%d", i), sequences.Put{Content: []byte(onboarding)})
		}()
	}
	wg.Wait()
	var ok, limited int
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case apperr.IsCode(err, "PLAN_LIMIT_EXCEEDED"):
			limited++
		default:
			t.Errorf("unexpected %v", err)
		}
	}
	if ok != 2 || limited != n-2 {
		t.Errorf("created %d, limited %d; want 2 and %d", ok, limited, n-2)
	}
	// At the limit an update still works, and another tenant is not counted.
	if _, err := b.store.Put(t.Context(), "ten_a", "first", sequences.Put{Content: []byte(onboarding + "# edit\n")}); err != nil {
		t.Errorf("update at the limit: %v", err)
	}
	b.put(t, "ten_b", "first", onboarding)
	// A paid plan has no limit.
	if _, err := b.db.Pool.Exec(t.Context(), `UPDATE tenants SET plan = 'pro' WHERE id = 'ten_a'`); err != nil {
		t.Fatal(err)
	}
	b.put(t, "ten_a", "paid", onboarding)
}

func TestPutConcurrentCreateOfOneID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var wg sync.WaitGroup
	outs := make([]sequences.Saved, 4)
	errs := make([]error, 4)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = b.store.Put(context.Background(), "ten_a", "one", sequences.Put{Content: []byte(onboarding)})
		}()
	}
	wg.Wait()
	created := 0
	for i := range outs {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if outs[i].Created {
			created++
		}
		if outs[i].Sequence.Version != 1 {
			t.Errorf("version %d", outs[i].Sequence.Version)
		}
	}
	if created != 1 {
		t.Errorf("%d creates, want 1", created)
	}
}

func TestPatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tests := []struct {
		desc        string
		patch       sequences.Patch
		wantCode    string
		wantField   string
		wantVersion int32
		wantName    string
		wantTrigger string
		wantEnabled bool
		wantTouched bool
	}{
		{desc: "nothing", patch: sequences.Patch{}, wantCode: "VALIDATION_ERROR", wantField: "body"},
		{desc: "blank name", patch: sequences.Patch{Name: ptr("")}, wantCode: "VALIDATION_ERROR", wantField: "name"},
		{desc: "system trigger", patch: sequences.Patch{TriggerEvent: ptr("email.sent")}, wantCode: "VALIDATION_ERROR", wantField: "triggerEvent"},
		{desc: "blank trigger", patch: sequences.Patch{TriggerEvent: ptr(" ")}, wantCode: "VALIDATION_ERROR", wantField: "triggerEvent"},
		{desc: "name", patch: sequences.Patch{Name: ptr("Renamed")}, wantVersion: 1, wantName: "Renamed",
			wantTrigger: "user.signed_up", wantEnabled: true, wantTouched: true},
		{desc: "enabled", patch: sequences.Patch{Enabled: ptr(false)}, wantVersion: 1, wantName: "Onboarding",
			wantTrigger: "user.signed_up", wantEnabled: false, wantTouched: true},
		{desc: "trigger", patch: sequences.Patch{TriggerEvent: ptr("trial.started")}, wantVersion: 2, wantName: "Onboarding",
			wantTrigger: "trial.started", wantEnabled: true, wantTouched: true},
		{desc: "same values change nothing", patch: sequences.Patch{Name: ptr("Onboarding"), Enabled: ptr(true),
			TriggerEvent: ptr("user.signed_up")}, wantVersion: 1, wantName: "Onboarding", wantTrigger: "user.signed_up", wantEnabled: true},
		{desc: "all three", patch: sequences.Patch{Name: ptr("N"), Enabled: ptr(false), TriggerEvent: ptr("x")},
			wantVersion: 2, wantName: "N", wantTrigger: "x", wantEnabled: false, wantTouched: true},
	}
	for i, tt := range tests {
		id := fmt.Sprintf("p%d", i)
		before := b.put(t, "ten_a", id, onboarding).Sequence
		got, err := b.store.Patch(t.Context(), "ten_a", id, tt.patch)
		if tt.wantCode != "" {
			wantCode(t, err, tt.wantCode, tt.wantField)
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tt.desc, err)
		}
		if got.Version != tt.wantVersion || got.Name != tt.wantName || got.TriggerEvent != tt.wantTrigger || got.Enabled != tt.wantEnabled {
			t.Errorf("%s: version %d name %q trigger %q enabled %v", tt.desc, got.Version, got.Name, got.TriggerEvent, got.Enabled)
		}
		if touched := !got.UpdatedAt.Equal(before.UpdatedAt); touched != tt.wantTouched {
			t.Errorf("%s: updatedAt moved = %v", tt.desc, touched)
		}
		if got.Content != onboarding {
			t.Errorf("%s: content changed", tt.desc)
		}
		var def struct {
			Name    string
			Trigger struct{ Event string }
		}
		if err := json.Unmarshal(got.Definition, &def); err != nil || def.Name != got.Name || def.Trigger.Event != got.TriggerEvent {
			t.Errorf("%s: definition %s out of step", tt.desc, got.Definition)
		}
	}
	_, err := b.store.Patch(t.Context(), "ten_a", "nope", sequences.Patch{Enabled: ptr(true)})
	wantCode(t, err, "SEQUENCE_NOT_FOUND", "")
	_, err = b.store.Patch(t.Context(), "ten_b", "p4", sequences.Patch{Name: ptr("theirs")})
	wantCode(t, err, "SEQUENCE_NOT_FOUND", "")
	// PUT of the original YAML after a trigger PATCH restores the YAML's
	// trigger, a new version.
	out := b.put(t, "ten_a", "p6", onboarding)
	if out.Sequence.TriggerEvent != "user.signed_up" || out.Sequence.Version != 3 {
		t.Errorf("PUT after PATCH: trigger %q version %d", out.Sequence.TriggerEvent, out.Sequence.Version)
	}
}

func TestHooksRunInTheTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.put(t, "ten_a", "seq", onboarding)
	boom := errors.New("boom")
	type call struct {
		tenant, id string
		enabled    bool
		seen       bool // the row as the hook's q sees it
	}
	var calls []call
	fail := false
	b.store.OnEnabled = func(ctx context.Context, q *store.Tx, tenantID, sequenceID string, enabled bool) error {
		s, err := q.SequenceGet(ctx, queries.SequenceGetParams{TenantID: tenantID, ID: sequenceID})
		if err != nil {
			return err
		}
		calls = append(calls, call{tenantID, sequenceID, enabled, s.Enabled})
		if fail {
			return boom
		}
		return nil
	}
	if _, err := b.store.Patch(t.Context(), "ten_a", "seq", sequences.Patch{Enabled: ptr(false)}); err != nil {
		t.Fatal(err)
	}
	// No change of enabled: no call.
	if _, err := b.store.Patch(t.Context(), "ten_a", "seq", sequences.Patch{Enabled: ptr(false), Name: ptr("x")}); err != nil {
		t.Fatal(err)
	}
	fail = true
	if _, err := b.store.Patch(t.Context(), "ten_a", "seq", sequences.Patch{Enabled: ptr(true), Name: ptr("y")}); !errors.Is(err, boom) {
		t.Fatalf("hook error: %v", err)
	}
	want := []call{{"ten_a", "seq", false, false}, {"ten_a", "seq", true, true}}
	if !slices.Equal(calls, want) {
		t.Errorf("OnEnabled calls %+v, want %+v", calls, want)
	}
	if s, _ := b.store.Get(t.Context(), "ten_a", "seq"); s.Enabled || s.Name != "x" {
		t.Errorf("failed hook did not roll back: enabled %v name %q", s.Enabled, s.Name)
	}

	var deleted []string
	b.store.OnDelete = func(ctx context.Context, q *store.Tx, tenantID, sequenceID string) error {
		ok, err := q.SequenceExists(ctx, queries.SequenceExistsParams{TenantID: tenantID, ID: sequenceID})
		if err != nil {
			return err
		}
		deleted = append(deleted, fmt.Sprintf("%s/%s exists=%v", tenantID, sequenceID, ok))
		if fail {
			return boom
		}
		return nil
	}
	if err := b.store.Delete(t.Context(), "ten_a", "seq"); !errors.Is(err, boom) {
		t.Fatalf("hook error: %v", err)
	}
	if _, err := b.store.Get(t.Context(), "ten_a", "seq"); err != nil {
		t.Fatalf("failed hook did not roll back the delete: %v", err)
	}
	fail = false
	if err := b.store.Delete(t.Context(), "ten_a", "seq"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, b.store.Delete(t.Context(), "ten_a", "seq"), "SEQUENCE_NOT_FOUND", "")
	if want := []string{"ten_a/seq exists=false", "ten_a/seq exists=false"}; !slices.Equal(deleted, want) {
		t.Errorf("OnDelete calls %v, want %v (not called for an unknown id)", deleted, want)
	}
}

func TestTenantIsolationAndList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range 5 {
		b.put(t, "ten_a", fmt.Sprintf("a%d", i), onboarding)
	}
	b.put(t, "ten_b", "a0", "name: Theirs\ntrigger: {event: b}\nsteps: [{send: welcome}]\n")
	wantCode(t, b.store.Delete(t.Context(), "ten_b", "a1"), "SEQUENCE_NOT_FOUND", "")
	wantCode(t, b.store.Exists(t.Context(), "ten_b", "a1"), "SEQUENCE_NOT_FOUND", "")
	if err := b.store.Exists(t.Context(), "ten_a", "a1"); err != nil {
		t.Error(err)
	}
	if s, _ := b.store.Get(t.Context(), "ten_a", "a0"); s.Name != "Onboarding" {
		t.Errorf("ten_b's PUT touched ten_a's a0: %q", s.Name)
	}
	var got []string
	p := page.Params{Limit: 2}
	for {
		rows, next, err := b.store.List(t.Context(), "ten_a", p)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			got = append(got, r.ID)
		}
		if next == nil {
			break
		}
		p.After = next
	}
	if want := []string{"a4", "a3", "a2", "a1", "a0"}; !slices.Equal(got, want) {
		t.Errorf("list %v, want %v", got, want)
	}
}
