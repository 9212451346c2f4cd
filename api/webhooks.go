package api

import (
	"errors"
	"time"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/apperr"
	"tidings/internal/delivery"
	"tidings/internal/sendgridevents"
	"tidings/internal/sesevents"
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

// sesWebhook takes SES's outcomes as SNS posts them (ADDENDUM 22): the
// signature is verified against SNS's certificate (fetched from an allowed
// host, cached); a notification is stored (without its signature, checked
// here: sesevents.Stored) and its task enqueued, as SendGrid's batches are; a subscription confirmation is confirmed by
// fetching its SubscribeURL (an allowed host only). Unsigned or badly
// signed: 403, nothing changed. Without an SES configuration (no
// SES_REGION, no SES_SNS_CERT_HOSTS) every POST is refused.
func (s *Server) sesWebhook(c *fiber.Ctx) error {
	if s.sns == nil {
		return apperr.Forbidden("the SES webhook is not configured (SES_REGION or SES_SNS_CERT_HOSTS)")
	}
	body := c.Body()
	if len(body) > sesevents.MaxBodyBytes {
		return fiber.ErrRequestEntityTooLarge
	}
	env, err := s.sns.Verify(c.UserContext(), body)
	if err != nil {
		if errors.Is(err, sesevents.ErrRefused) {
			s.log.Info("SES webhook refused", "reason", err.Error(), "request_id", requestID(c))
			return apperr.Forbidden("the SNS signature is not valid")
		}
		// The certificate could not be fetched: SNS retries a 5xx.
		return apperr.Upstream("PROVIDER_ERROR", "the SNS signing certificate could not be fetched", err)
	}
	switch env.Type {
	case sesevents.TypeSubscriptionConfirmation:
		if err := s.sns.Confirm(c.UserContext(), env); err != nil {
			if errors.Is(err, sesevents.ErrRefused) {
				return apperr.Forbidden("the SubscribeURL is not on an allowed host")
			}
			return apperr.Upstream("PROVIDER_ERROR", "the subscription could not be confirmed", err)
		}
		s.log.Info("SES webhook: SNS subscription confirmed", "topic_arn", env.TopicArn)
	case sesevents.TypeNotification:
		if _, err := s.webhooks.AcceptFrom(c.UserContext(), delivery.ProviderSES, sesevents.Stored(env)); err != nil {
			return err
		}
	}
	return c.SendStatus(fiber.StatusNoContent)
}
