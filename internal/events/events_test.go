package events

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestValidateName(t *testing.T) {
	t.Parallel()
	for name, ok := range map[string]bool{"purchase.completed": true, "page_view": true, "Email.x": true,
		"": false, "  ": false, "a\x00b": false, "\xff": false, "email.sent": false, "email.custom": false} {
		if (ValidateName(name) == nil) != ok {
			t.Errorf("%q: ok=%v", name, !ok)
		}
	}
}

func TestValidateProperties(t *testing.T) {
	t.Parallel()
	good := map[string]json.RawMessage{"s": json.RawMessage(`"x"`), "n": json.RawMessage(`-1.5e3`), "b": json.RawMessage(`false`)}
	out, err := ValidateProperties(good)
	if err != nil || string(out) != `{"b":false,"n":-1.5e3,"s":"x"}` {
		t.Fatalf("%s %v", out, err)
	}
	for _, bad := range []string{`null`, `[1]`, `{"a":1}`,
		`1e131072`, `1e-16384`, `1e99999`, `1e20`, // outside PostgreSQL's numeric, or absurdly long written out
		`"\ud800"`, `"a\u0000"`, "\"\xff\"", // text PostgreSQL cannot hold
		`"` + strings.Repeat("x", 4097) + `"`,
	} {
		if _, err := ValidateProperties(map[string]json.RawMessage{"k": json.RawMessage(bad)}); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	many := map[string]json.RawMessage{}
	for i := range 201 {
		many[strconv.Itoa(i)] = json.RawMessage(`1`)
	}
	for desc, props := range map[string]map[string]json.RawMessage{
		"201 keys": many, "empty key": {"": json.RawMessage(`1`)},
		"long key": {strings.Repeat("k", 129): json.RawMessage(`1`)}, "NUL in key": {"a\x00": json.RawMessage(`1`)},
	} {
		if _, err := ValidateProperties(props); err == nil {
			t.Errorf("%s accepted", desc)
		}
	}
	if _, err := ValidateProperties(map[string]json.RawMessage{"n": json.RawMessage(`99999999999999999999`),
		"f": json.RawMessage(`1e-20`), "s": json.RawMessage(`"` + strings.Repeat("x", 4096) + `"`)}); err != nil {
		t.Fatalf("values at the limits refused: %v", err)
	}
	if out, _ := ValidateProperties(nil); string(out) != "{}" {
		t.Fatalf("%s", out)
	}
}

func TestValidateTimestamp(t *testing.T) {
	t.Parallel()
	now := time.Now()
	if ValidateTimestamp(now.Add(5*time.Minute), now) != nil || ValidateTimestamp(now.Add(-48*time.Hour), now) != nil {
		t.Fatal("valid timestamps refused")
	}
	if ValidateTimestamp(now.Add(5*time.Minute+time.Second), now) == nil {
		t.Fatal("timestamp beyond 5 minutes accepted")
	}
}

func TestTimelineType(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{Sent: "send", Delivered: "delivered", Opened: "opened", Clicked: "clicked",
		Bounced: "bounced", Complained: "complained", Unsubscribed: "unsubscribed", "signup": "event"} {
		if got := TimelineType(name); got != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
}
