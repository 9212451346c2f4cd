// Command chaos is the fault run of issue 15 (`make chaos`): a steady
// workload of events that start a three-email drip and of transactional
// sends, against 2 api and 2 worker processes (bin/api, bin/worker) on one
// PostgreSQL and one Redis (or a Redis Cluster with -cluster) with a fake
// SendGrid in this process that leaves some requests unanswered (held past
// PROVIDER_TIMEOUT, or cut after the body was read, with or without taking
// the message), while it kills workers with SIGKILL mid-dispatch, flushes
// Redis, kills api processes, cuts every PostgreSQL connection of the run
// and restarts PostgreSQL. Then it lets the system settle and reconciles the
// database with the fake provider and with what the clients were told:
//
//   - every accepted (2xx) event is stored, every accepted transactional
//     send, and every one answered in doubt, has its send record (lost
//     otherwise);
//   - every scheduled send ended sent or cancelled with a reason (lost if
//     it is still pending, claimed or failed; dead ones are counted), and
//     no record is left sending;
//   - the provider saw no send_id twice (duplicated otherwise), every
//     send_id it saw has a send record (the ledger writes it first: a
//     message without one is lost), and every record settled as accepted
//     was seen; records in doubt are reported;
//   - the tenant's metrics equal the facts (sent, scheduled, cancelled).
//
// It prints the figures and exits 1 on any loss, duplicate or metrics
// mismatch. Everything runs on loopback, in a database of its own that is
// dropped at the end, on Redis database 13 (flushed; other tests use
// others), bounded by -timeout.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"tidings/internal/auth"
)

const (
	jwtSecret = "chaos-dashboard-secret"
	org       = "org_chaos"
	contacts  = 400
	dripYAML  = "name: Chaos drip\ntrigger: {event: signed_up}\nsteps:\n  - send: welcome\n  - delay: 2s\n  - id: second\n    action: email\n    template: welcome\n  - delay: 3s\n  - id: third\n    action: email\n    template: welcome\n"
)

var (
	duration  = flag.Duration("d", 90*time.Second, "workload duration")
	timeout   = flag.Duration("timeout", 10*time.Minute, "hard bound on the whole run")
	pgRestart = flag.Bool("pg-restart", true, "restart PostgreSQL once mid-run (pg_ctlcluster; disturbs anything else using it)")
	cluster   = flag.Bool("cluster", false, "run on a three-node Redis Cluster started on loopback (no Redis flush faults)")
	keep      = flag.Bool("keep", false, "keep the database and logs")
	outDir    = flag.String("out", "var/chaos", "logs of the processes")
	pgAdmin   = flag.String("pg", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "PostgreSQL admin URL")
)

func main() {
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	r := &run{}
	code := 0
	if err := r.main(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		code = 1
	}
	r.cleanup()
	os.Exit(code)
}

type run struct {
	dbName, dbURL, redisURL string
	fake                    *fakeSendGrid
	procs                   map[string]*proc
	mu                      sync.Mutex
	key                     string
	segment                 string
	hooks                   *receiver
	apis                    []string // base URLs
	faults                  map[string]int
	clusterNodes            []*exec.Cmd
}

type proc struct {
	name string
	bin  string
	env  []string
	cmd  *exec.Cmd
	log  *os.File
}

func (r *run) main(ctx context.Context) error {
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		return err
	}
	r.faults = map[string]int{}
	r.hooks = newReceiver()
	if err := r.hooks.start(); err != nil {
		return err
	}
	r.fake = newFake()
	fakeURL, err := r.fake.start()
	if err != nil {
		return err
	}
	if err := r.freshDB(ctx); err != nil {
		return err
	}
	if *cluster {
		if r.redisURL, err = r.startCluster(ctx); err != nil {
			return err
		}
	} else {
		r.redisURL = "redis://127.0.0.1:6379/13"
		if err := r.flushRedis(ctx); err != nil {
			return err
		}
	}
	env := []string{"DATABASE_URL=" + r.dbURL, "REDIS_URL=" + r.redisURL, fmt.Sprintf("REDIS_CLUSTER=%v", *cluster),
		"EMAIL_PROVIDER=sendgrid", "SENDGRID_API_KEY=SG.chaos", "SENDGRID_API_URL=" + fakeURL,
		"TRACKING_SECRET=chaos-tracking-secret", "DASHBOARD_JWT_SECRET=" + jwtSecret,
		// Public secrets and tokens without iss/aud: development only
		// (config.Secure); each api's admin listener on a port of its own.
		"DEV_MODE=true", "API_ADMIN_ADDR=127.0.0.1:0",
		"WEBHOOK_ALLOW_PRIVATE_TARGETS=true", "WEBHOOK_RETRY_SCHEDULE=1s,2s,5s,10s,10s,10s",
		"RATE_LIMIT_PER_MINUTE=1000000", "PROVIDER_TIMEOUT=3s", "SEND_CLAIM_TIMEOUT=15s", "LOG_LEVEL=warn",
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	r.procs = map[string]*proc{}
	for i := 1; i <= 2; i++ {
		addr := fmt.Sprintf("127.0.0.1:%d", freePort())
		r.apis = append(r.apis, "http://"+addr)
		r.procs[fmt.Sprintf("api%d", i)] = &proc{name: fmt.Sprintf("api%d", i), bin: "bin/api",
			env: append(append([]string{}, env...), "HTTP_ADDR="+addr, fmt.Sprintf("MIGRATE=%v", i == 1))}
		r.procs[fmt.Sprintf("worker%d", i)] = &proc{name: fmt.Sprintf("worker%d", i), bin: "bin/worker",
			env: append(append([]string{}, env...), fmt.Sprintf("WORKER_ADMIN_ADDR=127.0.0.1:%d", freePort()))}
	}
	for _, name := range []string{"api1", "api2", "worker1", "worker2"} {
		if err := r.start(name); err != nil {
			return err
		}
		if strings.HasPrefix(name, "api") {
			if err := waitHTTP(ctx, r.apiURL(name)+"/readyz", 60*time.Second); err != nil {
				return fmt.Errorf("%s not ready: %w (see %s)", name, err, r.procs[name].log.Name())
			}
		}
	}
	if err := r.setup(ctx); err != nil {
		return fmt.Errorf("setup: %w", err)
	}

	fmt.Printf("chaos: workload %v on 2 api + 2 worker processes (%s), fake SendGrid %s\n", *duration, r.redisURL, fakeURL)
	var w workload
	wctx, stopLoad := context.WithTimeout(ctx, *duration)
	defer stopLoad()
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() { w.events(wctx, r, i) })
	}
	for i := range 3 {
		wg.Go(func() { w.sends(wctx, r, i) })
	}
	wg.Go(func() { w.broadcasts(wctx, r) })
	wg.Go(func() { r.inject(wctx) })
	wg.Wait()
	for name, p := range r.procs { // a process killed at the very end comes back for the settle
		if p.cmd == nil || p.cmd.ProcessState != nil {
			_ = r.start(name)
		}
	}
	fmt.Printf("chaos: workload done: %d events accepted, %d transactional sends accepted, %d requests failed (retried or given up)\n",
		len(w.eventIDs), len(w.sendIDs), w.failed.Load())
	return r.reconcile(ctx, &w)
}

func (r *run) apiURL(name string) string {
	if name == "api2" {
		return r.apis[1]
	}
	return r.apis[0]
}

func (r *run) freshDB(ctx context.Context) error {
	r.dbName = fmt.Sprintf("tidings_chaos_%d", time.Now().Unix())
	c, err := pgx.Connect(ctx, *pgAdmin)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE "+r.dbName); err != nil {
		return err
	}
	u := strings.Replace(*pgAdmin, "/postgres?", "/"+r.dbName+"?", 1)
	r.dbURL = u
	return nil
}

func (r *run) flushRedis(ctx context.Context) error {
	opt, err := redis.ParseURL(r.redisURL)
	if err != nil {
		return err
	}
	c := redis.NewClient(opt)
	defer c.Close()
	return c.FlushDB(ctx).Err()
}

func (r *run) start(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.procs[name]
	if p.log == nil {
		f, err := os.Create(filepath.Join(*outDir, name+".log"))
		if err != nil {
			return err
		}
		p.log = f
	}
	cmd := exec.Command(p.bin)
	cmd.Env, cmd.Stdout, cmd.Stderr = p.env, p.log, p.log
	if err := cmd.Start(); err != nil {
		return err
	}
	p.cmd = cmd
	go func() { _ = cmd.Wait() }()
	return nil
}

// kill sends SIGKILL to the named process and starts it again after a
// moment.
func (r *run) kill(ctx context.Context, name string) {
	r.mu.Lock()
	p := r.procs[name]
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
	}
	r.mu.Unlock()
	sleep(ctx, 700*time.Millisecond)
	if err := r.start(name); err != nil {
		fmt.Fprintln(os.Stderr, "restart", name, err)
	}
}

// inject runs the faults in rotation, one every 2-3 s, until the
// workload ends.
func (r *run) inject(ctx context.Context) {
	kinds := []string{"kill-worker", "kill-worker", "flush-redis", "kill-api", "pg-terminate", "kill-worker", "kill-api"}
	if *cluster {
		kinds = []string{"kill-worker", "kill-api", "kill-worker", "pg-terminate"}
	}
	pgAt := time.Now().Add(*duration / 2)
	for i := 0; ; i++ {
		if !sleep(ctx, 2*time.Second+time.Duration(rand.IntN(1000))*time.Millisecond) {
			return
		}
		if *pgRestart && time.Now().After(pgAt) && r.faults["restart-postgres"] == 0 {
			if err := exec.CommandContext(ctx, "pg_ctlcluster", "15", "main", "restart").Run(); err != nil {
				fmt.Fprintln(os.Stderr, "restart postgres:", err)
			} else {
				r.count("restart-postgres")
			}
			continue
		}
		switch k := kinds[i%len(kinds)]; k {
		case "kill-worker":
			r.kill(ctx, fmt.Sprintf("worker%d", 1+rand.IntN(2)))
			r.count(k)
		case "kill-api":
			r.kill(ctx, fmt.Sprintf("api%d", 1+rand.IntN(2)))
			r.count(k)
		case "flush-redis":
			if err := r.flushRedis(ctx); err == nil {
				r.count(k)
			}
		case "pg-terminate":
			// PostgreSQL briefly unreachable: every connection of the run's
			// database is cut, mid-transaction or not.
			if err := r.terminateBackends(ctx); err == nil {
				r.count(k)
			}
		}
	}
}

func (r *run) terminateBackends(ctx context.Context) error {
	db, err := pgx.Connect(ctx, *pgAdmin)
	if err != nil {
		return err
	}
	defer db.Close(ctx)
	_, err = db.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = $1 AND pid <> pg_backend_pid()`, r.dbName)
	return err
}

func (r *run) count(kind string) {
	r.mu.Lock()
	r.faults[kind]++
	r.mu.Unlock()
}

// call makes an API request to base with the tenant's key.
func (r *run) call(ctx context.Context, base, method, path string, body any, hdr map[string]string, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	tok := r.key
	if v, ok := hdr["Authorization"]; ok {
		tok = v
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	for k, v := range hdr {
		if k != "Authorization" {
			req.Header.Set(k, v)
		}
	}
	res, err := httpClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if out != nil && res.StatusCode < 300 {
		_ = json.Unmarshal(raw, out)
	}
	if res.StatusCode >= 300 {
		return res.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, res.StatusCode, raw)
	}
	return res.StatusCode, nil
}

var httpClient = &http.Client{Timeout: 15 * time.Second}

// inDoubtSendID is the send a 502 in doubt names, "" for any other error.
func inDoubtSendID(err error) string {
	msg := err.Error()
	i := strings.Index(msg, "{")
	if i < 0 || !strings.Contains(msg, ": 502 ") {
		return ""
	}
	var body struct {
		Error struct {
			Details struct {
				SendID  string `json:"sendId"`
				InDoubt bool   `json:"inDoubt"`
			} `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(msg[i:]), &body) != nil || !body.Error.Details.InDoubt {
		return ""
	}
	return body.Error.Details.SendID
}

func (r *run) setup(ctx context.Context) error {
	tok, err := auth.MintHS256(jwtSecret, "chaos", org, time.Hour)
	if err != nil {
		return err
	}
	sess := map[string]string{"Authorization": tok}
	api := r.apis[0]
	if _, err := r.call(ctx, api, "POST", "/api/tenant", map[string]any{"name": "Chaos"}, sess, nil); err != nil {
		return err
	}
	var key struct {
		RawKey string `json:"rawKey"`
	}
	if _, err := r.call(ctx, api, "POST", "/api/api-keys", map[string]any{"name": "chaos"}, sess, &key); err != nil {
		return err
	}
	r.key = key.RawKey
	// A verified sending domain: DNS verification is not what this run is
	// about, so the row is written as a verified domain would be.
	db, err := pgx.Connect(ctx, r.dbURL)
	if err != nil {
		return err
	}
	defer db.Close(ctx)
	if _, err := db.Exec(ctx, `INSERT INTO domains (tenant_id, domain, status, sending_enabled, verification_token, dkim_tokens)
		VALUES ($1, 'chaos.example', 'verified', true, 't', '{a,b,c}')`, org); err != nil {
		return err
	}
	if _, err := r.call(ctx, api, "PATCH", "/api/tenant", map[string]any{"sendingStatus": "enabled",
		"defaultFromAddress": "news@chaos.example"}, nil, nil); err != nil {
		return err
	}
	if _, err := r.call(ctx, api, "PUT", "/api/templates/welcome", map[string]any{"name": "Welcome",
		"subject": "Hello {{ contact.email }}",
		"content": "<mjml><mj-body><mj-section><mj-column><mj-text>Hi {{ contact.email }}</mj-text></mj-column></mj-section></mj-body></mjml>"},
		nil, nil); err != nil {
		return err
	}
	if _, err := r.call(ctx, api, "PUT", "/api/sequences/drip", map[string]any{"content": dripYAML}, nil, nil); err != nil {
		return err
	}
	for i := range contacts {
		if _, err := r.call(ctx, api, "PUT", "/api/contacts", map[string]any{"email": contactEmail(i)}, nil, nil); err != nil {
			return err
		}
	}
	// Every contact: the audience of the broadcasts the workload sends.
	var seg struct {
		SegmentID string `json:"segmentId"`
	}
	if _, err := r.call(ctx, api, "POST", "/api/segments", map[string]any{"name": "Everyone",
		"rules": map[string]any{"operator": "and", "conditions": []any{
			map[string]any{"type": "property", "field": "nothing", "operator": "notExists"}}}}, nil, &seg); err != nil {
		return err
	}
	r.segment = seg.SegmentID
	// An outbound webhook endpoint taking every event type, on the
	// harness's receiver (which fails one delivery in ten, so retries run).
	if _, err := r.call(ctx, api, "POST", "/api/webhooks", map[string]any{"url": r.hooks.url}, nil, nil); err != nil {
		return err
	}
	return nil
}

// broadcasts sends a broadcast to every contact now and then, each
// created and sent with an Idempotency-Key-free retry on the other api
// (a create that failed made nothing; a send that failed is sent again,
// which the status table makes harmless).
func (w *workload) broadcasts(ctx context.Context, r *run) {
	for n := 0; ctx.Err() == nil; n++ {
		if !sleep(ctx, 15*time.Second) {
			return
		}
		var b struct {
			BroadcastID string `json:"broadcastId"`
		}
		ok := false
		for attempt := 0; attempt < 10 && !ok; attempt++ {
			_, err := r.call(context.WithoutCancel(ctx), r.apis[attempt%2], "POST", "/api/broadcasts",
				map[string]any{"name": fmt.Sprintf("News %d", n), "templateId": "welcome", "segmentId": r.segment}, nil, &b)
			ok = err == nil
			if !ok {
				time.Sleep(300 * time.Millisecond)
			}
		}
		if !ok {
			w.failed.Add(1)
			continue
		}
		for attempt := 0; attempt < 20; attempt++ {
			status, err := r.call(context.WithoutCancel(ctx), r.apis[attempt%2], "POST", "/api/broadcasts/"+b.BroadcastID+"/send", nil, nil, nil)
			if err == nil || status == 400 { // 400: an earlier try went through
				w.mu.Lock()
				w.broadcastIDs = append(w.broadcastIDs, b.BroadcastID)
				w.mu.Unlock()
				break
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
}

func contactEmail(i int) string { return fmt.Sprintf("c%d@chaos.example", i) }

type workload struct {
	mu       sync.Mutex
	eventIDs []string
	sendIDs  []string
	// doubtIDs are the transactional sends answered 502 in doubt.
	doubtIDs []string
	// broadcastIDs are the broadcasts sent.
	broadcastIDs []string
	failed       atomic.Int64
	next         atomic.Int64
}

// events posts signed_up for a new contact (each contact enters the drip
// once) and a ping that triggers nothing, alternately, to either api.
func (w *workload) events(ctx context.Context, r *run, lane int) {
	for n := 0; ctx.Err() == nil; n++ {
		name := "ping"
		var i int
		if n%2 == 0 {
			name, i = "signed_up", int(w.next.Add(1)-1)
			if i >= contacts {
				name = "ping"
			}
		}
		if name == "ping" {
			i = rand.IntN(contacts)
		}
		var out struct {
			Event struct {
				EventID string `json:"eventId"`
			} `json:"event"`
		}
		base := r.apis[(lane+n)%2]
		if _, err := r.call(ctx, base, "POST", "/api/events", map[string]any{"email": contactEmail(i), "name": name}, nil, &out); err != nil {
			w.failed.Add(1)
		} else {
			w.mu.Lock()
			w.eventIDs = append(w.eventIDs, out.Event.EventID)
			w.mu.Unlock()
		}
		sleep(ctx, 150*time.Millisecond)
	}
}

// sends posts transactional sends with an Idempotency-Key, retrying a
// failed request with the same key on the other api until it is answered.
func (w *workload) sends(ctx context.Context, r *run, lane int) {
	for n := 0; ctx.Err() == nil; n++ {
		key := fmt.Sprintf("chaos-%d-%d", lane, n)
		body := map[string]any{"to": contactEmail(rand.IntN(contacts)), "template": "welcome"}
		for attempt := 0; attempt < 20; attempt++ {
			var out struct {
				SendID string `json:"sendId"`
			}
			base := r.apis[(lane+n+attempt)%2]
			status, err := r.call(context.WithoutCancel(ctx), base, "POST", "/api/send", body, map[string]string{"Idempotency-Key": key}, &out)
			if err == nil {
				w.mu.Lock()
				w.sendIDs = append(w.sendIDs, out.SendID)
				w.mu.Unlock()
				break
			}
			// In doubt (ADDENDUM 12): the answer names the record; a retry
			// would only replay it.
			if id := inDoubtSendID(err); id != "" {
				w.mu.Lock()
				w.doubtIDs = append(w.doubtIDs, id)
				w.mu.Unlock()
				break
			}
			w.failed.Add(1)
			if status >= 400 && status < 500 && status != 409 && status != 429 {
				break // refused for good: not accepted, nothing to find
			}
			time.Sleep(300 * time.Millisecond)
		}
		sleep(ctx, 300*time.Millisecond)
	}
}

func (r *run) reconcile(ctx context.Context, w *workload) error {
	var db *pgx.Conn
	var err error
	for range 60 { // PostgreSQL may be coming back from its restart
		if db, err = pgx.Connect(ctx, r.dbURL); err == nil {
			break
		}
		sleep(ctx, time.Second)
	}
	if err != nil {
		return err
	}
	defer db.Close(ctx)

	// Settle: every scheduled send sent, cancelled or dead.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var open int
		if err := db.QueryRow(ctx, `SELECT (SELECT count(*) FROM scheduled_sends WHERE status IN ('pending', 'claimed', 'failed'))
			+ (SELECT count(*) FROM sends WHERE sending)
			+ (SELECT count(*) FROM broadcasts WHERE status IN ('scheduled', 'sending'))`).Scan(&open); err != nil {
			return err
		}
		if open == 0 || time.Now().After(deadline) {
			break
		}
		sleep(ctx, time.Second)
	}
	sleep(ctx, 2*time.Second) // a send leaving as the last row finished

	var lost, dup, inDoubt int
	report := func(ok bool, format string, args ...any) {
		mark := "ok  "
		if !ok {
			mark = "FAIL"
		}
		fmt.Printf("  %s "+format+"\n", append([]any{mark}, args...)...)
	}
	fmt.Println("chaos: reconciliation")

	// Accepted events are stored.
	missingEvents := 0
	for _, id := range w.eventIDs {
		var ok bool
		if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM events WHERE tenant_id = $1 AND id = $2)`, org, id).Scan(&ok); err != nil {
			return err
		}
		if !ok {
			missingEvents++
		}
	}
	lost += missingEvents
	report(missingEvents == 0, "accepted events stored: %d of %d", len(w.eventIDs)-missingEvents, len(w.eventIDs))

	// Accepted transactional sends, and those answered in doubt, are
	// recorded.
	missingSends := 0
	for _, id := range append(append([]string{}, w.sendIDs...), w.doubtIDs...) {
		var ok bool
		if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM sends WHERE tenant_id = $1 AND id = $2)`, org, id).Scan(&ok); err != nil {
			return err
		}
		if !ok {
			missingSends++
		}
	}
	lost += missingSends
	report(missingSends == 0, "accepted transactional sends recorded: %d of %d (%d of them answered in doubt)",
		len(w.sendIDs)+len(w.doubtIDs)-missingSends, len(w.sendIDs)+len(w.doubtIDs), len(w.doubtIDs))

	// Scheduled sends all ended.
	byStatus := map[string]int{}
	rows, err := db.Query(ctx, `SELECT status, count(*) FROM scheduled_sends GROUP BY status`)
	if err != nil {
		return err
	}
	total := 0
	for rows.Next() {
		var s string
		var n int
		_ = rows.Scan(&s, &n)
		byStatus[s], total = n, total+n
	}
	rows.Close()
	unfinished := byStatus["pending"] + byStatus["claimed"] + byStatus["failed"]
	lost += unfinished
	var noReason, sentNoRecord int
	if err := db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'cancelled' AND cancel_reason IS NULL
			AND NOT EXISTS (SELECT 1 FROM enrolments e WHERE e.tenant_id = ss.tenant_id AND e.id = ss.enrolment_id)),
		count(*) FILTER (WHERE status = 'sent' AND NOT EXISTS (SELECT 1 FROM sends s WHERE s.tenant_id = ss.tenant_id
			AND s.scheduled_send_id = ss.id))
		FROM scheduled_sends ss`).Scan(&noReason, &sentNoRecord); err != nil {
		return err
	}
	lost += sentNoRecord
	report(unfinished == 0 && sentNoRecord == 0, "scheduled sends: %d (sent %d, cancelled %d, dead %d, unfinished %d; sent without a send record %d)",
		total, byStatus["sent"], byStatus["cancelled"], byStatus["dead"], unfinished, sentNoRecord)
	var enrolled int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM enrolments`).Scan(&enrolled); err != nil {
		return err
	}
	report(total == 3*enrolled || byStatus["cancelled"] > 0 || byStatus["dead"] > 0,
		"drips: %d enrolments, 3 emails each = %d scheduled sends expected, %d written", enrolled, 3*enrolled, total)

	// Broadcasts: each sent, every recipient ended, each one sent has its
	// record, and no contact has two records of one broadcast.
	var bcSent, bcOpen, recSent, recQueued, recNoRecord, recOther int
	if err := db.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM broadcasts WHERE status = 'sent'),
			(SELECT count(*) FROM broadcasts WHERE status <> 'sent'),
			(SELECT count(*) FROM broadcast_recipients WHERE status = 'sent'),
			(SELECT count(*) FROM broadcast_recipients WHERE status = 'queued'),
			(SELECT count(*) FROM broadcast_recipients r WHERE status = 'sent' AND NOT EXISTS (SELECT 1 FROM sends s
				WHERE s.tenant_id = r.tenant_id AND s.id = r.send_id AND s.broadcast_id = r.broadcast_id)),
			(SELECT count(*) FROM broadcast_recipients WHERE status NOT IN ('sent', 'queued'))`).
		Scan(&bcSent, &bcOpen, &recSent, &recQueued, &recNoRecord, &recOther); err != nil {
		return err
	}
	lost += bcOpen + recQueued + recNoRecord + recOther
	report(len(w.broadcastIDs) == bcSent && bcOpen == 0 && recQueued == 0 && recNoRecord == 0 && recOther == 0,
		"broadcasts: %d sent of %d sent by the workload (%d not sent), %d recipients sent, %d still queued, %d skipped or failed, %d sent without a send record",
		bcSent, len(w.broadcastIDs), bcOpen, recSent, recQueued, recOther, recNoRecord)

	// Outbound webhooks: every message written with a fact was delivered
	// (at least once), and the receiver saw no message the database does
	// not hold (none without its fact).
	hookDeadline := time.Now().Add(2 * time.Minute)
	var msgs, pendingHooks int
	for {
		// Facts still in the outbox count as pending: the worker has not
		// fanned them out yet.
		if err := db.QueryRow(ctx, `SELECT (SELECT count(*) FROM webhook_messages),
			(SELECT count(*) FROM webhook_deliveries WHERE status <> 'succeeded') + (SELECT count(*) FROM webhook_outbox)`).Scan(&msgs, &pendingHooks); err != nil {
			return err
		}
		if pendingHooks == 0 || time.Now().After(hookDeadline) {
			break
		}
		sleep(ctx, time.Second)
	}
	known := map[string]bool{}
	rows, err = db.Query(ctx, `SELECT id FROM webhook_messages`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		known[id] = true
	}
	rows.Close()
	got := r.hooks.snapshot()
	undelivered, unknown, repeats := 0, 0, 0
	for id := range known {
		if got[id] == 0 {
			undelivered++
		}
	}
	for id, n := range got {
		if !known[id] {
			unknown++
		}
		repeats += n - 1
	}
	if pendingHooks > 0 {
		var detail string
		_ = db.QueryRow(ctx, `SELECT string_agg(status || ' ' || n || ' (attempts ' || a || ', next ' || nx || ')', '; ')
			FROM (SELECT status, count(*) AS n, max(attempts) AS a, max(next_attempt_at)::text AS nx
			      FROM webhook_deliveries WHERE status <> 'succeeded' GROUP BY status) x`).Scan(&detail)
		fmt.Printf("  info outbound deliveries not succeeded: %s\n", detail)
	}
	lost += undelivered + unknown
	report(undelivered == 0 && unknown == 0 && pendingHooks == 0,
		"outbound webhooks: %d messages written with their facts, %d delivered, %d not delivered, %d deliveries not succeeded, %d received without a fact, %d received more than once (at least once)",
		len(known), len(known)-undelivered, undelivered, pendingHooks, unknown, repeats)

	// The provider's view: no send_id twice, every one recorded.
	seen := r.fake.snapshot()
	recorded := map[string]bool{} // send id -> in doubt
	rows, err = db.Query(ctx, `SELECT id, in_doubt FROM sends WHERE tenant_id = $1`, org)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id string
		var doubt bool
		_ = rows.Scan(&id, &doubt)
		recorded[id] = doubt
		if doubt {
			inDoubt++
		}
	}
	rows.Close()
	withoutRecord := 0
	for id, n := range seen {
		if n > 1 {
			dup += n - 1
		}
		if _, ok := recorded[id]; !ok {
			withoutRecord++
		}
	}
	lost += withoutRecord
	notSeen, doubtTaken := 0, 0
	for id, doubt := range recorded {
		switch {
		case seen[id] == 0 && !doubt:
			notSeen++
		case seen[id] > 0 && doubt:
			doubtTaken++
		}
	}
	report(dup == 0, "provider: %d messages, %d distinct send_ids, %d send_ids seen twice or more; %d requests left unanswered",
		r.fake.total.Load(), len(seen), dup, r.fake.faults.Load())
	report(withoutRecord == 0, "messages the provider took without a send record: %d", withoutRecord)
	report(notSeen == 0, "send records settled as accepted that the provider never saw: %d", notSeen)
	fmt.Printf("  info in doubt (record kept, never sent again): %d, of which the provider had taken %d\n", inDoubt, doubtTaken)

	// Metrics equal the facts.
	var m struct {
		Metrics map[string]any `json:"metrics"`
	}
	metricsOK := false
	for range 30 {
		if _, err := r.call(ctx, r.apis[0], "GET", "/api/metrics", nil, nil, &m); err == nil {
			metricsOK = true
			break
		}
		sleep(ctx, time.Second)
	}
	var sentFacts, schedFacts, cancelFacts int
	if err := db.QueryRow(ctx, `SELECT (SELECT count(*) FROM sends WHERE tenant_id = $1),
		(SELECT count(*) FROM scheduled_sends WHERE tenant_id = $1),
		(SELECT count(*) FROM scheduled_sends WHERE tenant_id = $1 AND status = 'cancelled')`, org).Scan(&sentFacts, &schedFacts, &cancelFacts); err != nil {
		return err
	}
	num := func(k string) int { f, _ := m.Metrics[k].(float64); return int(f) }
	metricsMatch := metricsOK && num("sent") == sentFacts && num("scheduled") == schedFacts && num("cancelled") == cancelFacts
	report(metricsMatch, "metrics equal the facts: sent %d/%d, scheduled %d/%d, cancelled %d/%d (metrics/facts)",
		num("sent"), sentFacts, num("scheduled"), schedFacts, num("cancelled"), cancelFacts)

	faults, kinds := 0, []string{}
	for k, n := range r.faults {
		faults += n
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(kinds)
	fmt.Printf("chaos: %d faults injected (%s); workload %d events, %d transactional sends, %d scheduled sends, %d broadcasts (%d recipients); lost %d, duplicated %d, in doubt %d\n",
		faults, strings.Join(kinds, ", "), len(w.eventIDs), len(w.sendIDs), total, len(w.broadcastIDs), recSent, lost, dup, inDoubt)
	if lost > 0 || dup > 0 || !metricsMatch {
		return errors.New("reconciliation failed")
	}
	return nil
}

func (r *run) cleanup() {
	r.mu.Lock()
	for _, p := range r.procs {
		if p.cmd != nil && p.cmd.Process != nil {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	r.mu.Unlock()
	time.Sleep(2 * time.Second)
	r.mu.Lock()
	for _, p := range r.procs {
		if p.cmd != nil && p.cmd.Process != nil {
			_ = p.cmd.Process.Kill()
		}
		if p.log != nil {
			_ = p.log.Close()
		}
	}
	r.mu.Unlock()
	for _, c := range r.clusterNodes {
		_ = c.Process.Kill()
	}
	if r.fake != nil {
		r.fake.stop()
	}
	if r.dbName != "" && !*keep {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, *pgAdmin); err == nil {
			_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+r.dbName+" WITH (FORCE)")
			_ = c.Close(ctx)
		}
	}
}

// startCluster starts three redis-server nodes in cluster mode on loopback
// and joins them (as testenv.RedisCluster does for the tests).
func (r *run) startCluster(ctx context.Context) (string, error) {
	dir, err := os.MkdirTemp("", "tidings-chaos-cluster")
	if err != nil {
		return "", err
	}
	var addrs []string
	for range 3 {
		port := freePort()
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		cmd := exec.Command("redis-server", "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
			"--cluster-config-file", fmt.Sprintf("nodes-%d.conf", port), "--save", "", "--appendonly", "no", "--dir", dir)
		if err := cmd.Start(); err != nil {
			return "", err
		}
		r.clusterNodes = append(r.clusterNodes, cmd)
		addrs = append(addrs, addr)
	}
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		for i := 0; c.Ping(ctx).Err() != nil; i++ {
			if i > 100 {
				return "", fmt.Errorf("redis node %s did not start", a)
			}
			sleep(ctx, 100*time.Millisecond)
		}
		_ = c.Close()
	}
	if out, err := exec.CommandContext(ctx, "redis-cli", append(append([]string{"--cluster", "create"}, addrs...),
		"--cluster-replicas", "0", "--cluster-yes")...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("redis-cli --cluster create: %v: %s", err, out)
	}
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		for i := 0; ; i++ {
			info, err := c.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if i > 200 {
				return "", fmt.Errorf("cluster not ok at %s", a)
			}
			sleep(ctx, 100*time.Millisecond)
		}
		_ = c.Close()
	}
	return "redis://" + addrs[0] + "?addr=" + addrs[1] + "&addr=" + addrs[2], nil
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func waitHTTP(ctx context.Context, url string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		res, err := http.Get(url)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not ready within %v", url, d)
		}
		if !sleep(ctx, 200*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// sleep waits d unless ctx ends first; it reports whether it slept.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
