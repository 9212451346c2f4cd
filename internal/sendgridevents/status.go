package sendgridevents

// Delivery statuses and bounce types of a send record (API.md section 2).
const (
	StatusSent       = "sent"
	StatusDelivered  = "delivered"
	StatusBounced    = "bounced"
	StatusComplained = "complained"
	StatusRejected   = "rejected"

	BounceHard = "hard"
	BounceSoft = "soft"
)

// Delivery is the part of a send record an outcome may change.
type Delivery struct {
	Status     string
	BounceType string // "hard" or "soft" when Status is bounced, else ""
}

// rank orders statuses by how much they say. Events arrive out of order
// and more than once, so a status only moves up:
//
//	sent < delivered < bounced = rejected < complained
//
// Delivered is the weakest news after sent: a bounce, a drop or a
// complaint that has already arrived is never overwritten by it
// (ADDENDUM 8). Bounced and rejected are both final failures of one
// message and should not both happen; whichever came first stays.
// Complained ranks highest: it is the recipient's own act, proves the
// message was delivered (so any bounce of it was transient or wrong), and
// is what suppression and the complaint rate must not lose.
var rank = map[string]int{
	StatusSent:       0,
	StatusDelivered:  1,
	StatusBounced:    2,
	StatusRejected:   2,
	StatusComplained: 3,
}

// Apply returns the delivery state after outcome o, and whether it
// changed. It is pure and idempotent: applying an outcome twice, or a
// weaker one after a stronger one, changes nothing, so the ingestion can
// apply events in whatever order SendGrid posts them.
//
//   - Delivered: sent becomes delivered.
//   - BouncedHard, BouncedSoft: sent or delivered becomes bounced with
//     that type; a soft bounce followed by a hard one becomes hard (a hard
//     bounce is never downgraded).
//   - Rejected: sent or delivered becomes rejected.
//   - Complained: anything but complained becomes complained, and the
//     bounce type is cleared (it belongs to bounced only).
//   - Opened, Clicked, Unsubscribed, Ignored: no status change (they set
//     engagement times and counts, or act on the contact).
//
// An unknown current status is left alone. Side effects such as
// suppressing the contact follow the outcome, not the status change: a
// hard bounce after a complaint still suppresses.
func Apply(cur Delivery, o Outcome) (Delivery, bool) {
	r, known := rank[cur.Status]
	if !known {
		return cur, false
	}
	var next Delivery
	switch o {
	case Delivered:
		next = Delivery{Status: StatusDelivered}
	case BouncedHard:
		next = Delivery{Status: StatusBounced, BounceType: BounceHard}
	case BouncedSoft:
		next = Delivery{Status: StatusBounced, BounceType: BounceSoft}
	case Rejected:
		next = Delivery{Status: StatusRejected}
	case Complained:
		next = Delivery{Status: StatusComplained}
	default:
		return cur, false
	}
	switch nr := rank[next.Status]; {
	case nr > r:
		return next, true
	case cur.Status == StatusBounced && next.Status == StatusBounced &&
		cur.BounceType != BounceHard && next.BounceType == BounceHard:
		return next, true
	}
	return cur, false
}
