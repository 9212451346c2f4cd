package docscheck

import (
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// composeFile is what the test reads of docker-compose.yml (the merge
// keys, <<: *tidings, resolved by the decoder as compose resolves them).
type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Build       any               `yaml:"build"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []string          `yaml:"volumes"`
		Networks    []string          `yaml:"networks"`
		Ports       []string          `yaml:"ports"`
		DependsOn   map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
		NetworkMode string `yaml:"network_mode"`
	} `yaml:"services"`
	Networks map[string]any `yaml:"networks"`
	Volumes  map[string]any `yaml:"volumes"`
}

// There is no Docker daemon in make test: the compose file is checked as
// far as reading it goes. Every service it depends on, volume and network
// it names is declared; the api and every worker share one outbox volume
// at OUTBOX_DIR and send to the Mailpit service, whose web page is
// published on the host's loopback only.
func TestComposeFile(t *testing.T) {
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	conditions := []string{"service_started", "service_healthy", "service_completed_successfully"}
	for name, s := range c.Services {
		if s.Image == "" && s.Build == nil {
			t.Errorf("service %s has neither image nor build", name)
		}
		for dep, d := range s.DependsOn {
			if _, ok := c.Services[dep]; !ok {
				t.Errorf("service %s depends on %s, which is not a service", name, dep)
			}
			if !slices.Contains(conditions, d.Condition) {
				t.Errorf("service %s: depends_on %s has condition %q", name, dep, d.Condition)
			}
		}
		for _, n := range s.Networks {
			if _, ok := c.Networks[n]; !ok && n != "default" {
				t.Errorf("service %s names network %s, not declared", name, n)
			}
		}
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if _, ok := c.Volumes[src]; !ok && !strings.HasPrefix(src, ".") && !strings.HasPrefix(src, "/") {
				t.Errorf("service %s mounts volume %s, not declared", name, src)
			}
		}
		for _, p := range s.Ports {
			if strings.Count(p, ":") == 2 && !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("service %s publishes %s beyond the loopback", name, p)
			}
		}
	}

	mp, ok := c.Services["mailpit"]
	if !ok || !strings.HasPrefix(mp.Image, "axllent/mailpit:") || !slices.Contains(mp.Ports, "127.0.0.1:8025:8025") {
		t.Errorf("the mail catcher: %+v (want axllent/mailpit, its page on 127.0.0.1:8025)", mp)
	}
	tidings := 0
	for name, s := range c.Services {
		if s.Environment["OUTBOX_DIR"] == "" {
			continue // not a Tidings process
		}
		tidings++
		outbox := ""
		for _, v := range s.Volumes {
			if src, rest, _ := strings.Cut(v, ":"); strings.HasPrefix(rest, s.Environment["OUTBOX_DIR"]) {
				outbox = src
			}
		}
		if outbox != "outbox" {
			t.Errorf("service %s: OUTBOX_DIR %s is not on the shared outbox volume (%v)", name, s.Environment["OUTBOX_DIR"], s.Volumes)
		}
		u, err := url.Parse(s.Environment["SMTP_URL"])
		if s.Environment["EMAIL_PROVIDER"] != "smtp" || err != nil || u.Hostname() != "mailpit" || u.Port() != "1025" {
			t.Errorf("service %s does not send to the mail catcher: EMAIL_PROVIDER %q SMTP_URL %q", name,
				s.Environment["EMAIL_PROVIDER"], s.Environment["SMTP_URL"])
		}
		if _, ok := s.DependsOn["mailpit"]; !ok {
			t.Errorf("service %s starts without the mail catcher", name)
		}
	}
	for _, want := range []string{"api", "worker", "worker-sends", "worker-segments", "worker-domains", "worker-webhooks"} {
		if _, ok := c.Services[want]; !ok {
			t.Errorf("no service %s", want)
		}
	}
	if tidings < 6 {
		t.Errorf("%d services run Tidings (OUTBOX_DIR set), want the api and 5 workers", tidings)
	}
}
