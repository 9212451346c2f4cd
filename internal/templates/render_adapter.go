package templates

import (
	"context"
	"errors"

	"tidings/internal/apperr"
	"tidings/internal/render"
)

// Prepare is the Compiler of the service: render.Prepare over an MJML
// compiler (the node pool), with rejected input turned into
// VALIDATION_ERROR carrying MJML's or Liquid's own messages.
type Prepare struct {
	MJML render.Compiler
}

// Compile implements Compiler.
func (p Prepare) Compile(ctx context.Context, subject, content string) (Compiled, error) {
	out, err := render.Prepare(ctx, p.MJML, subject, content)
	var ve *render.ValidationError
	if errors.As(err, &ve) {
		e := apperr.Invalid(ve.Field, ve.Messages[0])
		fields := e.Details["fields"].(map[string]any)
		fields[ve.Field] = ve.Messages
		if len(ve.MJML) > 0 {
			e.Details["mjml"] = ve.MJML
		}
		return Compiled{}, e
	}
	if err != nil {
		return Compiled{}, err
	}
	return Compiled{Content: out.StoredContent, HTML: out.CompiledHTML, RequiredVariables: out.RequiredVariables}, nil
}
