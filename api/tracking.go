package api

import (
	"bytes"
	"context"
	"time"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/apperr"
	"tidings/internal/delivery"
	"tidings/internal/sendgridevents"
	"tidings/internal/tracking"
)

// The tracking routes (/t/o, /t/c, /t/u) take no credential: the signed
// token is the capability, and it names the tenant, so every lookup is made
// in the token's tenant and a token of one tenant cannot reach another's
// rows. Opens and clicks are recorded synchronously, one small transaction
// per hit (docs/decisions.md "Tracking").

// pixelGIF is a 1x1 transparent GIF.
var pixelGIF = []byte("GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\x00\x00\x00" +
	"!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;")

// unsubscribeCSP lets the page load nothing and post only to itself.
const unsubscribeCSP = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// trackingTimeout bounds the recording of a hit: the pixel and the redirect
// answer even if the database is slow.
const trackingTimeout = 5 * time.Second

func noStore(c *fiber.Ctx) {
	c.Set(fiber.HeaderCacheControl, "no-store, no-cache, must-revalidate, private")
	c.Set(fiber.HeaderPragma, "no-cache")
	c.Set(fiber.HeaderExpires, "0")
}

// trackOpen answers the pixel and records an open for a valid token. A
// token that does not verify is 404 (ADDENDUM 8) and records nothing; the
// 404 still carries the pixel, so an email never shows a broken image.
func (s *Server) trackOpen(c *fiber.Ctx) error {
	cl, err := s.tracking.Parse(tracking.KindOpen, c.Params("token"))
	if err == nil {
		s.recordHit(c, delivery.Outcome{TenantID: cl.TenantID, SendID: cl.SendID, Kind: sendgridevents.Opened})
	}
	noStore(c)
	c.Set(fiber.HeaderContentType, "image/gif")
	if err != nil {
		c.Status(fiber.StatusNotFound)
	}
	return c.Send(pixelGIF)
}

// trackClick redirects to the link signed into the token; a token that does
// not verify is 404 and redirects nowhere.
func (s *Server) trackClick(c *fiber.Ctx) error {
	cl, err := s.tracking.Parse(tracking.KindClick, c.Params("token"))
	if err != nil {
		return s.renderInvalidLink(c)
	}
	s.recordHit(c, delivery.Outcome{TenantID: cl.TenantID, SendID: cl.SendID, Kind: sendgridevents.Clicked, URL: cl.URL})
	noStore(c)
	c.Set(fiber.HeaderReferrerPolicy, "no-referrer")
	return c.Redirect(cl.URL, fiber.StatusFound)
}

// recordHit records an open or click. A send or tenant that no longer
// exists, or a failure, records nothing and the visitor still gets the
// pixel or the redirect.
func (s *Server) recordHit(c *fiber.Ctx, o delivery.Outcome) {
	o.At = time.Now()
	ctx, cancel := context.WithTimeout(c.UserContext(), trackingTimeout)
	defer cancel()
	err := s.outcomes.Record(ctx, o)
	if err != nil && !apperr.IsKind(err, apperr.KindNotFound) {
		s.log.Warn("tracking hit not recorded", "err", err, "kind", o.Kind.String(), "tenant_id", o.TenantID,
			"send_id", o.SendID, "request_id", requestID(c))
	}
}

// unsubscribePage shows the unsubscribe form, or the confirmation for a
// contact already unsubscribed.
func (s *Server) unsubscribePage(c *fiber.Ctx) error {
	token := c.Params("token")
	cl, err := s.tracking.Parse(tracking.KindUnsubscribe, token)
	if err != nil {
		return s.renderInvalidLink(c)
	}
	r, err := s.outcomes.Recipient(c.UserContext(), cl.TenantID, cl.SendID, cl.ContactID)
	if apperr.IsKind(err, apperr.KindNotFound) {
		return s.renderInvalidLink(c)
	}
	if err != nil {
		return err
	}
	return s.renderUnsubscribe(c, tracking.UnsubscribePage{Action: tracking.UnsubscribePath + token,
		Done: !r.Subscribed, Sender: r.Sender, Email: r.Email})
}

// unsubscribe takes the RFC 8058 one-click POST (body
// List-Unsubscribe=One-Click) and the page's own form, which posts the
// same; any POST to a valid token unsubscribes, since the token is the
// capability. It answers the confirmation page.
func (s *Server) unsubscribe(c *fiber.Ctx) error {
	token := c.Params("token")
	cl, err := s.tracking.Parse(tracking.KindUnsubscribe, token)
	if err != nil {
		return s.renderInvalidLink(c)
	}
	err = s.outcomes.Record(c.UserContext(), delivery.Outcome{TenantID: cl.TenantID, SendID: cl.SendID,
		ContactID: cl.ContactID, Kind: sendgridevents.Unsubscribed, At: time.Now()})
	if apperr.IsKind(err, apperr.KindNotFound) {
		return s.renderInvalidLink(c)
	}
	if err != nil {
		return err
	}
	page := tracking.UnsubscribePage{Done: true}
	if r, err := s.outcomes.Recipient(c.UserContext(), cl.TenantID, cl.SendID, cl.ContactID); err == nil {
		page.Sender, page.Email = r.Sender, r.Email
	}
	return s.renderUnsubscribe(c, page)
}

// renderInvalidLink answers a tracking page whose link does not verify (or
// whose contact is gone): 404, as a small page a person can read rather
// than the API's JSON, with nothing of the token echoed.
func (s *Server) renderInvalidLink(c *fiber.Ctx) error {
	c.Status(fiber.StatusNotFound)
	return s.renderUnsubscribe(c, tracking.UnsubscribePage{Invalid: true})
}

// renderUnsubscribe writes a page of the unsubscribe template. The form
// posts to the path it was served from ('self' in the CSP), whatever host
// name the visitor reached.
func (s *Server) renderUnsubscribe(c *fiber.Ctx, p tracking.UnsubscribePage) error {
	var buf bytes.Buffer
	if err := tracking.RenderUnsubscribePage(&buf, p); err != nil {
		return err
	}
	noStore(c)
	c.Set(fiber.HeaderContentSecurityPolicy, unsubscribeCSP)
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set(fiber.HeaderReferrerPolicy, "no-referrer")
	c.Set(fiber.HeaderXFrameOptions, "DENY")
	c.Set(fiber.HeaderContentType, "text/html; charset=utf-8")
	return c.Send(buf.Bytes())
}
