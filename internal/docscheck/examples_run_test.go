// This file runs the steps of examples/README.md as they
// stand, in order, against a running service: the api on a port of its
// own, on a database of the test's own (internal/testenv). A README step
// that no longer works (a missing prerequisite, a changed route, a file
// that does not parse) fails make test here.

package docscheck

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"tidings/api"
	"tidings/internal/app"
	"tidings/internal/app/apptest"
	"tidings/internal/auth"
	"tidings/internal/provider"
	"tidings/internal/ratelimit"
	"tidings/internal/testenv"
)

// shBlock is a fenced block the README means to be run.
var shBlock = regexp.MustCompile("(?ms)^```sh\n(.*?)^```")

// serve starts the api as cmd/api serves it and returns its base URL and
// an API key of a new tenant.
func serve(t *testing.T) (baseURL, key string, svc *app.Services) {
	t.Helper()
	ctx := context.Background()
	cfg := apptest.Config(t)
	cfg.OutboxDir = t.TempDir()
	prov, err := provider.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	svc = apptest.Services(t, app.Infra{Config: cfg, MJML: testenv.MJML(t), Provider: prov})
	if _, err := svc.DB.Pool.Exec(ctx, `INSERT INTO tenants (id, name) VALUES ('ten_examples', 'Examples')`); err != nil {
		t.Fatal(err)
	}
	k, err := svc.APIKeys.Create(ctx, "ten_examples", "examples")
	if err != nil {
		t.Fatal(err)
	}
	a, err := api.New(api.Deps{Services: svc, Limiter: ratelimit.NewPer(svc.Redis, 10000, time.Hour, "examples:"),
		Sessions: auth.NewSessionVerifier("examples-test-secret", "", "")})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = a.Listener(ln) }()
	t.Cleanup(func() { _ = a.Shutdown() })
	return "http://" + ln.Addr().String(), k.Raw, svc
}

// runStep runs the README's step (block i) as a person would: from the
// repository's root, in a shell of its own, with what step 1 exports set.
func runStep(t *testing.T, baseURL, key string, i int, script string) []byte {
	t.Helper()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "TIDINGS_URL="+baseURL, "KEY="+key)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("step %d of examples/README.md failed (%v):\n%s\nstdout: %s\nstderr: %s", i+1, err, script, out.String(), errOut.String())
	}
	return out.Bytes()
}

func TestReadmeStepsRun(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the examples' steps need %s: %v", tool, err)
		}
	}
	readme, err := os.ReadFile("../../examples/README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := shBlock.FindAllStringSubmatch(string(readme), -1)
	if len(blocks) < 6 {
		t.Fatalf("examples/README.md has %d sh blocks; the steps are gone?", len(blocks))
	}
	baseURL, key, _ := serve(t)
	var last []byte
	for i, b := range blocks {
		out := runStep(t, baseURL, key, i, b[1])
		lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
		last = lines[len(lines)-1]
	}
	// The last step lists the sequence's contacts: the event enrolled Ann.
	var enrolled struct {
		Items []struct {
			Email  string `json:"email"`
			Status string `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal(last, &enrolled); err != nil || len(enrolled.Items) != 1 ||
		enrolled.Items[0].Email != "ann@example.com" || enrolled.Items[0].Status != "active" {
		t.Fatalf("after the steps, the onboarding sequence's contacts: %s (%v)", last, err)
	}
}

// The order matters, and the error says so: the sequence before its topic
// (its template there) is refused with a message naming the topic.
func TestSequenceBeforeItsTopicNamesIt(t *testing.T) {
	baseURL, key, _ := serve(t)
	readme, err := os.ReadFile("../../examples/README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := shBlock.FindAllStringSubmatch(string(readme), -1)
	runStep(t, baseURL, key, 0, blocks[0][1]) // where and who
	runStep(t, baseURL, key, 2, blocks[2][1]) // the template, not the topic
	yaml, err := os.ReadFile("../../examples/sequences/onboarding.yaml")
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPut, baseURL+"/api/sequences/onboarding", bytes.NewReader(yaml))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "text/yaml")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body struct {
		Error struct {
			Code    string         `json:"code"`
			Message string         `json:"message"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusNotFound || body.Error.Code != "NOT_FOUND" ||
		!strings.Contains(body.Error.Message, `topic "news" not found`) || body.Error.Details["topic"] != "news" {
		t.Fatalf("%d %+v", res.StatusCode, body.Error)
	}
}
