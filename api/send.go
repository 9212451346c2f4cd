package api

import (
	"net/http"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/apperr"
	"tidings/internal/contacts"
	"tidings/internal/delivery"
	"tidings/internal/idempotency"
	"tidings/internal/ids"
)

type sendReq struct {
	To                Opt[string]         `json:"to"`
	Template          Opt[string]         `json:"template"`
	Variables         Opt[map[string]any] `json:"variables"`
	From              Opt[string]         `json:"from"`
	IgnoreUnsubscribe Opt[bool]           `json:"ignoreUnsubscribe"`
}

func (r sendReq) validate() (delivery.Request, error) {
	var f apperr.Fields
	to, ok := r.To.Value()
	email, valid := contacts.NormalizeEmail(to)
	switch {
	case !ok || to == "":
		f.Add("to", "is required")
	case !valid:
		f.Add("to", "must be a valid email address")
	}
	tmpl, ok := r.Template.Value()
	switch {
	case !ok || tmpl == "":
		f.Add("template", "is required")
	case !ids.Valid(tmpl):
		f.Add("template", "must be a template id: letters, digits, '_', '.', '-', at most 64")
	}
	if err := f.Err(); err != nil {
		return delivery.Request{}, err
	}
	from, _ := r.From.Value()
	vars, _ := r.Variables.Value()
	ignore, _ := r.IgnoreUnsubscribe.Value()
	return delivery.Request{To: email, TemplateID: tmpl, From: from, Variables: vars, IgnoreUnsubscribe: ignore}, nil
}

// send is POST /api/send: a transactional email to one contact, sent within
// the request (ADDENDUM section 8).
func (s *Server) send(c *fiber.Ctx) error {
	var req sendReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	in, err := req.validate()
	if err != nil {
		return err
	}
	res, err := s.sender.Send(c.UserContext(), tenantID(c), in)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"messageId": res.MessageID, "status": "sent", "sendId": res.SendID})
}

// idempotent makes a POST honour the Idempotency-Key header (ADDENDUM
// section 8): a repeat of a succeeded request with the same body answers the
// stored response and runs nothing; scope names the operation, so one key
// may be used for different operations. Any POST route can adopt it.
func (s *Server) idempotent(scope string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		key := c.Get("Idempotency-Key")
		if key == "" {
			return c.Next()
		}
		if !idempotency.ValidKey(key) {
			return apperr.Invalid("Idempotency-Key", "must be 1-255 printable ASCII characters")
		}
		// The body is hashed as received: the same bytes are the same
		// request. fasthttp reuses the buffer, but Begin only hashes it.
		claim, stored, err := s.idempotency.Begin(c.UserContext(), tenantID(c), scope, key, c.Body())
		if err != nil {
			return err
		}
		if stored != nil {
			c.Set("Idempotent-Replayed", "true")
			c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
			return c.Status(stored.Status).Send(stored.Body)
		}
		if err := c.Next(); err != nil {
			// Failed first attempts are not kept: the client may retry.
			if rerr := claim.Release(c.UserContext()); rerr != nil {
				s.log.Error("idempotency key not released", "err", rerr, "request_id", requestID(c))
			}
			return err
		}
		status := c.Response().StatusCode()
		if status < http.StatusOK || status >= http.StatusMultipleChoices {
			if rerr := claim.Release(c.UserContext()); rerr != nil {
				s.log.Error("idempotency key not released", "err", rerr, "request_id", requestID(c))
			}
			return nil
		}
		// Copy: the response buffer belongs to fasthttp.
		body := append([]byte(nil), c.Response().Body()...)
		if err := claim.Complete(c.UserContext(), status, body); err != nil {
			// The send happened; a repeat will find the key in flight until
			// it goes stale, then run again. Log it rather than fail a
			// request that succeeded.
			s.log.Error("idempotent response not stored", "err", err, "request_id", requestID(c))
		}
		return nil
	}
}
