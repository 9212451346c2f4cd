package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sync"
)

// jsonEncoder is a reusable encoder with its buffer.
type jsonEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var jsonEncoders = sync.Pool{New: func() any {
	e := &jsonEncoder{}
	e.enc = json.NewEncoder(&e.buf)
	e.enc.SetEscapeHTML(false)
	return e
}}

const maxPooledJSON = 64 << 10

// encodeJSON is json.Marshal without HTML escaping: responses are JSON for
// programs, not HTML, and template content and preview HTML must read as
// written (<p>, not \u003cp\u003e). Encoders and buffers are pooled; the
// result is a copy, since fiber keeps it as the response body.
func encodeJSON(v any) ([]byte, error) {
	e := jsonEncoders.Get().(*jsonEncoder)
	defer func() {
		// A rare huge answer's buffer is left to the collector.
		if e.buf.Cap() <= maxPooledJSON {
			jsonEncoders.Put(e)
		}
	}()
	e.buf.Reset()
	if err := e.enc.Encode(v); err != nil {
		return nil, err
	}
	b := e.buf.Bytes()
	return bytes.Clone(b[:len(b)-1]), nil // Encode ends with a newline
}

// upsertStatus is the answer of a PUT or upsert: 201 when it created the
// resource, 200 when it changed one that existed.
func upsertStatus(created bool) int {
	if created {
		return http.StatusCreated
	}
	return http.StatusOK
}
