// This file holds what an operator loads next to the service: the
// Grafana dashboard and the Prometheus alert rules (docs/operators-guide.md).
// Its test checks that every metric series they name, and every label they
// match on, is one the api's or a worker's /metrics actually serves, so a
// renamed metric breaks the build instead of an alert that never fires.

package docscheck

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"gopkg.in/yaml.v3"

	"tidings/api"
	"tidings/internal/app"
	"tidings/internal/app/apptest"
	"tidings/internal/config"
	"tidings/internal/tasks"
	"tidings/internal/telemetry"
	"tidings/internal/testenv"
	"tidings/worker"
)

// selector is a metric name an expression reads, with the labels its
// matchers name.
type selector struct {
	name   string
	labels []string
}

// promqlKeywords are the words of PromQL that are neither metrics nor
// functions.
var promqlKeywords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true,
	"group_right": true, "bool": true, "and": true, "or": true, "unless": true, "offset": true, "atan2": true}

// aggregations are PromQL's aggregation operators, which may be followed
// by "by (...)" or "without (...)" before their "(".
var aggregations = map[string]bool{"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true,
	"stdvar": true, "count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"limitk": true, "limit_ratio": true}

// labelLists are the keywords followed by a parenthesised list of label
// names (not an expression).
var labelLists = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// selectors lexes a PromQL expression far enough to find its metric
// selectors: strings, range and subquery brackets and label lists are
// skipped, a word before "(" is a function or an aggregation, a number or
// duration is not a name, and {...} after a name holds its matchers.
func selectors(expr string) ([]selector, error) {
	var out []selector
	isWord := func(c byte, first bool) bool {
		return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && c >= '0' && c <= '9')
	}
	skipSpace := func(i int) int {
		for i < len(expr) && (expr[i] == ' ' || expr[i] == '\t' || expr[i] == '\n') {
			i++
		}
		return i
	}
	// closing returns the index after the bracket that closes the one at i.
	closing := func(i int, open, close byte) (int, error) {
		depth := 0
		for j := i; j < len(expr); j++ {
			switch expr[j] {
			case '"', '\'', '`':
				end := strings.IndexByte(expr[j+1:], expr[j])
				if end < 0 {
					return 0, fmt.Errorf("unterminated string in %q", expr)
				}
				j += end + 1
			case open:
				depth++
			case close:
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, fmt.Errorf("unbalanced %c in %q", open, expr)
	}
	matcherName := regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`" + `)\s*,?\s*`)
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			end := strings.IndexByte(expr[i+1:], c)
			if end < 0 {
				return nil, fmt.Errorf("unterminated string in %q", expr)
			}
			i += end + 2
		case c == '[':
			j, err := closing(i, '[', ']')
			if err != nil {
				return nil, err
			}
			i = j
		case c == '{':
			return nil, fmt.Errorf("a selector without a metric name in %q", expr)
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (isWord(expr[i], false) || expr[i] == '.') {
				i++
			}
		case isWord(c, true):
			j := i
			for j < len(expr) && isWord(expr[j], false) {
				j++
			}
			word := expr[i:j]
			k := skipSpace(j)
			switch {
			case labelLists[word]:
				i = k
				if k < len(expr) && expr[k] == '(' {
					end, err := closing(k, '(', ')')
					if err != nil {
						return nil, err
					}
					i = end
				}
			case promqlKeywords[word] || aggregations[word]:
				i = j
			case k < len(expr) && expr[k] == '(':
				i = j // a function or an aggregation
			default:
				s := selector{name: word}
				i = j
				if k < len(expr) && expr[k] == '{' {
					end, err := closing(k, '{', '}')
					if err != nil {
						return nil, err
					}
					body := strings.TrimSpace(expr[k+1 : end-1])
					for _, m := range matcherName.FindAllStringSubmatch(body, -1) {
						s.labels = append(s.labels, m[1])
					}
					if rest := matcherName.ReplaceAllString(body, ""); strings.TrimSpace(rest) != "" {
						return nil, fmt.Errorf("unreadable matchers %q in %q", body, expr)
					}
					i = end
				}
				out = append(out, s)
			}
		default:
			i++
		}
	}
	return out, nil
}

func TestSelectors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`max(tidings_asynq_up) == 0`, []string{"tidings_asynq_up"}},
		{`sum by (role) (max by (queue, role) (x{state="pending", role=~"$role"})) > 1e4`, []string{"x{state,role}"}},
		{`histogram_quantile(0.99, sum by (le, route) (rate(h_bucket[$__rate_interval])))`, []string{"h_bucket"}},
		{`sum by (p, c) (rate(a_total[10m])) / ignoring(p, c) group_left sum(rate(b_total{o!="x,}y"}[10m])) > 0.05`,
			[]string{"a_total", "b_total{o}"}},
		{`absent(u) or sum(increase(v[1h:5m])) offset 5m and w bool > 1`, []string{"u", "v", "w"}},
	} {
		got, err := selectors(tc.expr)
		if err != nil {
			t.Fatalf("%s: %v", tc.expr, err)
		}
		var names []string
		for _, s := range got {
			n := s.name
			if len(s.labels) > 0 {
				n += "{" + strings.Join(s.labels, ",") + "}"
			}
			names = append(names, n)
		}
		if !slices.Equal(names, tc.want) {
			t.Errorf("%s: %v, want %v", tc.expr, names, tc.want)
		}
	}
	for _, bad := range []string{`{__name__="x"}`, `sum(x{a="b"`, `x{a b}`} {
		if _, err := selectors(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// served reads a Prometheus text scrape: each series name with the label
// names its samples carry.
func served(t *testing.T, body string, into map[string]map[string]bool) {
	t.Helper()
	label := regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)="(?:[^"\\]|\\.)*"`)
	for _, line := range strings.Split(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.IndexAny(line, "{ ")
		if i < 0 {
			t.Fatalf("unreadable sample line %q", line)
		}
		name, labels := line[:i], ""
		if line[i] == '{' {
			labels = line[i+1 : strings.LastIndexByte(line, '}')]
		}
		if into[name] == nil {
			into[name] = map[string]bool{}
		}
		for _, m := range label.FindAllStringSubmatch(labels, -1) {
			into[name][m[1]] = true
		}
	}
}

func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	res, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", res.StatusCode, raw)
	}
	return string(raw)
}

// exported is every series the api's admin listener and a worker's serve,
// each with its label names.
func exported(t *testing.T) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	// The api's request metrics get their series with the first request.
	telemetry.ObserveHTTP("/api/contacts/:id", "GET", 500, time.Millisecond)
	served(t, scrape(t, api.AdminHandler()), out)

	url, _ := testenv.RedisDB(t)
	opt, err := config.AsynqRedis(url)
	if err != nil {
		t.Fatal(err)
	}
	client := asynq.NewClient(opt)
	t.Cleanup(func() { _ = client.Close() })
	// The queue gauges serve the queues Redis knows.
	for _, q := range []string{tasks.QueueSends, tasks.QueueWebhooks, tasks.QueueMaintenance} {
		if _, err := client.Enqueue(asynq.NewTask("probe", nil), asynq.Queue(q)); err != nil {
			t.Fatal(err)
		}
	}
	ins := asynq.NewInspector(opt)
	t.Cleanup(func() { _ = ins.Close() })
	svc := apptest.Services(t, app.Infra{})
	h, closeAdmin := worker.AdminHandler(opt, ins, worker.AdminOptions{ReadOnly: true}, worker.AdminCollectors(svc)...)
	t.Cleanup(closeAdmin)
	served(t, scrape(t, h), out)
	return out
}

// query is one PromQL expression of a deploy file, and where it is.
type query struct{ where, expr string }

func alertQueries(t *testing.T) []query {
	t.Helper()
	raw, err := os.ReadFile("../../deploy/prometheus-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert string            `yaml:"alert"`
				Expr  string            `yaml:"expr"`
				For   string            `yaml:"for"`
				Label map[string]string `yaml:"labels"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatal(err)
	}
	var out []query
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" || r.Label["severity"] == "" {
				t.Errorf("group %s: a rule without alert, expr or severity: %+v", g.Name, r)
			}
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("%s: for %q: %v", r.Alert, r.For, err)
				}
			}
			out = append(out, query{"alert " + r.Alert, r.Expr})
		}
	}
	return out
}

func dashboardQueries(t *testing.T) []query {
	t.Helper()
	raw, err := os.ReadFile("../../deploy/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Type       string `json:"type"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	var out []query
	for _, p := range dash.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			out = append(out, query{"panel " + p.Title, q.Expr})
		}
	}
	// label_values(metric, label): the metric must carry the label.
	lv := regexp.MustCompile(`^label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*,\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)$`)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := lv.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("variable %s: %q is not label_values(metric, label)", v.Name, v.Definition)
			continue
		}
		out = append(out, query{"variable " + v.Name, m[1] + `{` + m[2] + `=~".+"}`})
	}
	return out
}

// Every series the dashboard and the alert rules name is served, with
// every label they match on.
func TestDeployFilesNameServedSeries(t *testing.T) {
	t.Parallel()
	series := exported(t)
	qs := append(alertQueries(t), dashboardQueries(t)...)
	if len(qs) < 20 {
		t.Fatalf("only %d queries read from the deploy files", len(qs))
	}
	for _, q := range qs {
		sels, err := selectors(q.expr)
		if err != nil {
			t.Errorf("%s: %v", q.where, err)
			continue
		}
		if len(sels) == 0 {
			t.Errorf("%s: no metric in %q", q.where, q.expr)
		}
		for _, s := range sels {
			labels, ok := series[s.name]
			if !ok {
				t.Errorf("%s: %s is served by neither the api nor the worker", q.where, s.name)
				continue
			}
			for _, l := range s.labels {
				if !labels[l] {
					t.Errorf("%s: %s has no label %q (it has %v)", q.where, s.name, l, keys(labels))
				}
			}
		}
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
