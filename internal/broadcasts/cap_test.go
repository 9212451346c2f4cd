package broadcasts_test

import (
	"fmt"
	"sync"
	"testing"

	"tidings/internal/broadcasts"
	"tidings/internal/delivery"
)

// Workers sending to one contact at once never pass the frequency cap:
// 16 messages of 16 broadcasts, sent concurrently with a cap of 3 a day,
// leave exactly 3 records and 3 messages; the others are over the cap and
// nothing of them was written or sent.
func TestFrequencyCapUnderConcurrency(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{"ann@example.com": `{"plan":"pro"}`})
	f.exec(`UPDATE tenants SET frequency_cap_max = 3, frequency_cap_period = 'day' WHERE id = $1`, tenant)
	contact := f.scalar(`SELECT id FROM contacts WHERE tenant_id = $1`, tenant).(string)
	var wg sync.WaitGroup
	var mu sync.Mutex
	capped, sent := 0, 0
	for i := range 16 {
		wg.Go(func() {
			res := f.svc.Sender.SendSteps(f.ctx, []delivery.Step{{TenantID: tenant, ContactID: contact, TemplateID: "news",
				BroadcastID: fmt.Sprintf("brd_cap_%d", i)}}, 1, nil)
			mu.Lock()
			defer mu.Unlock()
			if _, ok := delivery.IsCapped(res[0].Err); ok {
				capped++
			} else if res[0].Err == nil {
				sent++
			} else {
				t.Error(res[0].Err)
			}
		})
	}
	wg.Wait()
	if sent != 3 || capped != 13 || f.sg.Count() != 3 {
		t.Fatalf("%d sent, %d capped, provider took %d; want 3, 13, 3", sent, capped, f.sg.Count())
	}
	if n := f.scalar(`SELECT count(*) FROM sends WHERE tenant_id = $1`, tenant); n != int64(3) {
		t.Fatalf("%v records", n)
	}
}

// A broadcast recipient over the cap is skipped frequency_capped; a
// transactional send neither counts nor is capped.
func TestFrequencyCapSkipsBroadcastRecipients(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{"ann@example.com": `{"plan":"pro"}`})
	f.exec(`UPDATE tenants SET frequency_cap_max = 1, frequency_cap_period = 'week' WHERE id = $1`, tenant)
	first, second := f.create(broadcasts.Input{}), f.create(broadcasts.Input{})
	for _, b := range []string{first.ID, second.ID} {
		if _, err := f.svc.Broadcasts.Send(f.ctx, tenant, b, nil); err != nil {
			t.Fatal(err)
		}
		f.drain(b)
	}
	if r := f.recipients(first.ID)["ann@example.com"]; r.Status != broadcasts.RecipientSent {
		t.Fatalf("first: %+v", r)
	}
	if r := f.recipients(second.ID)["ann@example.com"]; r.Status != broadcasts.RecipientSkipped ||
		*r.SkipReason != broadcasts.SkipFrequencyCapped {
		t.Fatalf("second: %+v", r)
	}
	if _, err := f.svc.Sender.Send(f.ctx, tenant, delivery.Request{To: "ann@example.com", TemplateID: "news"}); err != nil {
		t.Fatalf("a transactional send over the cap: %v", err)
	}
	if f.sg.Count() != 2 {
		t.Fatalf("provider took %d", f.sg.Count())
	}
}
