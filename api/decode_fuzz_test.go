package api

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"tidings/internal/apperr"
	"tidings/internal/storable"
)

// bodyTargets are the request bodies of the handlers, each decoded with
// decodeBytes (what decodeJSON does after its content-type check) and
// validated as its handler does before the domain call. value is what the
// handler passes on.
var bodyTargets = []struct {
	name   string
	decode func(body []byte) (value any, err error)
}{
	{"tenantCreate", decodeOnly[tenantCreateReq]},
	{"tenantUpdate", func(b []byte) (any, error) {
		var r tenantUpdateReq
		if err := decodeBytes(b, &r); err != nil {
			return nil, err
		}
		return r.validate()
	}},
	{"whitelist", decodeOnly[whitelistReq]},
	{"apiKeyCreate", decodeOnly[apiKeyCreateReq]},
	{"contact", func(b []byte) (any, error) {
		var r contactReq
		if err := decodeBytes(b, &r); err != nil {
			return nil, err
		}
		return r.Input()
	}},
	{"event", func(b []byte) (any, error) {
		var r eventReq
		if err := decodeBytes(b, &r); err != nil {
			return nil, err
		}
		return r.validate("ten_fuzz", time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC))
	}},
	{"segmentCreate", func(b []byte) (any, error) {
		var r segmentReq
		if err := decodeBytes(b, &r); err != nil {
			return nil, err
		}
		return r.validate(true)
	}},
	{"segmentUpdate", func(b []byte) (any, error) {
		var r segmentReq
		if err := decodeBytes(b, &r); err != nil {
			return nil, err
		}
		return r.validate(false)
	}},
	{"campaign", func(b []byte) (any, error) {
		var r campaignReq
		if err := decodeBytes(b, &r); err != nil {
			return nil, err
		}
		return r.validate()
	}},
	{"templatePut", func(b []byte) (any, error) {
		var r templatePutReq
		if err := decodeBytes(b, &r); err != nil {
			return nil, err
		}
		return r.validate()
	}},
	{"templatePreview", decodeOnly[previewReq]},
	{"sequencePut", decodeOnly[sequencePutReq]},
	{"sequencePatch", decodeOnly[sequencePatchReq]},
	{"enrol", decodeOnly[enrolReq]},
	{"dryRun", decodeOnly[dryRunReq]},
	{"send", func(b []byte) (any, error) {
		var r sendReq
		if err := decodeBytes(b, &r); err != nil {
			return nil, err
		}
		return r.validate()
	}},
	{"domainCreate", decodeOnly[domainCreateReq]},
	{"domainUpdate", func(b []byte) (any, error) {
		var r domainUpdateReq
		if err := decodeBytes(b, &r); err != nil {
			return nil, err
		}
		sending, warmup, err := r.validate()
		return []any{sending, warmup}, err
	}},
}

func decodeOnly[T any](b []byte) (any, error) {
	var r T
	err := decodeBytes(b, &r)
	return r, err
}

// FuzzDecodeBody decodes arbitrary bytes as every handler's request body.
// The result is either a value or a VALIDATION_ERROR (kind Invalid) naming
// at least one field, with details of bounded size: never another kind, a
// panic, or an answer that echoes a huge key. A value holds only text
// PostgreSQL can store (valid UTF-8, no NUL), its raw JSON passes
// storable.JSON, and no string in it was silently repaired by Go's decoder
// (a U+FFFD standing for invalid UTF-8 or a lone surrogate escape).
//
//	go test -run '^$' -fuzz FuzzDecodeBody -fuzztime 5m ./api/
func FuzzDecodeBody(f *testing.F) {
	seeds := []string{
		`{"email":"a@example.com","properties":{"n":1.5,"s":"x","a":[1,"y"],"o":null}}`,
		`{"email":"a@example.com","name":"e","properties":{"k":"\ud800"},"timestamp":"2026-05-10T12:00:00Z"}`,
		`{"name":"s","rules":{"operator":"and","conditions":[{"type":"property","field":"\u0000","operator":"exists"}]}}`,
		`{"to":"a@example.com","template":"t","variables":{"v":"\udfff","w":{"x":["\u0000"]}},"from":null}`,
		`{"name":"n","subject":"s","content":"<p>x</p>","enabled":null,"disableReason":7}`,
		`{"content":"trigger: {event: e}\nsteps: [{send: t}]\n","name":"\ufffd","enabled":"yes"}`,
		`{"sendingEnabled":null}`,
		`{"contactId":"c","stepId":1}`,
		"{\"name\":\"\xff\"}",
		`{"properties":{"` + strings.Repeat("k", 20000) + `":1}}`,
		`{"goals":[` + strings.Repeat(`"g",`, 200) + `"g"],"status":null}`,
		`{"a":1}{"b":2}`,
		`[]`,
		`null`,
		``,
		`{"properties":{"n":1e131072,"m":-1e-16384}}`,
	}
	for _, s := range seeds {
		for j := range bodyTargets {
			f.Add(uint8(j), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		target := bodyTargets[int(which)%len(bodyTargets)]
		v, err := target.decode(body)
		if err != nil {
			checkValidationError(t, target.name, body, err)
			return
		}
		checkStorable(t, target.name, body, reflect.ValueOf(v), "")
	})
}

// checkValidationError: err is a VALIDATION_ERROR naming its fields, and
// small however large the body.
func checkValidationError(t *testing.T, name string, body []byte, err error) {
	t.Helper()
	e, ok := apperr.As(err)
	if !ok || e.Kind != apperr.KindInvalid || e.Code != "VALIDATION_ERROR" {
		t.Fatalf("%s: %q refused with %T %v", name, body, err, err)
	}
	fields, _ := e.Details["fields"].(map[string]any)
	if len(fields) == 0 {
		t.Fatalf("%s: VALIDATION_ERROR without fields: %v", name, e.Details)
	}
	b, jerr := json.Marshal(e.Details)
	if jerr != nil {
		t.Fatal(jerr)
	}
	if len(b)+len(e.Message) > 16<<10 {
		t.Fatalf("%s: error of %d bytes for a body of %d: %.300s", name, len(b)+len(e.Message), len(body), b)
	}
}

// checkStorable walks a decoded value: every string must be storable text,
// every raw JSON must pass storable.JSON, and a U+FFFD in a string must
// have been in the body as such.
func checkStorable(t *testing.T, name string, body []byte, v reflect.Value, path string) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		s := v.String()
		if p := storable.Text(s); p != "" {
			t.Fatalf("%s: %s %q %s", name, path, s, p)
		}
		if strings.ContainsRune(s, utf8.RuneError) && !bytes.Contains(body, []byte("\ufffd")) &&
			!bytes.Contains(bytes.ToLower(body), []byte(`\ufffd`)) {
			t.Fatalf("%s: %s %q holds U+FFFD the body did not: Go's decoder repaired it\n%q", name, path, s, body)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			raw := v.Bytes()
			if len(raw) > 0 {
				if _, p, ok := storable.JSON(raw); !ok || bytes.IndexByte(raw, 0) >= 0 {
					t.Fatalf("%s: %s raw JSON %q: %s", name, path, raw, p)
				}
			}
			return
		}
		for i := 0; i < v.Len(); i++ {
			checkStorable(t, name, body, v.Index(i), path+"[]")
		}
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			checkStorable(t, name, body, v.Index(i), path+"[]")
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			checkStorable(t, name, body, it.Key(), path+".key")
			checkStorable(t, name, body, it.Value(), path+"."+it.Key().String())
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			checkStorable(t, name, body, v.Elem(), path)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			checkStorable(t, name, body, v.Field(i), path+"."+v.Type().Field(i).Name)
		}
	}
}
