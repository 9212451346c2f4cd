package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"tidings/api"
	"tidings/internal/app"
	"tidings/internal/app/apptest"
	"tidings/internal/auth"
	"tidings/internal/cli"
	"tidings/internal/ratelimit"
	"tidings/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// server is the real api in front of which a proxy plays the worker: the
// first time the client asks for an import's progress it runs one chunk
// (so the client sees it running), every later time the rest.
type server struct {
	url, key string
	svc      *app.Services
	mu       sync.Mutex
	asked    map[string]int
}

const tenant = "ten_cli"

func setup(t *testing.T) *server {
	t.Helper()
	ctx := context.Background()
	svc := apptest.Services(t, app.Infra{})
	svc.Imports.Chunk = 2
	if _, err := svc.DB.Pool.Exec(ctx, `INSERT INTO tenants (id, name) VALUES ($1, 'CLI')`, tenant); err != nil {
		t.Fatal(err)
	}
	key, err := svc.APIKeys.Create(ctx, tenant, "cli")
	if err != nil {
		t.Fatal(err)
	}
	a, err := api.New(api.Deps{Services: svc, Limiter: ratelimit.NewPer(svc.Redis, 10000, time.Hour, "cli:"),
		Sessions: auth.NewSessionVerifier("secret", "", "")})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = a.Listener(ln) }()
	t.Cleanup(func() { _ = a.Shutdown() })
	target, _ := url.Parse("http://" + ln.Addr().String())
	proxy := httputil.NewSingleHostReverseProxy(target)
	s := &server{key: key.Raw, svc: svc, asked: map[string]int{}}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id, ok := strings.CutPrefix(r.URL.Path, "/api/contacts/import/"); ok && r.Method == http.MethodGet && !strings.Contains(id, "/") {
			s.mu.Lock()
			s.asked[id]++
			n := s.asked[id]
			s.mu.Unlock()
			var err error
			if n == 1 {
				_, err = svc.Imports.Step(r.Context(), tenant, id)
			} else {
				err = svc.Imports.Run(r.Context(), tenant, id)
			}
			if err != nil {
				t.Errorf("running import %s: %v", id, err)
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	s.url = front.URL
	return s
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// tidings import FILE: the file is uploaded, the import followed through
// its progress until it completes, and the result printed with the first
// failed rows; the progress bars go to the error output.
func TestImportCommand(t *testing.T) {
	t.Parallel()
	s := setup(t)
	var rows strings.Builder
	rows.WriteString("email,firstName\n")
	for i := range 7 {
		fmt.Fprintf(&rows, "c%d@example.com,C%d\n", i, i)
	}
	rows.WriteString("not-an-email,X\n")
	file := writeFile(t, "contacts.csv", rows.String())
	env := map[string]string{cli.EnvURL: s.url, cli.EnvAPIKey: s.key}
	var out, errOut bytes.Buffer
	code := cli.Run(context.Background(), []string{"import", file, "-interval", "1ms"},
		func(k string) string { return env[k] }, &out, &errOut)
	if code != cli.ExitRowsFailed {
		t.Fatalf("exit %d, want %d (a row failed); out %s; err %s", code, cli.ExitRowsFailed, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "completed: 8 rows, 7 created, 0 updated, 1 failed") ||
		!strings.Contains(out.String(), "line 9: email must be a valid email address") {
		t.Fatalf("output:\n%s", out.String())
	}
	// The bar ends on the summary's numbers.
	if !strings.Contains(errOut.String(), "importing: 8 rows, 7 created, 0 updated, 1 failed") {
		t.Fatalf("the progress bar does not tell the summary's numbers:\n%s", errOut.String())
	}
	saved, err := os.ReadFile(cli.FailuresPath(file))
	if err != nil || string(saved) != "line,severity,code,message,email,firstName\n9,error,VALIDATION_ERROR,email must be a valid email address,not-an-email,X\n" {
		t.Fatalf("failed rows file: %q, %v", saved, err)
	}
	if !strings.Contains(errOut.String(), "uploading") || !strings.Contains(errOut.String(), "importing") {
		t.Fatalf("no progress bars:\n%s", errOut.String())
	}
	for id, n := range s.asked {
		if n < 2 {
			t.Fatalf("import %s: progress asked %d times; the client stopped while it was running", id, n)
		}
	}
	c, err := s.svc.Contacts.GetByEmail(context.Background(), tenant, "c6@example.com")
	if err != nil || !strings.Contains(string(c.Properties), `"C6"`) {
		t.Fatalf("c6: %+v, %v", c, err)
	}
}

// The core on its own: an NDJSON file, the format from its extension, no
// progress bars.
func TestImporterNDJSON(t *testing.T) {
	t.Parallel()
	s := setup(t)
	file := writeFile(t, "contacts.jsonl", `{"email": "a@example.com", "properties": {"plan": "pro"}}`+"\n"+`{"email": "b@example.com", "x": 1}`+"\n")
	ct, err := cli.ContentType(file, "")
	if err != nil || ct != "application/jsonl" {
		t.Fatalf("content type %q, %v", ct, err)
	}
	im := cli.Importer{BaseURL: s.url, APIKey: s.key, HTTP: http.DefaultClient, Interval: time.Millisecond}
	res, err := im.Import(context.Background(), file, ct)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != "completed" || res.Total != 2 || res.Created != 1 || res.Failed != 1 || len(res.Errors) != 1 ||
		res.Errors[0].Line != 2 || !strings.Contains(res.Errors[0].Message, "x is not a known field") {
		t.Fatalf("result %+v", res)
	}
}

// What the API refuses comes back as its message, and the exit code says
// so; what cannot be sent at all is a usage error.
func TestImportCommandErrors(t *testing.T) {
	t.Parallel()
	s := setup(t)
	run := func(env map[string]string, args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := cli.Run(context.Background(), args, func(k string) string { return env[k] }, &out, &errOut)
		return code, out.String() + errOut.String()
	}
	env := map[string]string{cli.EnvURL: s.url, cli.EnvAPIKey: s.key}
	noEmail := writeFile(t, "people.csv", "name\nAnn\n")
	if code, msg := run(env, "import", "-quiet", noEmail); code != cli.ExitError || !strings.Contains(msg, "header must have an email column") ||
		!strings.Contains(msg, "VALIDATION_ERROR") {
		t.Fatalf("no email column: %d %s", code, msg)
	}
	bad := map[string]string{cli.EnvURL: s.url, cli.EnvAPIKey: "tdk_wrong"}
	if code, msg := run(bad, "import", noEmail); code != cli.ExitError || !strings.Contains(msg, "UNAUTHORIZED") {
		t.Fatalf("wrong key: %d %s", code, msg)
	}
	if code, msg := run(map[string]string{cli.EnvURL: s.url}, "import", noEmail); code != cli.ExitUsage || !strings.Contains(msg, cli.EnvAPIKey) {
		t.Fatalf("no key: %d %s", code, msg)
	}
	if code, msg := run(env, "import", writeFile(t, "people.txt", "x")); code != cli.ExitUsage || !strings.Contains(msg, "-type") {
		t.Fatalf("unknown extension: %d %s", code, msg)
	}
	if code, _ := run(env, "import"); code != cli.ExitUsage {
		t.Fatalf("no file: %d", code)
	}
	if code, _ := run(env, "export"); code != cli.ExitUsage {
		t.Fatalf("unknown command: %d", code)
	}
	// -type wins over the extension.
	if code, msg := run(env, "import", "-quiet", "-type", "csv", "-interval", "1ms", writeFile(t, "people.txt", "email\na@example.com\n")); code != cli.ExitOK ||
		!strings.Contains(msg, "1 created") {
		t.Fatalf("-type csv: %d %s", code, msg)
	}
}

// A first import past the free plan's limit: the exit code says rows
// failed, the summary names the limit and its setting, the bad rows far
// past the first 100 failures are still shown, a duplicate is told, and
// every failed row is in the file beside the import.
func TestImportCommandPlanLimit(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.svc.Imports.FreeLimit = 5
	s.svc.Imports.Chunk = 40
	var rows strings.Builder
	rows.WriteString("email\n")
	for i := range 150 {
		switch i {
		case 120:
			rows.WriteString("bad-at-line-122\n")
		case 130:
			rows.WriteString("c1@example.com\n") // line 132: a duplicate of line 3
		default:
			fmt.Fprintf(&rows, "c%d@example.com\n", i)
		}
	}
	file := writeFile(t, "first.csv", rows.String())
	env := map[string]string{cli.EnvURL: s.url, cli.EnvAPIKey: s.key}
	var out, errOut bytes.Buffer
	code := cli.Run(context.Background(), []string{"import", file, "-interval", "1ms"},
		func(k string) string { return env[k] }, &out, &errOut)
	o := out.String()
	if code != cli.ExitRowsFailed {
		t.Fatalf("exit %d, want %d; out %s; err %s", code, cli.ExitRowsFailed, o, errOut.String())
	}
	for _, want := range []string{
		"completed: 150 rows, 5 created, 1 updated, 144 failed, 1 duplicate",
		"plan free allows 5 contacts; 143 rows not imported; raise PLAN_FREE_CONTACTS",
		"failed rows by kind: 143 PLAN_LIMIT_EXCEEDED, 1 VALIDATION_ERROR",
		"line 122: email must be a valid email address",
		"line 132 (warning): duplicate of line 3",
		"every failed row and warning, with the row as sent: " + cli.FailuresPath(file),
	} {
		if !strings.Contains(o, want) {
			t.Fatalf("output without %q:\n%s", want, o)
		}
	}
	saved, err := os.ReadFile(cli.FailuresPath(file))
	if err != nil || strings.Count(string(saved), "\n") != 1+144+1 {
		t.Fatalf("failed rows file: %d lines, %v", strings.Count(string(saved), "\n"), err)
	}
	// -errors none writes nothing.
	file2 := writeFile(t, "again.csv", "email\nx@example.com\n")
	out.Reset()
	code = cli.Run(context.Background(), []string{"import", file2, "-quiet", "-errors", "none", "-interval", "1ms"},
		func(k string) string { return env[k] }, &out, &errOut)
	if _, err := os.Stat(cli.FailuresPath(file2)); code != cli.ExitRowsFailed || !os.IsNotExist(err) {
		t.Fatalf("-errors none: exit %d, file %v; %s", code, err, out.String())
	}
}
