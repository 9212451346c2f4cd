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
// per hit (docs/decisions.md "Tracking"); past delivery.MaxHitEvents of a
// kind per send in an hour, a hit is only counted on the send.

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
		s.recordHit(c, delivery.Outcome{TenantID: cl.TenantID, SendID: cl.SendID, Kind: sendgridevents.Opened,
			Method: c.Method(), UserAgent: c.Get(fiber.HeaderUserAgent)})
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
	s.recordHit(c, delivery.Outcome{TenantID: cl.TenantID, SendID: cl.SendID, Kind: sendgridevents.Clicked, URL: cl.URL,
		Method: c.Method(), UserAgent: c.Get(fiber.HeaderUserAgent)})
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

// unsubscribePage shows the preference page: the message's topic (if it
// has one) to leave, the tenant's topics to choose, and unsubscribing from
// everything; or the confirmation for a contact already unsubscribed.
func (s *Server) unsubscribePage(c *fiber.Ctx) error {
	token := c.Params("token")
	cl, err := s.tracking.Parse(tracking.KindUnsubscribe, token)
	if err != nil {
		return s.renderInvalidLink(c)
	}
	p, err := s.preferences(c, cl, token)
	if apperr.IsKind(err, apperr.KindNotFound) {
		return s.renderInvalidLink(c)
	}
	if err != nil {
		return err
	}
	return s.renderUnsubscribe(c, p)
}

// preferences builds the page for the token's contact as it now stands.
func (s *Server) preferences(c *fiber.Ctx, cl tracking.Claims, token string) (tracking.UnsubscribePage, error) {
	ctx := c.UserContext()
	r, err := s.outcomes.Recipient(ctx, cl.TenantID, cl.SendID, cl.ContactID)
	if err != nil {
		return tracking.UnsubscribePage{}, err
	}
	p := tracking.UnsubscribePage{Action: tracking.UnsubscribePath + token, Done: !r.Subscribed, Sender: r.Sender,
		Email: r.Email}
	choices, err := s.topics.Choices(ctx, cl.TenantID, r.Topics)
	if err != nil {
		return p, err
	}
	for _, ch := range choices {
		p.Topics = append(p.Topics, tracking.TopicChoice{ID: ch.ID, Name: ch.Name, Description: ch.Description,
			Subscribed: ch.Subscribed})
		if ch.ID == cl.Topic && ch.Subscribed {
			p.Topic = ch.Name
		}
	}
	return p, nil
}

// unsubscribe takes the page's forms and the RFC 8058 one-click POST (body
// List-Unsubscribe=One-Click); the signed token in the path is the
// capability, so no other check is needed and no cookie is involved.
//   - preferences=1: the checked topics are joined, the others left;
//   - a topic message's one-click (no scope=all): that topic is left, the
//     contact stays subscribed to the rest (ADDENDUM 16);
//   - otherwise (scope=all, or a message without a topic): the contact is
//     unsubscribed from everything, as before topics.
func (s *Server) unsubscribe(c *fiber.Ctx) error {
	token := c.Params("token")
	cl, err := s.tracking.Parse(tracking.KindUnsubscribe, token)
	if err != nil {
		return s.renderInvalidLink(c)
	}
	ctx := c.UserContext()
	var left string
	saved := c.FormValue("preferences") == "1"
	switch {
	case saved:
		checked := map[string]bool{}
		for _, v := range c.Request().PostArgs().PeekMulti("topic") {
			checked[string(v)] = true
		}
		all, err := s.topics.All(ctx, cl.TenantID)
		if err != nil {
			return err
		}
		choices := make(map[string]bool, len(all))
		for _, t := range all {
			choices[t.ID] = checked[t.ID]
		}
		err = s.choose(c, cl, choices)
		if err != nil {
			return err
		}
	case cl.Topic != "" && c.FormValue("scope") != "all":
		err = s.choose(c, cl, map[string]bool{cl.Topic: false})
		if apperr.IsCode(err, "VALIDATION_ERROR") {
			// The topic is gone: stop everything rather than nothing.
			return s.unsubscribeAll(c, cl, token)
		}
		if err != nil {
			return err
		}
		left = cl.Topic
		if t, err := s.topics.Get(ctx, cl.TenantID, cl.Topic); err == nil {
			left = t.Name
		}
	default:
		return s.unsubscribeAll(c, cl, token)
	}
	p, err := s.preferences(c, cl, token)
	if apperr.IsKind(err, apperr.KindNotFound) {
		return s.renderInvalidLink(c)
	}
	if err != nil {
		return err
	}
	p.Left, p.Saved = left, saved
	return s.renderUnsubscribe(c, p)
}

// choose saves topic choices; a contact that is gone is the invalid-link
// page's 404, reported by the caller through preferences.
func (s *Server) choose(c *fiber.Ctx, cl tracking.Claims, choices map[string]bool) error {
	_, err := s.topics.Choose(c.UserContext(), cl.TenantID, cl.ContactID, cl.SendID, choices)
	if apperr.IsKind(err, apperr.KindNotFound) {
		return nil
	}
	return err
}

// unsubscribeAll unsubscribes the token's contact from everything and
// answers the confirmation page.
func (s *Server) unsubscribeAll(c *fiber.Ctx, cl tracking.Claims, token string) error {
	err := s.outcomes.Record(c.UserContext(), delivery.Outcome{TenantID: cl.TenantID, SendID: cl.SendID,
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
