package api

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/gofiber/fiber/v2"
)

// Every response the API tests see through bundle.do is checked against
// the document: its status is described and a JSON body matches its
// schema (also every error, against the envelope). A view that grows a
// field, or a handler that answers another shape, fails the test that saw
// it until the document says so.

var docRouter struct {
	once   sync.Once
	router routers.Router
	err    error
}

func documentRouter(app *fiber.App) (routers.Router, error) {
	docRouter.once.Do(func() {
		var doc *openapi3.T
		if doc, docRouter.err = Document(app); docRouter.err == nil {
			docRouter.router, docRouter.err = legacy.NewRouter(doc)
		}
	})
	return docRouter.router, docRouter.err
}

// checkResponse validates one response against the document; a request
// the document has no operation for (a test probing an unknown route or
// method) is not checked.
func checkResponse(t testing.TB, app *fiber.App, req *http.Request, res *http.Response, body []byte) {
	t.Helper()
	router, err := documentRouter(app)
	if err != nil {
		t.Fatalf("the OpenAPI document: %v", err)
	}
	route, params, err := router.FindRoute(req)
	if err != nil {
		return
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 res.StatusCode,
		Header:                 res.Header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") || len(body) == 0 {
		in.Options.ExcludeResponseBody = true
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		t.Errorf("%s %s answered %d, which the OpenAPI document does not describe: %v\nbody: %.500s",
			req.Method, req.URL.Path, res.StatusCode, err, body)
	}
}
