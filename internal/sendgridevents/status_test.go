package sendgridevents

import "testing"

func TestApply(t *testing.T) {
	t.Parallel()
	sent := Delivery{Status: StatusSent}
	delivered := Delivery{Status: StatusDelivered}
	hard := Delivery{Status: StatusBounced, BounceType: BounceHard}
	soft := Delivery{Status: StatusBounced, BounceType: BounceSoft}
	rejected := Delivery{Status: StatusRejected}
	complained := Delivery{Status: StatusComplained}
	tests := []struct {
		desc        string
		cur         Delivery
		o           Outcome
		want        Delivery
		wantChanged bool
	}{
		{desc: "sent, delivered", cur: sent, o: Delivered, want: delivered, wantChanged: true},
		{desc: "sent, hard bounce", cur: sent, o: BouncedHard, want: hard, wantChanged: true},
		{desc: "sent, soft bounce", cur: sent, o: BouncedSoft, want: soft, wantChanged: true},
		{desc: "sent, dropped", cur: sent, o: Rejected, want: rejected, wantChanged: true},
		{desc: "sent, spam report", cur: sent, o: Complained, want: complained, wantChanged: true},
		{desc: "delivered, hard bounce", cur: delivered, o: BouncedHard, want: hard, wantChanged: true},
		{desc: "delivered, spam report", cur: delivered, o: Complained, want: complained, wantChanged: true},
		{desc: "delivered, dropped (out of order)", cur: delivered, o: Rejected, want: rejected, wantChanged: true},
		{desc: "delivered twice", cur: delivered, o: Delivered, want: delivered},
		{desc: "hard bounce, then late delivered", cur: hard, o: Delivered, want: hard},
		{desc: "soft bounce, then late delivered", cur: soft, o: Delivered, want: soft},
		{desc: "rejected, then late delivered", cur: rejected, o: Delivered, want: rejected},
		{desc: "complained, then late delivered", cur: complained, o: Delivered, want: complained},
		{desc: "soft, then hard: upgraded", cur: soft, o: BouncedHard, want: hard, wantChanged: true},
		{desc: "hard, then soft: kept hard", cur: hard, o: BouncedSoft, want: hard},
		{desc: "hard twice", cur: hard, o: BouncedHard, want: hard},
		{desc: "bounced, then complained", cur: hard, o: Complained, want: complained, wantChanged: true},
		{desc: "complained, then bounce", cur: complained, o: BouncedHard, want: complained},
		{desc: "rejected, then complained", cur: rejected, o: Complained, want: complained, wantChanged: true},
		{desc: "rejected, then bounce: first final failure stays", cur: rejected, o: BouncedHard, want: rejected},
		{desc: "bounced, then rejected: first final failure stays", cur: soft, o: Rejected, want: soft},
		{desc: "open does not change status", cur: sent, o: Opened, want: sent},
		{desc: "click does not change status", cur: delivered, o: Clicked, want: delivered},
		{desc: "unsubscribe does not change status", cur: delivered, o: Unsubscribed, want: delivered},
		{desc: "ignored", cur: sent, o: Ignored, want: sent},
		{desc: "unknown status left alone", cur: Delivery{Status: "weird"}, o: Complained, want: Delivery{Status: "weird"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			got, changed := Apply(tt.cur, tt.o)
			if got != tt.want || changed != tt.wantChanged {
				t.Fatalf("Apply(%+v, %v) = %+v, %v; want %+v, %v", tt.cur, tt.o, got, changed, tt.want, tt.wantChanged)
			}
		})
	}
}

// Whatever order the events of one message arrive in, the final state is
// the same: the state only moves up a total order.
func TestApplyOrderIndependent(t *testing.T) {
	t.Parallel()
	sets := [][]Outcome{
		{Delivered, BouncedSoft, BouncedHard},
		{Delivered, Complained, Opened, Clicked},
		{Delivered, BouncedHard, Complained},
		{BouncedSoft, Delivered},
		{Delivered, Rejected},
	}
	for _, set := range sets {
		var want *Delivery
		permute(set, func(order []Outcome) {
			d := Delivery{Status: StatusSent}
			for _, o := range order {
				d, _ = Apply(d, o)
				d, _ = Apply(d, o) // at-least-once delivery
			}
			if want == nil {
				want = &d
			} else if d != *want {
				t.Errorf("order %v ends in %+v, another order in %+v", order, d, *want)
			}
		})
	}
}

func permute(s []Outcome, f func([]Outcome)) {
	var rec func(int)
	rec = func(k int) {
		if k == len(s) {
			f(s)
			return
		}
		for i := k; i < len(s); i++ {
			s[k], s[i] = s[i], s[k]
			rec(k + 1)
			s[k], s[i] = s[i], s[k]
		}
	}
	rec(0)
}
