package delivery

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"tidings/queries"
)

// committedAnyway tells whether a record write that failed committed all
// the same, and which of its records exist (by id).
//
// A write answers an error when its connection is lost while the COMMIT
// is on its way (PostgreSQL restarted or the backend terminated, a
// deadline cutting the wait): the server may have committed before the
// answer was lost. Taking that for "not written" left records that exist
// and were never sent: the ledger sweep then put them in doubt with no
// request (a broadcast recipient in a fault run, seed 17), and an api
// answered 502 for a send whose Idempotency-Key was linked, so the
// client's retry met 409 IDEMPOTENCY_KEY_IN_USE (seed 16). The records
// are fresh ids of this attempt, so one that exists, still `sending`, was
// written by this write and nothing of it has gone to the provider: it
// is sent like any recorded message. An error the server answered about
// the transaction (it rolled back) needs no look; any other does, whatever
// pgx says of it (a COMMIT whose answer was lost comes back as "conn
// closed", which pgx calls safe to retry). The look is retried for a while on a fresh connection; if the
// database stays away, the records are taken as unwritten, as before
// (the ledger sweep settles any that exist in doubt).
func (s *Sender) committedAnyway(ctx context.Context, err error, tenantIDs, ids []string) map[string]bool {
	if len(ids) == 0 || rolledBack(err) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		got, qerr := s.DB.SendsStillSending(ctx, queries.SendsStillSendingParams{TenantIds: tenantIDs, Ids: ids})
		if qerr == nil {
			out := make(map[string]bool, len(got))
			for _, id := range got {
				out[id] = true
			}
			if len(out) > 0 {
				s.Log.Warn("a record write answered an error but committed: its messages go out", "err", err, "records", len(out))
			}
			return out
		}
		select {
		case <-ctx.Done():
			s.Log.Error("a record write's outcome is unknown; its records are left to the ledger sweep", "err", err, "check", qerr)
			return nil
		case <-time.After(wait):
		}
	}
}

// rolledBack tells an error the server answered about the transaction,
// which then did not commit, from one about the connection. A backend
// terminated or shut down (class 57P) or a connection failure (class 08)
// is the second kind: PostgreSQL finishes a COMMIT it has begun before it
// acts on a termination, and the FATAL may be all the client hears.
func rolledBack(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	return pgErr.Severity != "FATAL" && pgErr.Severity != "PANIC" &&
		!strings.HasPrefix(pgErr.Code, "57P") && !strings.HasPrefix(pgErr.Code, "08")
}
