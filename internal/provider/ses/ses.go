// Package ses sends through Amazon SES v2 with the AWS SDK for Go v2
// (ADDENDUM 22). What is SES's own lives here: the message goes as SES's
// "simple" content (subject, text and HTML bodies, our extra headers), the
// send and tenant ids travel as message tags (send_id, tenant_id: SES's
// event publishing returns them in every event), the configuration set
// names where those events go, and an answer is classified by SES's
// status: 5xx or no connection is the provider down, a request written
// without an answer is in doubt.
//
// Outcomes come back as SNS notifications (package sesevents).
package ses

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"net/mail"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"
	"github.com/aws/smithy-go"

	"tidings/internal/provider"
)

// Config is what the provider needs: SES_REGION, SES_CONFIGURATION_SET,
// SES_ENDPOINT and PROVIDER_TIMEOUT.
type Config struct {
	Region           string
	ConfigurationSet string
	// Endpoint, when set, replaces SES's regional endpoint (a local fake).
	Endpoint string
	Timeout  time.Duration
	// Credentials, when set, replace the SDK's default chain (environment,
	// shared files, instance role); tests give static ones.
	Credentials aws.CredentialsProvider
	// HTTPClient, when set, replaces the default client (tests).
	HTTPClient *http.Client
}

// Provider sends one message through SESv2 SendEmail.
type Provider struct {
	client *sesv2.Client
	cfgSet string
}

// New loads the SDK's configuration (credentials the AWS SDK way) for
// cfg.Region. The SDK's own retries are off: a retried SendEmail after a
// lost answer could send the message twice, and retrying is the caller's
// job (ADDENDUM 12).
func New(ctx context.Context, cfg Config) (*Provider, error) {
	if cfg.Region == "" {
		return nil, fmt.Errorf("SES_REGION is required for the ses provider")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	hc := cfg.HTTPClient
	if hc == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConns, t.MaxIdleConnsPerHost = 256, 256
		hc = &http.Client{Timeout: cfg.Timeout, Transport: t,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	opts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithRegion(cfg.Region),
		awsconfig.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} }),
	}
	if cfg.Credentials != nil {
		opts = append(opts, awsconfig.WithCredentialsProvider(cfg.Credentials))
	}
	ac, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("ses: AWS configuration: %w", err)
	}
	client := sesv2.NewFromConfig(ac, func(o *sesv2.Options) {
		// Set here, not in LoadDefaultConfig, which wants a client it can
		// add AWS_CA_BUNDLE's roots to.
		o.HTTPClient = tracedClient{hc}
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
	})
	return &Provider{client: client, cfgSet: cfg.ConfigurationSet}, nil
}

// Name implements provider.Provider.
func (p *Provider) Name() string { return provider.NameSES }

// Tag names of the message tags SES returns in each event's mail.tags.
const (
	TagSendID   = "send_id"
	TagTenantID = "tenant_id"
)

// Send implements provider.Provider; the message id is SES's MessageId,
// which each of its events names as mail.messageId.
func (p *Provider) Send(ctx context.Context, msg provider.Message) (string, error) {
	msg, err := provider.Validate(msg)
	if err != nil {
		return "", err
	}
	in := &sesv2.SendEmailInput{
		// mail.Address encodes a non-ASCII display name as RFC 2047, which
		// SES requires of the From header.
		FromEmailAddress: aws.String((&mail.Address{Name: msg.From.Name, Address: msg.From.Address}).String()),
		Destination:      &types.Destination{ToAddresses: []string{msg.To}},
		Content: &types.EmailContent{Simple: &types.Message{
			Subject: &types.Content{Data: aws.String(msg.Subject), Charset: aws.String("UTF-8")},
			Body: &types.Body{
				Text: &types.Content{Data: aws.String(msg.Text), Charset: aws.String("UTF-8")},
				Html: &types.Content{Data: aws.String(msg.HTML), Charset: aws.String("UTF-8")},
			},
		}},
		EmailTags: []types.MessageTag{
			{Name: aws.String(TagSendID), Value: aws.String(msg.SendID)},
			{Name: aws.String(TagTenantID), Value: aws.String(msg.TenantID)},
		},
	}
	for _, h := range msg.Headers {
		in.Content.Simple.Headers = append(in.Content.Simple.Headers,
			types.MessageHeader{Name: aws.String(h.Name), Value: aws.String(h.Value)})
	}
	if p.cfgSet != "" {
		in.ConfigurationSetName = aws.String(p.cfgSet)
	}
	wrote := new(atomic.Bool)
	out, err := p.client.SendEmail(context.WithValue(ctx, wroteKey{}, wrote), in)
	if err != nil {
		return "", classify(err, wrote.Load())
	}
	return aws.ToString(out.MessageId), nil
}

// classify maps an SDK error to *provider.Error. An HTTP answer decides by
// its status (429 and 5xx temporary, 5xx the provider down, any other 4xx
// a refusal of this message: MessageRejected, an unverified sender, a
// paused account); no answer after the request was written is in doubt;
// no answer before it is the provider down (refused, DNS, TLS, timeout).
func classify(err error, wrote bool) *provider.Error {
	e := &provider.Error{Provider: provider.NameSES, Err: err}
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() != 0 {
		e.Status = re.HTTPStatusCode()
		e.Transient = e.Status == http.StatusTooManyRequests || e.Status >= 500
		e.Down = e.Status >= 500
		var ae smithy.APIError
		if errors.As(err, &ae) {
			e.Message = ae.ErrorCode() + ": " + ae.ErrorMessage()
			// SES answers its sending quota with 400 LimitExceeded or
			// TooManyRequests: wait and try again.
			switch ae.ErrorCode() {
			case "TooManyRequestsException", "LimitExceededException":
				e.Transient = true
			}
		}
		return e
	}
	e.Transient = true
	e.InDoubt = wrote
	e.Down = !wrote
	return e
}

// wroteKey carries a send's "request written" flag to tracedClient through
// the request's context (the SDK builds the HTTP request from the
// operation's context).
type wroteKey struct{}

// tracedClient marks, for the send whose context carries a flag, that its
// request was written to the connection: after that, no answer leaves the
// message in doubt (ADDENDUM 12).
type tracedClient struct{ hc *http.Client }

func (c tracedClient) Do(r *http.Request) (*http.Response, error) {
	if w, ok := r.Context().Value(wroteKey{}).(*atomic.Bool); ok {
		r = r.WithContext(httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { w.Store(true) },
		}))
	}
	return c.hc.Do(r)
}
