package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

// selfTest shows the oracle can fail (make chaos-selftest): a short run
// with the provider's faults but no process faults, whose facts must
// pass, then the same facts with anomalies planted, each of which the
// oracle, run as its own process (-check), must fail naming the check:
//
//   - a duplicate: the harness sends an accepted transactional unit again
//     through the API under a fresh Idempotency-Key (a second record, a
//     second message: only the unit says it is the same);
//   - a loss: the requests of a record settled as accepted, and of one in
//     doubt, dropped from the fake's log (their messages never reached it);
//   - a lying status: a broadcast recipient and a scheduled send whose
//     messages the provider took rewritten in the database to cancelled.
//
// It returns nil only if the clean run passed and every plant was caught.
func (r *run) selfTest(ctx context.Context) error {
	if err := r.boot(ctx); err != nil {
		return err
	}
	w := r.runWorkload(ctx, false)
	clean, err := r.settleAndGather(ctx, w)
	if err != nil {
		return err
	}
	type plant struct {
		file, check string
		facts       *Facts
	}
	plants := []plant{{"facts-clean.json", "", clean}}

	// Loss: a record settled as accepted whose request the fake "lost",
	// and one in doubt.
	if f, what := dropRequests(clean, false); f != nil {
		fmt.Println("chaos selftest: planted loss:", what)
		plants = append(plants, plant{"facts-loss-accepted.json", "accepted-without-request", f})
	}
	if f, what := dropRequests(clean, true); f != nil {
		fmt.Println("chaos selftest: planted loss:", what)
		plants = append(plants, plant{"facts-loss-in-doubt.json", "in-doubt-without-request", f})
	}

	// Lying statuses, written in the database, gathered, then undone.
	db, err := r.connect(ctx)
	if err != nil {
		return err
	}
	defer db.Close(ctx)
	v := newView(clean)
	var undo []func()
	for _, rc := range clean.Recipients {
		if rc.Status == "sent" && len(v.takenBy[bcUnit(v.bcTemplate[rc.BroadcastID].Template, rc.ContactID)]) > 0 {
			if _, err := db.Exec(ctx, `UPDATE broadcast_recipients SET status = 'cancelled' WHERE tenant_id = $1 AND broadcast_id = $2 AND contact_id = $3`,
				org, rc.BroadcastID, rc.ContactID); err != nil {
				return err
			}
			fmt.Printf("chaos selftest: planted lie: recipient %s of %s rewritten sent -> cancelled\n", rc.ContactID, rc.BroadcastID)
			undo = append(undo, func() {
				_, _ = db.Exec(ctx, `UPDATE broadcast_recipients SET status = 'sent' WHERE tenant_id = $1 AND broadcast_id = $2 AND contact_id = $3`,
					org, rc.BroadcastID, rc.ContactID)
			})
			break
		}
	}
	for _, s := range clean.Scheduled {
		if s.Status == "sent" && len(v.takenBy[seqUnit(s.SequenceID, s.StepID, s.ContactID)]) > 0 {
			if _, err := db.Exec(ctx, `UPDATE scheduled_sends SET status = 'cancelled', cancel_reason = 'manual' WHERE tenant_id = $1 AND id = $2`,
				org, s.ID); err != nil {
				return err
			}
			fmt.Printf("chaos selftest: planted lie: scheduled send %s rewritten sent -> cancelled\n", s.ID)
			undo = append(undo, func() {
				_, _ = db.Exec(ctx, `UPDATE scheduled_sends SET status = 'sent', cancel_reason = NULL WHERE tenant_id = $1 AND id = $2`, org, s.ID)
			})
			break
		}
	}
	if len(undo) > 0 {
		lie, err := r.gather(ctx, db, w, clean.Side)
		if err != nil {
			return err
		}
		plants = append(plants, plant{"facts-lie.json", "status-lies", lie})
		for _, u := range undo {
			u()
		}
	}

	// Duplicate: an accepted transactional unit sent again, for real.
	if what, err := r.resend(ctx, clean); err != nil {
		fmt.Println("chaos selftest: no duplicate planted:", err)
	} else {
		fmt.Println("chaos selftest: planted duplicate:", what)
		dup, err := r.gather(ctx, db, w, clean.Side)
		if err != nil {
			return err
		}
		plants = append(plants, plant{"facts-dup.json", "duplicates", dup})
	}

	self, err := os.Executable()
	if err != nil {
		return err
	}
	var problems []string
	for _, p := range plants {
		path := r.factsPath(p.file)
		if err := r.saveFacts(p.facts, path); err != nil {
			return err
		}
		out, err := exec.CommandContext(ctx, self, "-check", path).CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			return err
		}
		failed := failedChecks(string(out))
		switch {
		case p.check == "" && code == 0:
			fmt.Printf("chaos selftest: clean run: checker exit 0, every check passed\n")
		case p.check == "":
			problems = append(problems, fmt.Sprintf("the clean run failed (exit %d: %v)", code, failed))
			fmt.Print(string(out))
		case code != 0 && contains(failed, p.check):
			fmt.Printf("chaos selftest: %s: checker exit %d, FAIL %s (failed: %s)\n", p.file, code, p.check, strings.Join(failed, ", "))
		default:
			problems = append(problems, fmt.Sprintf("%s: the checker missed it (exit %d, failed %v, wanted %s)", p.file, code, failed, p.check))
			fmt.Print(string(out))
		}
	}
	want := 5 // clean, two losses, a lie, a duplicate
	if len(plants) < want {
		problems = append(problems, fmt.Sprintf("only %d of %d runs could be planted (a longer -d gives the run more to plant in)", len(plants), want))
	}
	if len(problems) > 0 {
		return fmt.Errorf("selftest failed: %s", strings.Join(problems, "; "))
	}
	fmt.Printf("chaos selftest: passed: the clean run passes and each of %d planted anomalies is caught\n", len(plants)-1)
	return nil
}

var failRE = regexp.MustCompile(`(?m)^\s+FAIL (\S+)`)

// failedChecks are the names of the checks a -check run printed as FAIL.
func failedChecks(out string) []string {
	var names []string
	for _, m := range failRE.FindAllStringSubmatch(out, -1) {
		names = append(names, m[1])
	}
	return names
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// dropRequests is f without the requests of one record: settled as
// accepted (inDoubt false) or in doubt (true) with a request the provider
// took; nil when there is none.
func dropRequests(f *Facts, inDoubt bool) (*Facts, string) {
	v := newView(f)
	for _, rec := range f.Records {
		if rec.InDoubt != inDoubt || len(v.bySend[rec.ID]) == 0 {
			continue
		}
		out := *f
		out.Requests = nil
		for _, q := range f.Requests {
			if q.SendID != rec.ID {
				out.Requests = append(out.Requests, q)
			}
		}
		return &out, fmt.Sprintf("the fake's log loses the requests of %s (in doubt %v)", rec.ID, inDoubt)
	}
	return nil, ""
}

// resend sends an accepted transactional unit again under a fresh key until
// the provider takes it.
func (r *run) resend(ctx context.Context, f *Facts) (string, error) {
	v := newView(f)
	for _, t := range f.Told {
		taken := v.takenBy[t.Unit]
		if t.Status != "sent" || !strings.HasPrefix(t.Unit, "tx:") || len(taken) != 1 {
			continue
		}
		body := map[string]any{"to": taken[0].To, "template": "tx", "variables": map[string]any{"unit": t.Unit}}
		for attempt := range 20 {
			key := fmt.Sprintf("selftest-dup-%d", attempt)
			var out struct {
				SendID string `json:"sendId"`
			}
			_, err := r.call(ctx, r.apis[attempt%2], "POST", "/api/send", body, map[string]string{"Idempotency-Key": key}, &out)
			if err == nil {
				return fmt.Sprintf("%s sent again as %s (first %s)", t.Unit, out.SendID, taken[0].SendID), nil
			}
			if id := inDoubtSendID(err); id != "" {
				if taken := r.fake.snapshot(); len(taken) > 0 && taken[len(taken)-1].SendID == id && taken[len(taken)-1].Taken {
					return fmt.Sprintf("%s sent again as %s, in doubt but taken (first %s)", t.Unit, id, v.takenBy[t.Unit][0].SendID), nil
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
		return "", fmt.Errorf("the provider never took the resend of %s", t.Unit)
	}
	return "", errors.New("no transactional unit was sent exactly once")
}
