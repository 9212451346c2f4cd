package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/apperr"
	"tidings/internal/contacts"
	"tidings/internal/delivery"
	"tidings/internal/idempotency"
	"tidings/internal/ids"
	"tidings/internal/store"
)

type sendReq struct {
	To                Opt[string]         `json:"to" required:"true" format:"email" doc:"The address of an existing contact."`
	Template          Opt[string]         `json:"template" required:"true" pattern:"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$" doc:"The template's id."`
	Variables         Opt[map[string]any] `json:"variables" doc:"Liquid variables; one the template reads and this lacks renders empty."`
	From              Opt[string]         `json:"from" max:"320" doc:"addr@domain or Name <addr@domain>, on a verified domain; the tenant's defaultFromAddress when absent."`
	IgnoreUnsubscribe Opt[bool]           `json:"ignoreUnsubscribe" doc:"true sends even to an unsubscribed or suppressed contact (false when absent)."`
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
	// The Idempotency-Key (if any) names the send in the transaction that
	// records it, so a repeat after a crash never sends it again.
	if claim, ok := c.Locals(idempotencyClaim).(*idempotency.Claim); ok {
		in.OnRecord = claim.LinkSend
	}
	res, err := s.sender.Send(c.UserContext(), tenantID(c), in)
	if err != nil {
		return err
	}
	return sendAnswer(c, res)
}

func sendAnswer(c *fiber.Ctx, res delivery.Result) error {
	warnings := res.Warnings
	if warnings == nil {
		warnings = []string{}
	}
	return c.JSON(sentJSON{MessageID: res.MessageID, Status: "sent", SendID: res.SendID, Warnings: warnings})
}

// sentJSON is POST /api/send's answer.
type sentJSON struct {
	MessageID string `json:"messageId"`
	Status    string `json:"status"`
	SendID    string `json:"sendId"`
	// Warnings name the variables the template reads that the send's
	// context lacks: they rendered empty (ADDENDUM 24).
	Warnings []string `json:"warnings"`
}

// idempotencyClaim is the c.Locals key of the request's Idempotency-Key
// claim (idempotent), for handlers that link what they create to it.
const idempotencyClaim = "idempotency-claim"

// idempotent makes a POST honour the Idempotency-Key header (ADDENDUM
// sections 8 and 12): a repeat of a succeeded request with the same body
// answers the stored response and runs nothing; so does the repeat of a send
// left in doubt (its 502 is kept), and the repeat of a request that died
// after recording its send answers from that send's record. scope names the
// operation, so one key may be used for different operations. Any POST
// route can adopt it.
func (s *Server) idempotent(scope string) fiber.Handler {
	return s.idempotentBy(scope, func(c *fiber.Ctx) []byte { return c.Body() })
}

// idempotentWrite is Idempotency-Key for every other POST, PUT and PATCH
// under /api (ADDENDUM 18), one scope per tenant: the request is its
// method, its URL and its body, so a key used again on another route or
// resource is IDEMPOTENCY_KEY_REUSED like a different body.
func (s *Server) idempotentWrite() fiber.Handler {
	return s.idempotentBy("api", func(c *fiber.Ctx) []byte {
		b := append([]byte(c.Method()+" "+c.OriginalURL()+"\n"), c.Body()...)
		return b
	})
}

// idempotentBy serves the key with the request fingerprinted by request.
func (s *Server) idempotentBy(scope string, request func(c *fiber.Ctx) []byte) fiber.Handler {
	return func(c *fiber.Ctx) error {
		key := c.Get("Idempotency-Key")
		if key == "" {
			return c.Next()
		}
		if !idempotency.ValidKey(key) {
			return apperr.Invalid("Idempotency-Key", "must be 1-255 printable ASCII characters")
		}
		// Keys are the credential's own (ADDENDUM 19): another key of the
		// tenant reusing one is a first request, and never replays a
		// response (a secret shown once) made for another credential.
		scope := scope + " " + principal(c).credential()
		if streamed(c) {
			return s.idempotentStream(c, scope, key)
		}
		// The request is hashed as received: the same bytes are the same
		// request. fasthttp reuses the buffer, but Begin only hashes it.
		claim, stored, err := s.idempotency.Begin(c.UserContext(), tenantID(c), scope, key, request(c))
		if err != nil {
			return err
		}
		if stored != nil && stored.SendID != "" {
			return s.answerRecordedSend(c, scope, key, stored.SendID)
		}
		if stored != nil && stored.BatchSends != nil {
			return s.answerRecordedBatch(c, stored.BatchSends)
		}
		if stored != nil {
			setReplayed(c)
			if len(stored.Body) > 0 {
				c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
			}
			return c.Status(stored.Status).Send(stored.Body)
		}
		c.Locals(idempotencyClaim, claim)
		return s.settle(c, claim, c.Next())
	}
}

// settle keeps the answer of the request that holds claim for its repeats,
// or frees the key when it failed.
func (s *Server) settle(c *fiber.Ctx, claim *idempotency.Claim, err error) error {
	if err != nil && delivery.IsInDoubt(err) {
		// A send in doubt is an answer to keep: its repeat must not
		// send again (ADDENDUM 12). Render it here so it can be stored.
		if rerr := s.errorHandler(c, err); rerr != nil {
			return rerr
		}
		err = nil
	}
	if err != nil {
		// Failed first attempts are not kept: the client may retry.
		if rerr := claim.Release(c.UserContext()); rerr != nil {
			s.log.Error("idempotency key not released", "err", rerr, "request_id", requestID(c))
		}
		return err
	}
	status := c.Response().StatusCode()
	kept := status >= http.StatusOK && status < http.StatusMultipleChoices || status == http.StatusBadGateway
	if !kept {
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

// answerRecordedSend answers the repeat of a request whose first attempt
// recorded sendID and died before storing its answer: from the send's
// record, sending nothing. A record that is gone was refused by the
// provider (nothing left): the key is freed and the client's next repeat
// runs afresh.
func (s *Server) answerRecordedSend(c *fiber.Ctx, scope, key, sendID string) error {
	setReplayed(c)
	res, err := s.sender.Answer(c.UserContext(), tenantID(c), sendID)
	if apperr.IsKind(err, apperr.KindNotFound) {
		if err := s.idempotency.Abandon(c.UserContext(), tenantID(c), scope, key, c.Body()); err != nil {
			return err
		}
		return apperr.Conflict("IDEMPOTENCY_KEY_IN_USE",
			"the first request with this Idempotency-Key failed before sending; retry to send")
	}
	if err != nil {
		return err
	}
	return sendAnswer(c, res)
}

// MaxBatch is how many messages one POST /api/send/batch takes.
const MaxBatch = 100

type sendBatchReq struct {
	Messages Opt[[]json.RawMessage] `json:"messages"`
}

type batchItem struct {
	Status    string        `json:"status"`
	SendID    string        `json:"sendId,omitempty"`
	MessageID string        `json:"messageId,omitempty"`
	Error     *errorPayload `json:"error,omitempty"`
}

// sendBatch is POST /api/send/batch (ADDENDUM 18): 1-100 messages, each
// checked and sent as POST /api/send would; a malformed or failing one is
// an error item in its place and stops nothing else. The records of the
// batch are written in one statement before the provider is called.
func (s *Server) sendBatch(c *fiber.Ctx) error {
	var req sendBatchReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	msgs, ok := req.Messages.Value()
	if !ok || len(msgs) == 0 || len(msgs) > MaxBatch {
		return apperr.Invalid("messages", fmt.Sprintf("must hold 1-%d messages", MaxBatch))
	}
	items := make([]batchItem, len(msgs))
	var reqs []delivery.Request
	var at []int
	for i, raw := range msgs {
		var one sendReq
		err := decodeBytes(raw, &one)
		var in delivery.Request
		if err == nil {
			in, err = one.validate()
		}
		if err != nil {
			items[i] = s.batchError(c, err)
			continue
		}
		reqs, at = append(reqs, in), append(at, i)
	}
	// The Idempotency-Key (if any) names the records, by the message's
	// position in the batch, in each transaction that writes some: a
	// repeat after a crash answers from them (answerRecordedBatch).
	var onRecord func(ctx context.Context, q *store.Tx, sendIDs map[int]string) error
	if claim, ok := c.Locals(idempotencyClaim).(*idempotency.Claim); ok {
		onRecord = func(ctx context.Context, q *store.Tx, sendIDs map[int]string) error {
			byPosition := make(map[int]string, len(sendIDs))
			for k, id := range sendIDs {
				byPosition[at[k]] = id
			}
			return claim.LinkBatchSends(ctx, q, byPosition)
		}
	}
	for k, r := range s.sender.SendBatch(c.UserContext(), tenantID(c), reqs, 0, onRecord) {
		i := at[k]
		if r.Err != nil {
			items[i] = s.batchError(c, r.Err)
			continue
		}
		items[i] = batchItem{Status: "sent", SendID: r.SendID, MessageID: r.MessageID}
	}
	return c.JSON(whole(items))
}

// batchError is one message's error as POST /api/send would answer it.
func (s *Server) batchError(c *fiber.Ctx, err error) batchItem {
	f := s.failure(c, err)
	if f.details == nil || (f.status >= 500 && !delivery.IsInDoubt(err)) {
		f.details = map[string]any{}
	}
	return batchItem{Status: "error", Error: &errorPayload{Code: f.code, Message: f.msg, Details: f.details}}
}

// setReplayed marks a response answered from an earlier request with the
// same Idempotency-Key: Idempotency-Replayed (ADDENDUM 19), and the
// Idempotent-Replayed of earlier releases for clients that read it.
func setReplayed(c *fiber.Ctx) {
	c.Set("Idempotency-Replayed", "true")
	c.Set("Idempotent-Replayed", "true")
}

// answerRecordedBatch answers the repeat of a batch whose first request
// wrote records (sendIDs, by position) and then died or failed to store its
// answer (ADDENDUM 19): from those records, sending nothing. A message with
// a record answers as its record stands (sent, in doubt, or refused: the
// record is gone); one without a record never reached the provider and is
// answered NOT_SENT, for the client to send again under a new key.
func (s *Server) answerRecordedBatch(c *fiber.Ctx, sendIDs map[int]string) error {
	var req sendBatchReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	msgs, _ := req.Messages.Value()
	items := make([]batchItem, len(msgs))
	for i := range msgs {
		id, ok := sendIDs[i]
		if !ok {
			items[i] = batchItem{Status: "error", Error: &errorPayload{Code: "NOT_SENT", Details: map[string]any{},
				Message: "the first request with this Idempotency-Key stopped before sending this message, " +
					"and a repeat sends nothing: send it again with a new Idempotency-Key"}}
			continue
		}
		res, err := s.sender.Answer(c.UserContext(), tenantID(c), id)
		switch {
		case apperr.IsKind(err, apperr.KindNotFound):
			items[i] = batchItem{Status: "error", Error: &errorPayload{Code: "PROVIDER_ERROR", Details: map[string]any{},
				Message: "the email provider did not accept the message: nothing was sent"}}
		case err != nil && !delivery.IsInDoubt(err):
			return err
		case err != nil:
			items[i] = s.batchError(c, err)
		default:
			items[i] = batchItem{Status: "sent", SendID: res.SendID, MessageID: res.MessageID}
		}
	}
	setReplayed(c)
	return c.JSON(whole(items))
}
