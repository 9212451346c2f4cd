package api

import (
	"time"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/apperr"
	"tidings/internal/sendgridevents"
)

// sendgridWebhook takes SendGrid's signed Event Webhook: verify, store the
// raw body, enqueue its task, answer 204. The stored row is the truth: if
// the enqueue fails the answer is still 204 and the worker's sweep enqueues
// the batch a minute later, so SendGrid never re-posts what is already
// kept. Without SENDGRID_WEBHOOK_PUBLIC_KEY every POST is refused (403): an
// unverified webhook would let anyone bounce or suppress contacts.
func (s *Server) sendgridWebhook(c *fiber.Ctx) error {
	if s.webhookKey == nil {
		return apperr.Forbidden("the SendGrid webhook is not configured (SENDGRID_WEBHOOK_PUBLIC_KEY)")
	}
	body := c.Body()
	if len(body) > sendgridevents.MaxBodyBytes {
		return fiber.ErrRequestEntityTooLarge
	}
	if err := s.webhookKey.Verify(body, c.Get(sendgridevents.SignatureHeader), c.Get(sendgridevents.TimestampHeader), time.Now()); err != nil {
		s.log.Info("webhook refused", "reason", err.Error(), "request_id", requestID(c))
		return apperr.Forbidden("the webhook signature or timestamp is not valid")
	}
	if _, err := s.webhooks.Accept(c.UserContext(), body); err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}
