package rules

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// contactFixture describes one contact; times are relative to the
// transaction's now() so that boundaries ("exactly 30 days ago") are exact.
type contactFixture struct {
	props                string // JSON object; empty means {}
	sends, opens, clicks int64
	lastEvent            *time.Duration // ago; nil: lastEventAt null
	lastEventAt          string         // absolute, overrides lastEvent
	created              time.Duration  // ago
	events               []eventFixture
	topics               string // the contact's topic choices, JSON; empty means {}
}

type eventFixture struct {
	name    string
	ago     time.Duration
	tenant  string // another tenant's event when set
	other   bool   // another contact's event
	machine bool   // properties.machine: a machine's open or click
}

func ago(d time.Duration) *time.Duration { return &d }

// sharedCase is one row of the table that both evaluators must agree on.
type sharedCase struct {
	desc     string
	rule     string            // JSON
	segments map[string]string // segment id -> JSON rules, for segment leaves
	contact  contactFixture
	want     bool
}

// group wraps leaves into an and group, to keep the table short.
func and(leaves ...string) string {
	return `{"operator":"and","conditions":[` + strings.Join(leaves, ",") + `]}`
}

func prop(field, op string, value any) string {
	if value == nil {
		return fmt.Sprintf(`{"type":"property","field":%q,"operator":%q}`, field, op)
	}
	return fmt.Sprintf(`{"type":"property","field":%q,"operator":%q,"value":%v}`, field, op, value)
}

func derived(field, op string, value any) string {
	if value == nil {
		return fmt.Sprintf(`{"type":"derived","field":%q,"operator":%q}`, field, op)
	}
	return fmt.Sprintf(`{"type":"derived","field":%q,"operator":%q,"value":%v}`, field, op, value)
}

func seg(id, op string) string {
	return fmt.Sprintf(`{"type":"segment","segmentId":%q,"operator":%q}`, id, op)
}

func event(name, op, within string) string {
	if within == "" {
		return fmt.Sprintf(`{"type":"event","name":%q,"operator":%q}`, name, op)
	}
	return fmt.Sprintf(`{"type":"event","name":%q,"operator":%q,"within":%q}`, name, op, within)
}

// p builds a case on one property leaf against the properties JSON props.
func p(desc, props, field, op, value string, want bool) sharedCase {
	var v any
	if value != "" {
		v = value
	}
	return sharedCase{desc: desc, rule: and(prop(field, op, v)), contact: contactFixture{props: props}, want: want}
}

const injection = `it's "q"; DROP TABLE contacts; --`

// topic is a topic leaf; every fixture tenant has topics news (opt_out)
// and digest (opt_in).
func topic(id, op string) string {
	return `{"type":"topic","topic":"` + id + `","operator":"` + op + `"}`
}

var sharedCases = []sharedCase{
	// a machine's open or click is not engagement; a custom event's own
	// "machine" property is the tenant's business
	{desc: "machine open only", rule: event("email.opened", "occurred", ""),
		contact: contactFixture{events: []eventFixture{{name: "email.opened", ago: time.Minute, machine: true}}}, want: false},
	{desc: "machine and person opens", rule: event("email.opened", "occurred", ""),
		contact: contactFixture{events: []eventFixture{{name: "email.opened", ago: time.Minute, machine: true}, {name: "email.opened", ago: time.Hour}}}, want: true},
	{desc: "custom event with a machine property", rule: event("app.ping", "occurred", ""),
		contact: contactFixture{events: []eventFixture{{name: "app.ping", ago: time.Minute, machine: true}}}, want: true},

	// topic leaves: the contact's choice, else the topic's default; an
	// unknown topic has no subscribers whatever the contact chose
	{desc: "opt_out topic, no choice", rule: topic("news", "subscribed"), want: true},
	{desc: "opt_in topic, no choice", rule: topic("digest", "subscribed"), want: false},
	{desc: "opt_out topic, left", rule: topic("news", "subscribed"), contact: contactFixture{topics: `{"news": false}`}, want: false},
	{desc: "opt_in topic, joined", rule: topic("digest", "subscribed"), contact: contactFixture{topics: `{"digest": true}`}, want: true},
	{desc: "notSubscribed, left", rule: topic("news", "notSubscribed"), contact: contactFixture{topics: `{"news": false}`}, want: true},
	{desc: "notSubscribed opt_in, no choice", rule: topic("digest", "notSubscribed"), want: true},
	{desc: "unknown topic chosen", rule: topic("gone", "subscribed"), contact: contactFixture{topics: `{"gone": true}`}, want: false},
	{desc: "unknown topic, notSubscribed", rule: topic("gone", "notSubscribed"), want: true},

	// equals: type-strict, numbers by value
	p("equals string", `{"plan":"pro"}`, "plan", "equals", `"pro"`, true),
	p("equals is case-sensitive", `{"plan":"Pro"}`, "plan", "equals", `"pro"`, false),
	p("equals other string", `{"plan":"free"}`, "plan", "equals", `"pro"`, false),
	p("equals 1 matches 1.0", `{"n":1.0}`, "n", "equals", `1`, true),
	p("equals 1.0 matches 1e0", `{"n":1e0}`, "n", "equals", `1.0`, true),
	p("equals number vs string field", `{"n":"1"}`, "n", "equals", `1`, false),
	p("equals string vs number field", `{"n":1}`, "n", "equals", `"1"`, false),
	p("equals true", `{"b":true}`, "b", "equals", `true`, true),
	p("equals false vs true", `{"b":true}`, "b", "equals", `false`, false),
	p("equals bool vs string field", `{"b":"true"}`, "b", "equals", `true`, false),
	p("equals missing", `{}`, "plan", "equals", `"pro"`, false),
	p("equals null", `{"plan":null}`, "plan", "equals", `"pro"`, false),
	p("equals scalar vs array field", `{"tags":["pro"]}`, "tags", "equals", `"pro"`, false),
	p("equals big integers exactly", `{"n":12345678901234567891}`, "n", "equals", `12345678901234567891`, true),
	p("equals big integers differ in last digit", `{"n":12345678901234567891}`, "n", "equals", `12345678901234567890`, false),
	p("equals 0.1", `{"n":0.1}`, "n", "equals", `0.1`, true),
	p("equals empty string", `{"s":""}`, "s", "equals", `""`, true),
	p("equals unicode", `{"s":"Zoë 😀"}`, "s", "equals", `"Zoë 😀"`, true),
	p("notEquals same", `{"plan":"pro"}`, "plan", "notEquals", `"pro"`, false),
	p("notEquals other", `{"plan":"free"}`, "plan", "notEquals", `"pro"`, true),
	p("notEquals missing", `{}`, "plan", "notEquals", `"pro"`, true),
	p("notEquals null", `{"plan":null}`, "plan", "notEquals", `"pro"`, true),
	p("notEquals type mismatch", `{"n":"1"}`, "n", "notEquals", `1`, true),
	p("notEquals 1 vs 1.0", `{"n":1.0}`, "n", "notEquals", `1`, false),

	// ordering: numbers
	p("greaterThan numbers", `{"age":30}`, "age", "greaterThan", `18`, true),
	p("greaterThan equal", `{"age":18}`, "age", "greaterThan", `18`, false),
	p("greaterOrEqual equal", `{"age":18.0}`, "age", "greaterOrEqual", `18`, true),
	p("lessThan decimals", `{"x":0.1}`, "x", "lessThan", `0.2`, true),
	p("lessOrEqual negative", `{"x":-5}`, "x", "lessOrEqual", `-5`, true),
	p("lessThan negative", `{"x":-5}`, "x", "lessThan", `-5.5`, false),
	p("lessThan big integers", `{"n":12345678901234567890}`, "n", "lessThan", `12345678901234567891`, true),
	p("greaterThan exponent", `{"n":1e3}`, "n", "greaterThan", `999.999`, true),
	p("greaterThan number vs numeric string", `{"age":"30"}`, "age", "greaterThan", `18`, false),
	p("greaterThan number vs boolean", `{"age":true}`, "age", "greaterThan", `0`, false),
	p("greaterThan number vs array", `{"age":[30]}`, "age", "greaterThan", `18`, false),
	p("greaterThan missing", `{}`, "age", "greaterThan", `18`, false),
	p("lessThan null", `{"age":null}`, "age", "lessThan", `18`, false),

	// ordering: timestamps
	p("timestamp greaterThan date", `{"d":"2024-05-01T10:00:00Z"}`, "d", "greaterThan", `"2024-05-01"`, true),
	p("date equals midnight UTC", `{"d":"2024-05-01"}`, "d", "greaterOrEqual", `"2024-05-01T00:00:00Z"`, true),
	p("date not after midnight UTC", `{"d":"2024-05-01"}`, "d", "greaterThan", `"2024-05-01T00:00:00Z"`, false),
	p("offsets compare instants", `{"d":"2024-05-01T01:00:00+02:00"}`, "d", "lessThan", `"2024-05-01T00:00:00Z"`, true),
	p("negative offset", `{"d":"2024-04-30T20:30-04:00"}`, "d", "greaterThan", `"2024-05-01T00:29:59Z"`, true),
	p("microseconds", `{"d":"2024-05-01T10:00:00.000001Z"}`, "d", "greaterThan", `"2024-05-01T10:00:00Z"`, true),
	p("milliseconds equal", `{"d":"2024-05-01T10:00:00.500Z"}`, "d", "lessOrEqual", `"2024-05-01T10:00:00.5Z"`, true),
	p("leap day", `{"d":"2024-02-29"}`, "d", "greaterThan", `"2024-02-28"`, true),
	p("leap day 2000", `{"d":"2000-02-29T12:00Z"}`, "d", "lessThan", `"2000-03-01"`, true),
	p("invalid day is no timestamp", `{"d":"2023-02-29"}`, "d", "greaterThan", `"2000-01-01"`, false),
	p("1900 is no leap year", `{"d":"1900-02-29"}`, "d", "greaterThan", `"1000-01-01"`, false),
	p("april 31st is no day", `{"d":"2024-04-31T00:00:00Z"}`, "d", "lessThan", `"2030-01-01"`, false),
	p("month 13 is no timestamp", `{"d":"2024-13-01"}`, "d", "lessThan", `"2030-01-01"`, false),
	p("year 0099", `{"d":"0099-12-31"}`, "d", "lessThan", `"1000-01-01"`, true),
	p("no offset is no timestamp", `{"d":"2024-05-01T10:00:00"}`, "d", "lessThan", `"2030-01-01"`, false),
	p("space separator is no timestamp", `{"d":"2024-05-01 10:00:00Z"}`, "d", "lessThan", `"2030-01-01"`, false),
	p("seven fraction digits", `{"d":"2024-05-01T10:00:00.1234567Z"}`, "d", "lessThan", `"2030-01-01"`, false),
	p("leap second", `{"d":"2016-12-31T23:59:60Z"}`, "d", "lessThan", `"2030-01-01"`, false),
	p("words are no timestamp", `{"d":"yesterday"}`, "d", "lessThan", `"2030-01-01"`, false),
	p("postgres specials are no timestamp", `{"d":"epoch"}`, "d", "lessThan", `"2030-01-01"`, false),
	p("timestamp vs number field", `{"d":20240501}`, "d", "lessThan", `"2030-01-01"`, false),
	p("number vs timestamp field", `{"d":"2024-05-01"}`, "d", "greaterThan", `5`, false),
	p("timestamp vs missing", `{}`, "d", "lessThan", `"2030-01-01"`, false),
	p("timestamp vs array", `{"d":["2024-05-01"]}`, "d", "lessThan", `"2030-01-01"`, false),

	// string operators
	p("contains", `{"email":"ann@example.com"}`, "email", "contains", `"@example."`, true),
	p("contains is case-sensitive", `{"email":"ann@Example.com"}`, "email", "contains", `"example"`, false),
	p("contains empty string", `{"s":"abc"}`, "s", "contains", `""`, true),
	p("contains percent literally", `{"s":"100%"}`, "s", "contains", `"%"`, true),
	p("contains underscore literally", `{"s":"abc"}`, "s", "contains", `"_"`, false),
	p("contains on number field", `{"n":123}`, "n", "contains", `"2"`, false),
	p("contains on array field", `{"tags":["abc"]}`, "tags", "contains", `"abc"`, false),
	p("contains missing", `{}`, "s", "contains", `"a"`, false),
	p("notContains", `{"s":"abc"}`, "s", "notContains", `"b"`, false),
	p("notContains absent substring", `{"s":"abc"}`, "s", "notContains", `"x"`, true),
	p("notContains missing", `{}`, "s", "notContains", `"x"`, true),
	p("notContains on number field", `{"n":123}`, "n", "notContains", `"2"`, true),
	p("startsWith", `{"s":"Ünïcødé"}`, "s", "startsWith", `"Ün"`, true),
	p("startsWith wildcard literally", `{"s":"abc"}`, "s", "startsWith", `"_"`, false),
	p("startsWith longer than field", `{"s":"ab"}`, "s", "startsWith", `"abc"`, false),
	p("startsWith on boolean", `{"s":true}`, "s", "startsWith", `"t"`, false),
	p("endsWith", `{"s":"Ünïcødé"}`, "s", "endsWith", `"dé"`, true),
	p("endsWith whole string", `{"s":"abc"}`, "s", "endsWith", `"abc"`, true),
	p("endsWith longer than field", `{"s":"bc"}`, "s", "endsWith", `"abc"`, false),
	p("endsWith case", `{"s":"abC"}`, "s", "endsWith", `"c"`, false),
	p("endsWith missing", `{}`, "s", "endsWith", `""`, false),

	// arrays
	p("includes", `{"tags":["a","b"]}`, "tags", "includes", `"a"`, true),
	p("includes absent", `{"tags":["a","b"]}`, "tags", "includes", `"c"`, false),
	p("includes number by value", `{"tags":[1.0,2]}`, "tags", "includes", `1`, true),
	p("includes is type-strict", `{"tags":[1]}`, "tags", "includes", `"1"`, false),
	p("includes boolean", `{"tags":[false]}`, "tags", "includes", `false`, true),
	p("includes on scalar field", `{"tags":"a"}`, "tags", "includes", `"a"`, false),
	p("includes on empty array", `{"tags":[]}`, "tags", "includes", `"a"`, false),
	p("includes missing", `{}`, "tags", "includes", `"a"`, false),
	p("notIncludes", `{"tags":["a"]}`, "tags", "notIncludes", `"a"`, false),
	p("notIncludes absent", `{"tags":["a"]}`, "tags", "notIncludes", `"b"`, true),
	p("notIncludes on scalar field", `{"tags":"a"}`, "tags", "notIncludes", `"a"`, true),
	p("notIncludes missing", `{}`, "tags", "notIncludes", `"a"`, true),
	p("includesAll", `{"tags":["a","b","c"]}`, "tags", "includesAll", `["a","c"]`, true),
	p("includesAll partly", `{"tags":["a"]}`, "tags", "includesAll", `["a","b"]`, false),
	p("includesAll duplicates", `{"tags":["a"]}`, "tags", "includesAll", `["a","a"]`, true),
	p("includesAll on scalar field", `{"tags":"a"}`, "tags", "includesAll", `["a"]`, false),
	p("includesAll mixed types", `{"tags":[1,"x",true]}`, "tags", "includesAll", `[true,1.0]`, true),
	p("includesAny", `{"tags":["a","b"]}`, "tags", "includesAny", `["x","b"]`, true),
	p("includesAny none", `{"tags":["a","b"]}`, "tags", "includesAny", `["x","y"]`, false),
	p("includesAny type-strict", `{"tags":["1"]}`, "tags", "includesAny", `[1,true]`, false),
	p("includesAny on scalar field", `{"tags":"x"}`, "tags", "includesAny", `["x"]`, false),
	p("includesAny missing", `{}`, "tags", "includesAny", `["x"]`, false),

	// exists
	p("exists", `{"s":"x"}`, "s", "exists", "", true),
	p("exists empty string", `{"s":""}`, "s", "exists", "", true),
	p("exists false", `{"s":false}`, "s", "exists", "", true),
	p("exists empty array", `{"s":[]}`, "s", "exists", "", true),
	p("exists null", `{"s":null}`, "s", "exists", "", false),
	p("exists missing", `{}`, "s", "exists", "", false),
	p("notExists null", `{"s":null}`, "s", "notExists", "", true),
	p("notExists missing", `{}`, "s", "notExists", "", true),
	p("notExists present", `{"s":0}`, "s", "notExists", "", false),

	// field names are data, never SQL
	p("field name with quotes and SQL", `{"it's \"q\"; DROP TABLE contacts; --":"x"}`, injection, "equals", `"x"`, true),
	p("value with quotes and SQL", `{"s":"'); DELETE FROM contacts; --"}`, "s", "equals", `"'); DELETE FROM contacts; --"`, true),
	p("contains quote", `{"s":"O'Brien"}`, "s", "contains", `"'B"`, true),
	p("field name with placeholder", `{"$1":5}`, "$1", "greaterThan", `4`, true),
	p("field name with backslash", `{"a\\b":"2024-01-01"}`, `a\b`, "lessThan", `"2025-01-01"`, true),
	p("dot is part of the key", `{"address":{"city":"x"},"address.city":"y"}`, "address.city", "equals", `"y"`, true),
	p("object field matches nothing", `{"o":{"a":1}}`, "o", "includes", `"a"`, false),
	p("object field exists", `{"o":{"a":1}}`, "o", "exists", "", true),

	// groups
	{desc: "and all true", rule: and(prop("a", "equals", 1), prop("b", "equals", 2)),
		contact: contactFixture{props: `{"a":1,"b":2}`}, want: true},
	{desc: "and one false", rule: and(prop("a", "equals", 1), prop("b", "equals", 3)),
		contact: contactFixture{props: `{"a":1,"b":2}`}, want: false},
	{desc: "or one true", rule: `{"operator":"or","conditions":[` + prop("a", "equals", 9) + `,` + prop("b", "equals", 2) + `]}`,
		contact: contactFixture{props: `{"a":1,"b":2}`}, want: true},
	{desc: "or none true", rule: `{"operator":"or","conditions":[` + prop("a", "equals", 9) + `,` + prop("b", "equals", 9) + `]}`,
		contact: contactFixture{props: `{"a":1,"b":2}`}, want: false},
	{desc: "not: none of several holds", rule: `{"operator":"not","conditions":[` + prop("a", "equals", 9) + `,` + prop("b", "equals", 9) + `,` + prop("c", "exists", nil) + `]}`,
		contact: contactFixture{props: `{"a":1,"b":2}`}, want: true},
	{desc: "not: one of several holds", rule: `{"operator":"not","conditions":[` + prop("a", "equals", 9) + `,` + prop("b", "equals", 2) + `]}`,
		contact: contactFixture{props: `{"a":1,"b":2}`}, want: false},
	{desc: "not over missing-field comparisons stays two-valued", rule: `{"operator":"not","conditions":[` + prop("x", "greaterThan", 1) + `,` + prop("x", "contains", `"a"`) + `,` + prop("x", "lessThan", `"2024-01-01"`) + `]}`,
		contact: contactFixture{props: `{}`}, want: true},
	{desc: "empty and", rule: `{"operator":"and","conditions":[]}`, want: true},
	{desc: "empty or", rule: `{"operator":"or","conditions":[]}`, want: false},
	{desc: "empty not", rule: `{"operator":"not","conditions":[]}`, want: true},
	{desc: "nested four levels", rule: `{"operator":"or","conditions":[` + prop("a", "equals", 9) + `,{"operator":"and","conditions":[` + prop("a", "equals", 1) +
		`,{"operator":"not","conditions":[{"operator":"or","conditions":[` + prop("b", "equals", 9) + `,` + prop("c", "exists", nil) + `]}]}]}]}`,
		contact: contactFixture{props: `{"a":1,"b":2}`}, want: true},
	{desc: "nested four levels, innermost holds", rule: `{"operator":"or","conditions":[` + prop("a", "equals", 9) + `,{"operator":"and","conditions":[` + prop("a", "equals", 1) +
		`,{"operator":"not","conditions":[{"operator":"or","conditions":[` + prop("b", "equals", 9) + `,` + prop("b", "exists", nil) + `]}]}]}]}`,
		contact: contactFixture{props: `{"a":1,"b":2}`}, want: false},

	// derived counters
	{desc: "totalSends equals", rule: and(derived("totalSends", "equals", 3)), contact: contactFixture{sends: 3}, want: true},
	{desc: "totalSends equals 3.0", rule: and(derived("totalSends", "equals", "3.0")), contact: contactFixture{sends: 3}, want: true},
	{desc: "totalSends equals fraction", rule: and(derived("totalSends", "equals", 2.5)), contact: contactFixture{sends: 2}, want: false},
	{desc: "totalSends notEquals fraction", rule: and(derived("totalSends", "notEquals", 2.5)), contact: contactFixture{sends: 2}, want: true},
	{desc: "totalSends greaterThan fraction", rule: and(derived("totalSends", "greaterThan", 2.5)), contact: contactFixture{sends: 3}, want: true},
	{desc: "totalSends greaterThan fraction below", rule: and(derived("totalSends", "greaterThan", 2.5)), contact: contactFixture{sends: 2}, want: false},
	{desc: "totalOpens greaterOrEqual fraction", rule: and(derived("totalOpens", "greaterOrEqual", 2.5)), contact: contactFixture{opens: 2}, want: false},
	{desc: "totalOpens lessThan fraction", rule: and(derived("totalOpens", "lessThan", 2.5)), contact: contactFixture{opens: 2}, want: true},
	{desc: "totalOpens lessOrEqual fraction", rule: and(derived("totalOpens", "lessOrEqual", 2.5)), contact: contactFixture{opens: 3}, want: false},
	{desc: "totalOpens lessOrEqual negative fraction", rule: and(derived("totalOpens", "lessOrEqual", -0.5)), contact: contactFixture{opens: 0}, want: false},
	{desc: "totalClicks greaterThan huge", rule: and(derived("totalClicks", "greaterThan", "1e30")), contact: contactFixture{clicks: 5}, want: false},
	{desc: "totalClicks lessThan huge", rule: and(derived("totalClicks", "lessThan", "1e30")), contact: contactFixture{clicks: 5}, want: true},
	{desc: "totalClicks greaterThan very negative", rule: and(derived("totalClicks", "greaterThan", "-1e30")), contact: contactFixture{clicks: 0}, want: true},
	{desc: "totalClicks equals huge", rule: and(derived("totalClicks", "equals", "1e30")), contact: contactFixture{clicks: 0}, want: false},
	{desc: "totalClicks exists", rule: and(derived("totalClicks", "exists", nil)), want: true},
	{desc: "totalClicks notExists", rule: and(derived("totalClicks", "notExists", nil)), want: false},

	// lastEventAt
	{desc: "lastEventAt null: exists", rule: and(derived("lastEventAt", "exists", nil)), want: false},
	{desc: "lastEventAt null: notExists", rule: and(derived("lastEventAt", "notExists", nil)), want: true},
	{desc: "lastEventAt null: greaterThan", rule: and(derived("lastEventAt", "greaterThan", `"2000-01-01"`)), want: false},
	{desc: "lastEventAt null: lessThan", rule: and(derived("lastEventAt", "lessThan", `"2999-01-01"`)), want: false},
	{desc: "lastEventAt null: notEquals", rule: and(derived("lastEventAt", "notEquals", `"2024-01-01"`)), want: true},
	{desc: "lastEventAt exists", rule: and(derived("lastEventAt", "exists", nil)), contact: contactFixture{lastEvent: ago(time.Hour)}, want: true},
	{desc: "lastEventAt greaterThan", rule: and(derived("lastEventAt", "greaterThan", `"2024-05-01T00:00:00Z"`)),
		contact: contactFixture{lastEventAt: "2024-05-01T00:00:00.001Z"}, want: true},
	{desc: "lastEventAt equals instant in another offset", rule: and(derived("lastEventAt", "equals", `"2024-05-01T02:00:00+02:00"`)),
		contact: contactFixture{lastEventAt: "2024-05-01T00:00:00Z"}, want: true},
	{desc: "lastEventAt notEquals same instant", rule: and(derived("lastEventAt", "notEquals", `"2024-05-01"`)),
		contact: contactFixture{lastEventAt: "2024-05-01T00:00:00Z"}, want: false},
	{desc: "lastEventAt lessOrEqual", rule: and(derived("lastEventAt", "lessOrEqual", `"2024-05-01"`)),
		contact: contactFixture{lastEventAt: "2024-05-01T00:00:00Z"}, want: true},

	// inactiveDays
	{desc: "inactiveDays from createdAt", rule: and(derived("inactiveDays", "equals", 10)), contact: contactFixture{created: 10 * Day}, want: true},
	{desc: "inactiveDays one second short", rule: and(derived("inactiveDays", "equals", 9)), contact: contactFixture{created: 10*Day - time.Second}, want: true},
	{desc: "inactiveDays one microsecond short", rule: and(derived("inactiveDays", "greaterOrEqual", 10)), contact: contactFixture{created: 10*Day - time.Microsecond}, want: false},
	{desc: "inactiveDays exactly 30 days", rule: and(derived("inactiveDays", "greaterOrEqual", 30)), contact: contactFixture{created: 30 * Day}, want: true},
	{desc: "inactiveDays greaterThan 9", rule: and(derived("inactiveDays", "greaterThan", 9)), contact: contactFixture{created: 10 * Day}, want: true},
	{desc: "inactiveDays greaterThan 10", rule: and(derived("inactiveDays", "greaterThan", 10)), contact: contactFixture{created: 10*Day + 23*time.Hour}, want: false},
	{desc: "inactiveDays greaterOrEqual 9.5", rule: and(derived("inactiveDays", "greaterOrEqual", 9.5)), contact: contactFixture{created: 10 * Day}, want: true},
	{desc: "inactiveDays lessThan 10.5", rule: and(derived("inactiveDays", "lessThan", 10.5)), contact: contactFixture{created: 10 * Day}, want: true},
	{desc: "inactiveDays lessOrEqual 9.5", rule: and(derived("inactiveDays", "lessOrEqual", 9.5)), contact: contactFixture{created: 10 * Day}, want: false},
	{desc: "inactiveDays equals fraction", rule: and(derived("inactiveDays", "equals", 10.5)), contact: contactFixture{created: 10 * Day}, want: false},
	{desc: "inactiveDays notEquals", rule: and(derived("inactiveDays", "notEquals", 10)), contact: contactFixture{created: 11 * Day}, want: true},
	{desc: "inactiveDays from lastEventAt", rule: and(derived("inactiveDays", "equals", 3)),
		contact: contactFixture{created: 100 * Day, lastEvent: ago(3*Day + time.Hour)}, want: true},
	{desc: "inactiveDays lastEventAt wins over createdAt", rule: and(derived("inactiveDays", "greaterThan", 50)),
		contact: contactFixture{created: 100 * Day, lastEvent: ago(3 * Day)}, want: false},
	{desc: "inactiveDays future event is 0", rule: and(derived("inactiveDays", "equals", 0)),
		contact: contactFixture{created: 100 * Day, lastEvent: ago(-3 * time.Minute)}, want: true},
	{desc: "inactiveDays new contact", rule: and(derived("inactiveDays", "lessThan", 1)), want: true},
	{desc: "inactiveDays greaterOrEqual 0", rule: and(derived("inactiveDays", "greaterOrEqual", 0)), want: true},
	{desc: "inactiveDays lessThan 0", rule: and(derived("inactiveDays", "lessThan", 0)), contact: contactFixture{created: 5 * Day}, want: false},
	{desc: "inactiveDays greaterThan -3", rule: and(derived("inactiveDays", "greaterThan", -3)), want: true},
	{desc: "inactiveDays greaterThan huge", rule: and(derived("inactiveDays", "greaterThan", "1e9")), contact: contactFixture{created: 5000 * Day}, want: false},
	{desc: "inactiveDays lessThan huge", rule: and(derived("inactiveDays", "lessThan", "1e9")), contact: contactFixture{created: 5000 * Day}, want: true},
	{desc: "inactiveDays equals 0 after a day", rule: and(derived("inactiveDays", "equals", 0)), contact: contactFixture{created: Day}, want: false},

	// segments, two levels deep
	{desc: "memberOf", rule: and(seg("seg_nl", "memberOf")),
		segments: map[string]string{"seg_nl": and(prop("country", "equals", `"NL"`))},
		contact:  contactFixture{props: `{"country":"NL"}`}, want: true},
	{desc: "memberOf non-member", rule: and(seg("seg_nl", "memberOf")),
		segments: map[string]string{"seg_nl": and(prop("country", "equals", `"NL"`))},
		contact:  contactFixture{props: `{"country":"DE"}`}, want: false},
	{desc: "notMemberOf", rule: and(seg("seg_nl", "notMemberOf")),
		segments: map[string]string{"seg_nl": and(prop("country", "equals", `"NL"`))},
		contact:  contactFixture{props: `{"country":"DE"}`}, want: true},
	{desc: "two levels deep: member", rule: and(seg("seg_active_nl", "memberOf"), prop("plan", "equals", `"pro"`)),
		segments: map[string]string{
			"seg_active_nl": and(seg("seg_nl", "memberOf"), derived("totalOpens", "greaterThan", 0)),
			"seg_nl":        and(prop("country", "equals", `"NL"`)),
		},
		contact: contactFixture{props: `{"country":"NL","plan":"pro"}`, opens: 1}, want: true},
	{desc: "two levels deep: inner fails", rule: and(seg("seg_active_nl", "memberOf"), prop("plan", "equals", `"pro"`)),
		segments: map[string]string{
			"seg_active_nl": and(seg("seg_nl", "memberOf"), derived("totalOpens", "greaterThan", 0)),
			"seg_nl":        and(prop("country", "equals", `"NL"`)),
		},
		contact: contactFixture{props: `{"country":"BE","plan":"pro"}`, opens: 1}, want: false},
	{desc: "two levels deep with notMemberOf inside", rule: and(seg("seg_outer", "memberOf")),
		segments: map[string]string{
			"seg_outer": `{"operator":"or","conditions":[` + seg("seg_inner", "notMemberOf") + `,` + prop("vip", "equals", "true") + `]}`,
			"seg_inner": and(prop("country", "equals", `"NL"`), event("purchase", "occurred", "")),
		},
		contact: contactFixture{props: `{"country":"NL"}`, events: []eventFixture{{name: "purchase", ago: Day}}}, want: false},
	{desc: "two levels deep with notMemberOf inside, not a member", rule: and(seg("seg_outer", "memberOf")),
		segments: map[string]string{
			"seg_outer": `{"operator":"or","conditions":[` + seg("seg_inner", "notMemberOf") + `,` + prop("vip", "equals", "true") + `]}`,
			"seg_inner": and(prop("country", "equals", `"NL"`), event("purchase", "occurred", "")),
		},
		contact: contactFixture{props: `{"country":"NL"}`}, want: true},
	{desc: "same segment referenced twice", rule: `{"operator":"or","conditions":[` + seg("seg_nl", "notMemberOf") + `,` + seg("seg_nl", "memberOf") + `]}`,
		segments: map[string]string{"seg_nl": and(prop("country", "equals", `"NL"`))}, want: true},

	// events
	{desc: "occurred", rule: and(event("purchase.completed", "occurred", "")),
		contact: contactFixture{events: []eventFixture{{name: "purchase.completed", ago: 400 * Day}}}, want: true},
	{desc: "occurred none", rule: and(event("purchase.completed", "occurred", "")), want: false},
	{desc: "notOccurred none", rule: and(event("purchase.completed", "notOccurred", "")), want: true},
	{desc: "notOccurred some", rule: and(event("purchase.completed", "notOccurred", "")),
		contact: contactFixture{events: []eventFixture{{name: "purchase.completed", ago: time.Hour}}}, want: false},
	{desc: "event names are case-sensitive", rule: and(event("purchase", "occurred", "")),
		contact: contactFixture{events: []eventFixture{{name: "Purchase", ago: time.Hour}}}, want: false},
	{desc: "within: recent", rule: and(event("page_view", "occurred", "1d")),
		contact: contactFixture{events: []eventFixture{{name: "page_view", ago: 2 * time.Hour}}}, want: true},
	{desc: "within: too old", rule: and(event("page_view", "occurred", "1d")),
		contact: contactFixture{events: []eventFixture{{name: "page_view", ago: 2 * Day}}}, want: false},
	{desc: "within: boundary is inclusive", rule: and(event("page_view", "occurred", "1d")),
		contact: contactFixture{events: []eventFixture{{name: "page_view", ago: Day}}}, want: true},
	{desc: "within: just outside", rule: and(event("page_view", "occurred", "30s")),
		contact: contactFixture{events: []eventFixture{{name: "page_view", ago: 30*time.Second + time.Microsecond}}}, want: false},
	{desc: "within: future event counts", rule: and(event("page_view", "occurred", "1h")),
		contact: contactFixture{events: []eventFixture{{name: "page_view", ago: -2 * time.Minute}}}, want: true},
	{desc: "within: one of several", rule: and(event("page_view", "occurred", "2w")),
		contact: contactFixture{events: []eventFixture{{name: "page_view", ago: 30 * Day}, {name: "page_view", ago: 13 * Day}}}, want: true},
	{desc: "notOccurred within, only old ones", rule: and(event("page_view", "notOccurred", "5m")),
		contact: contactFixture{events: []eventFixture{{name: "page_view", ago: 6 * time.Minute}}}, want: true},
	{desc: "another tenant's event", rule: and(event("purchase", "occurred", "")),
		contact: contactFixture{events: []eventFixture{{name: "purchase", ago: time.Hour, tenant: "other_tenant"}}}, want: false},
	{desc: "another contact's event", rule: and(event("purchase", "occurred", "")),
		contact: contactFixture{events: []eventFixture{{name: "purchase", ago: time.Hour, other: true}}}, want: false},
	{desc: "event name with quotes", rule: and(event(injection, "occurred", "1h")),
		contact: contactFixture{events: []eventFixture{{name: injection, ago: time.Minute}}}, want: true},

	// a realistic mix
	{desc: "mixed rule", rule: `{"operator":"and","conditions":[` +
		prop("plan", "equals", `"pro"`) + `,` +
		`{"operator":"or","conditions":[` + prop("tags", "includesAny", `["beta","vip"]`) + `,` + derived("totalClicks", "greaterOrEqual", 5) + `]},` +
		`{"operator":"not","conditions":[` + event("churned", "occurred", "30d") + `,` + derived("inactiveDays", "greaterThan", 60) + `]},` +
		prop("signup", "lessThan", `"2024-06-01T00:00:00+02:00"`) + `]}`,
		contact: contactFixture{props: `{"plan":"pro","tags":["vip"],"signup":"2024-05-31T21:59:59Z"}`, created: 90 * Day, lastEvent: ago(Day),
			events: []eventFixture{{name: "churned", ago: 31 * Day}}}, want: true},
}

func TestSharedCasesGoAndSQL(t *testing.T) {
	pool := needDB(t)
	t.Parallel()
	for i, tc := range sharedCases {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			rule := mustParse(t, tc.rule)
			segments := map[string]*Node{}
			for id, raw := range tc.segments {
				segments[id] = mustParse(t, raw)
			}
			resolve := func(id string) (*Node, bool) { n, ok := segments[id]; return n, ok }

			const argStart = 3
			pred, args, err := ToSQL(rule, resolve, argStart)
			if err != nil {
				t.Fatalf("ToSQL: %v", err)
			}
			if strings.Contains(pred, injection) || strings.Contains(pred, "DROP") || strings.Contains(pred, "DELETE") {
				t.Fatalf("user text spliced into SQL: %s", pred)
			}

			ctx := context.Background()
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx) // nothing a case writes outlives it

			tenant := fmt.Sprintf("ten_case_%d", i)
			subject, env := insertFixture(t, tx, tenant, "cnt_1", tc.contact)
			env.Segment = resolve

			var sqlGot *bool
			q := "SELECT (" + pred + ") FROM contacts c WHERE c.tenant_id = $1 AND c.id = $2"
			if err := tx.QueryRow(ctx, q, append([]any{tenant, "cnt_1"}, args...)...).Scan(&sqlGot); err != nil {
				t.Fatalf("SQL: %v\n%s\nargs %v", err, pred, args)
			}
			if sqlGot == nil {
				t.Fatalf("SQL predicate is NULL\n%s\nargs %v", pred, args)
			}
			// The same predicate in the WHERE clause, the way segment compute uses it.
			var ids []string
			rows, err := tx.Query(ctx, "SELECT c.id FROM contacts c WHERE c.tenant_id = $1 AND c.id = $2 AND ("+pred+")", append([]any{tenant, "cnt_1"}, args...)...)
			if err == nil {
				ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
			}
			if err != nil {
				t.Fatalf("SQL WHERE: %v", err)
			}
			goGot := Eval(rule, subject, env)

			if *sqlGot != tc.want || goGot != tc.want || (len(ids) == 1) != tc.want {
				t.Errorf("want %v; Go %v, SQL %v, SQL WHERE %v\nrule %s\nSQL  %s\nargs %v",
					tc.want, goGot, *sqlGot, ids, tc.rule, pred, args)
			}
		})
	}
}

func mustParse(t testing.TB, raw string) *Node {
	t.Helper()
	n, err := Parse(json.RawMessage(raw), Options{})
	if err != nil {
		t.Fatalf("Parse(%s): %v", raw, err)
	}
	return n
}

// insertFixture writes the contact (and a second contact of the same tenant,
// for "another contact's event") and its events, then reads the contact back
// the way the service would, so Go evaluates exactly what SQL sees. now is
// the transaction's now(), the instant SQL evaluates at.
func insertFixture(t testing.TB, tx pgx.Tx, tenant, id string, f contactFixture) (Subject, Env) {
	t.Helper()
	ctx := context.Background()
	var now time.Time
	if err := tx.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
		t.Fatal(err)
	}
	props := f.props
	if props == "" {
		props = "{}"
	}
	var lastEventAt *time.Time
	switch {
	case f.lastEventAt != "":
		ts, ok := parseTimestamp(f.lastEventAt)
		if !ok {
			t.Fatalf("bad fixture timestamp %q", f.lastEventAt)
		}
		lastEventAt = &ts
	case f.lastEvent != nil:
		ts := now.Add(-*f.lastEvent)
		lastEventAt = &ts
	}
	ensureTenant(t, tx, tenant)
	if _, err := tx.Exec(ctx, `INSERT INTO topics (tenant_id, id, name, default_mode) VALUES ($1, 'news', 'News', 'opt_out'),
		($1, 'digest', 'Digest', 'opt_in') ON CONFLICT DO NOTHING`, tenant); err != nil {
		t.Fatalf("insert topics: %v", err)
	}
	topics := f.topics
	if topics == "" {
		topics = "{}"
	}
	for _, cid := range []string{id, id + "_other"} {
		if _, err := tx.Exec(ctx, `INSERT INTO contacts (tenant_id, id, email, properties, total_sends, total_opens, total_clicks, last_event_at, created_at, topics)
			VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7, $8, $9, $10::jsonb)`,
			tenant, cid, cid+"@example.com", props, f.sends, f.opens, f.clicks, lastEventAt, now.Add(-f.created), topics); err != nil {
			t.Fatalf("insert contact: %v", err)
		}
	}
	for i, e := range f.events {
		evTenant, evContact := tenant, id
		if e.tenant != "" {
			evTenant = e.tenant
		}
		if e.other {
			evContact = id + "_other"
		}
		if evTenant != tenant {
			// The same contact id in another tenant: its events must not count.
			ensureTenant(t, tx, evTenant)
			if _, err := tx.Exec(ctx, `INSERT INTO contacts (tenant_id, id, email) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
				evTenant, evContact, evContact+"@example.com"); err != nil {
				t.Fatalf("insert contact: %v", err)
			}
		}
		props := "{}"
		if e.machine {
			props = `{"machine": true}`
		}
		if _, err := tx.Exec(ctx, `INSERT INTO events (tenant_id, id, contact_id, name, occurred_at, properties) VALUES ($1, $2, $3, $4, $5, $6::jsonb)`,
			evTenant, fmt.Sprintf("evt_%s_%d", tenant, i), evContact, e.name, now.Add(-e.ago), props); err != nil {
			t.Fatalf("insert event: %v", err)
		}
	}
	return loadSubject(t, tx, tenant, id, now)
}

// loadSubject reads a contact and its events into a Subject and an Env whose
// HasEvent answers from the events read.
func loadSubject(t testing.TB, tx pgx.Tx, tenant, id string, now time.Time) (Subject, Env) {
	t.Helper()
	ctx := context.Background()
	var (
		s         Subject
		raw, tops []byte
	)
	err := tx.QueryRow(ctx, `SELECT properties::text, total_sends, total_opens, total_clicks, last_event_at, created_at, topics::text
		FROM contacts WHERE tenant_id = $1 AND id = $2`, tenant, id).
		Scan(&raw, &s.TotalSends, &s.TotalOpens, &s.TotalClicks, &s.LastEventAt, &s.CreatedAt, &tops)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(tops, &s.Topics); err != nil {
		t.Fatal(err)
	}
	defaults := map[string]bool{}
	trows, err := tx.Query(ctx, `SELECT id, default_mode = 'opt_out' FROM topics WHERE tenant_id = $1`, tenant)
	if err != nil {
		t.Fatal(err)
	}
	for trows.Next() {
		var tid string
		var optOut bool
		_ = trows.Scan(&tid, &optOut)
		defaults[tid] = optOut
	}
	trows.Close()
	if s.Properties, err = DecodeProperties(raw); err != nil {
		t.Fatal(err)
	}
	type ev struct {
		name string
		at   time.Time
	}
	// What the service's HasEvent (EnrolmentHasEvent) counts: a machine's
	// opens and clicks left out.
	rows, err := tx.Query(ctx, `SELECT name, occurred_at FROM events WHERE tenant_id = $1 AND contact_id = $2
		AND NOT (name IN ('email.opened', 'email.clicked') AND properties @> '{"machine": true}')`, tenant, id)
	if err != nil {
		t.Fatal(err)
	}
	events, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ev, error) {
		var e ev
		return e, r.Scan(&e.name, &e.at)
	})
	if err != nil {
		t.Fatal(err)
	}
	env := Env{Now: now, TopicOptOut: func(id string) (bool, bool) { v, ok := defaults[id]; return v, ok },
		HasEvent: func(name string, after time.Time) bool {
			for _, e := range events {
				if e.name == name && !e.at.Before(after) {
					return true
				}
			}
			return false
		}}
	return s, env
}
