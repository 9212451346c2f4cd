package api

import "net/http"

// operations describes every route of the table (api/app.go), by "METHOD
// path" as fiber names it: its summary and the Go types of its request and
// response bodies. Document fails on a route missing here, or an entry
// without a route.
// metricsDesc says where GET /metrics answers (ADDENDUM 25).
const metricsDesc = "Served without a credential on the api's admin listener (API_ADMIN_ADDR, loopback by default). " +
	"On the public port only to `Authorization: Bearer <METRICS_TOKEN>`; without METRICS_TOKEN, or with another bearer, 404."

var operations = map[string]op{
	// The service.
	"GET /healthz":          {id: "healthz", summary: "Liveness: the process answers", auth: authNone, res: healthJSON{}},
	"GET /readyz":           {id: "readyz", summary: "Readiness: PostgreSQL and Redis answer", auth: authNone, res: readyJSON{}, also: []int{http.StatusServiceUnavailable}},
	"GET /metrics":          {id: "prometheusMetrics", summary: "Prometheus metrics of this process", auth: authNone, resType: "text/plain", desc: metricsDesc},
	"GET /api/openapi.json": {id: "openapi", summary: "This document", auth: authNone, resType: "application/json"},
	"GET /docs":             {id: "docsPage", summary: "The API reference: this document as a browsable page", auth: authNone, resType: "text/html"},
	"GET /docs/assets/:file": {id: "docsAsset", summary: "A file the reference page loads (its script) or names (its licenses)",
		desc: "Only the names the page gives, which carry the content's hash: cached for a year (immutable), " +
			"with an ETag (If-None-Match answers 304), gzipped when accepted; the licenses are text/plain. Any other name is 404.",
		auth: authNone, resType: "text/javascript"},
	"POST /webhooks/sendgrid": {id: "sendgridEvents", summary: "SendGrid's signed Event Webhook: delivery outcomes", auth: authNone,
		desc:   "Signed with X-Twilio-Email-Event-Webhook-Signature and -Timestamp; a bad signature is 403.",
		reqAlt: []string{"application/json"}, status: http.StatusNoContent},
	"POST /webhooks/ses": {id: "sesEvents", summary: "Amazon SES outcomes as SNS notifications", auth: authNone,
		desc: "SNS's HTTPS subscription: notifications in SES's event-publishing format and the subscription's " +
			"confirmation, signed (versions 1 and 2) with a certificate from an allowed host; unsigned or badly signed is 403.",
		reqAlt: []string{"text/plain", "application/json"}, status: http.StatusNoContent},

	// Tracking: the signed token in the path is the credential.
	"GET /t/o/:token":  {id: "trackOpen", summary: "Open pixel", auth: authNone, resType: "image/gif"},
	"GET /t/c/:token":  {id: "trackClick", summary: "Tracked link: redirects to the link the email carried", auth: authNone, status: http.StatusFound},
	"GET /t/u/:token":  {id: "unsubscribePage", summary: "Unsubscribe and preference page", auth: authNone, resType: "text/html"},
	"POST /t/u/:token": {id: "unsubscribe", summary: "Unsubscribe (RFC 8058 one-click) or save preferences", auth: authNone, reqAlt: []string{"application/x-www-form-urlencoded"}, resType: "text/html"},

	// The tenant.
	"POST /api/tenant": {id: "createTenant", summary: "Create the tenant of the session's organisation",
		desc: "201 the first time; 200 with the existing tenant afterwards.", auth: authSession,
		req: tenantCreateReq{}, res: tenantJSON{}, status: http.StatusCreated, also: []int{http.StatusOK}},
	"GET /api/tenant":                             {id: "getTenant", summary: "The tenant, with its deliverability", res: tenantJSON{}},
	"PATCH /api/tenant":                           {id: "updateTenant", summary: "Change the tenant's settings", req: tenantUpdateReq{}, reqName: "TenantUpdateRequest", atLeastOne: true, res: tenantJSON{}},
	"GET /api/tenant/sandbox-whitelist":           {id: "getSandboxWhitelist", summary: "Addresses a sandbox tenant may send to", res: emailsJSON{}},
	"POST /api/tenant/sandbox-whitelist":          {id: "addSandboxWhitelist", summary: "Allow an address in the sandbox", req: whitelistReq{}, res: emailsJSON{}},
	"DELETE /api/tenant/sandbox-whitelist/:email": {id: "removeSandboxWhitelist", summary: "Remove an address from the sandbox whitelist", res: emailsJSON{}},

	"POST /api/api-keys":          {id: "createApiKey", summary: "Create an API key (the raw key is shown once)", auth: authSession, req: apiKeyCreateReq{}, res: apiKeyCreatedJSON{}, status: http.StatusCreated},
	"GET /api/api-keys":           {id: "listApiKeys", summary: "List API keys", res: itemsJSON[apiKeyJSON]{}},
	"DELETE /api/api-keys/:keyId": {id: "revokeApiKey", summary: "Revoke an API key", auth: authSession, status: http.StatusNoContent},

	// Contacts.
	"POST /api/contacts": {id: "createContact", summary: "Create a contact", req: contactReq{}, reqName: "ContactCreateRequest", required: []string{"email"}, res: contactJSON{}, status: http.StatusCreated},
	"PUT /api/contacts": {id: "upsertContact", summary: "Create or update a contact by email",
		desc: "201 when created, 200 when updated; properties merge (null deletes one).",
		req:  contactReq{}, reqName: "ContactUpsertRequest", required: []string{"email"}, res: contactUpsertedJSON{}, status: http.StatusCreated, also: []int{http.StatusOK}},
	"GET /api/contacts": {id: "listContacts", summary: "List contacts, newest first; with ?email=, the contact of that address",
		res: oneOf{listJSON[contactJSON]{}, contactJSON{}}},
	"POST /api/contacts/import": {id: "importContacts", summary: "Import contacts from CSV or NDJSON (up to 1,000,000 rows)",
		desc: "CSV with a header row naming an email column (every other column a string property), or NDJSON of " +
			"PUT /api/contacts bodies. Streamed, up to 512 MiB; answered 202 once staged. Rows upsert as PUT /api/contacts; " +
			"a bad row is reported by line and skipped. At most IMPORT_MAX_RUNNING (2) imports of a tenant upload or run at " +
			"once: another is 429 RATE_LIMITED with Retry-After; an instance receiving as many bodies as it takes " +
			"(IMPORT_MAX_UPLOADS) answers 503 with Retry-After. The body must arrive within IMPORT_UPLOAD_TIMEOUT (10 " +
			"minutes), never 30 s without a byte.",
		reqAlt: []string{"text/csv", "application/x-ndjson"}, res: importStartedJSON{}, status: http.StatusAccepted},
	"GET /api/contacts/import/:id": {id: "getContactImport", summary: "An import's progress and first errors", res: importJSON{}},
	"GET /api/contacts/import/:id/errors": {id: "getContactImportErrors", summary: "Every failed row and warning of an import, with the row as read",
		desc: "By line, streamed: CSV (line, severity, code, message, then the import's columns, or row for an NDJSON import) " +
			"or NDJSON ({line, severity, code, message, fields | row}), chosen by ?format=csv|ndjson, else by Accept, else CSV. " +
			"severity is error (the row was not imported) or warning (DUPLICATE_ROW: imported after the earlier line with the same email).",
		resType: "text/csv"},
	"GET /api/contacts/stats":         {id: "contactStats", summary: "Counts of the tenant's contacts", res: contactStatsJSON{}},
	"GET /api/contacts/:id":           {id: "getContact", summary: "A contact", res: contactJSON{}},
	"PATCH /api/contacts/:id":         {id: "updateContact", summary: "Change a contact", req: contactReq{}, reqName: "ContactUpdateRequest", atLeastOne: true, omit: []string{"email"}, res: contactJSON{}},
	"DELETE /api/contacts/:id":        {id: "deleteContact", summary: "Delete a contact (its pending sends are cancelled)", status: http.StatusNoContent},
	"GET /api/contacts/:id/sends":     {id: "listContactSends", summary: "A contact's send history", res: listJSON[sendJSON]{}},
	"GET /api/contacts/:id/scheduled": {id: "listContactScheduled", summary: "A contact's scheduled sends", res: scheduledPageJSON{}},
	"GET /api/contacts/:id/sequences": {id: "listContactSequences", summary: "A contact's enrolments", res: itemsJSON[enrolmentJSON]{}},
	"GET /api/contacts/:id/segments":  {id: "listContactSegments", summary: "The segments a contact is a member of", res: itemsJSON[contactSegmentJSON]{}},
	"GET /api/contacts/:id/timeline":  {id: "contactTimeline", summary: "A contact's events, sends and changes, newest first", res: timelinePageJSON{}},

	// Sending.
	"POST /api/send": {id: "send", summary: "Send a transactional email",
		desc: "Rendered and handed to the provider within the request. A provider failure is 502 PROVIDER_ERROR; " +
			"no answer from the provider is 502 with details {sendId, inDoubt: true}, and the send is never retried blindly.",
		req: sendReq{}, res: sentJSON{}},
	"POST /api/send/batch": {id: "sendBatch", summary: "Send 1-100 transactional emails",
		desc: "Each message is checked and sent as POST /api/send would; a failing or malformed one is an error item in its place.",
		req:  batchReq{}, res: itemsJSON[batchItem]{}},
	"GET /api/sends":         {id: "listSends", summary: "Send history, newest first", res: listJSON[sendJSON]{}},
	"GET /api/sends/:sendId": {id: "getSend", summary: "A send and its outcomes", res: sendJSON{}},

	// Events.
	"POST /api/events": {id: "createEvent", summary: "Record a custom event (it may enrol the contact in sequences)",
		req: eventReq{}, res: eventCreatedJSON{}, status: http.StatusCreated},
	"GET /api/events":                {id: "listEvents", summary: "Events, newest first", res: listJSON[eventJSON]{}},
	"GET /api/events/contacts/:id":   {id: "listContactEvents", summary: "A contact's events, newest first", res: listJSON[eventJSON]{}},
	"GET /api/events/archive":        {id: "listEventArchives", summary: "Months of events archived past the retention", res: itemsJSON[archiveJSON]{}},
	"GET /api/events/archive/:month": {id: "getEventArchive", summary: "One archived month's events as NDJSON", resType: "application/x-ndjson"},

	// Sequences and their enrolments.
	"PUT /api/sequences/:id": {id: "putSequence", summary: "Create or replace a sequence from YAML",
		desc: "The body is the YAML (text/yaml), or JSON {content, name, enabled}. 201 when created, 200 for a new version.",
		req:  sequencePutReq{}, reqAlt: []string{"text/yaml"}, res: sequenceJSON{}, status: http.StatusCreated, also: []int{http.StatusOK}},
	"GET /api/sequences":           {id: "listSequences", summary: "List sequences", res: listJSON[sequenceJSON]{}},
	"GET /api/sequences/:id":       {id: "getSequence", summary: "A sequence with its YAML and steps", res: sequenceJSON{}},
	"PATCH /api/sequences/:id":     {id: "updateSequence", summary: "Rename, enable or disable a sequence", req: sequencePatchReq{}, reqName: "SequencePatchRequest", atLeastOne: true, res: sequenceJSON{}},
	"DELETE /api/sequences/:id":    {id: "deleteSequence", summary: "Delete a sequence", status: http.StatusNoContent},
	"GET /api/sequences/:id/sends": {id: "listSequenceSends", summary: "A sequence's sends", res: listJSON[sendJSON]{}},
	"POST /api/sequences/:id/contacts": {id: "enrol", summary: "Enrol a contact in a sequence", req: enrolReq{}, res: enrolmentJSON{},
		status: http.StatusCreated, also: []int{http.StatusOK}},
	"GET /api/sequences/:id/contacts":               {id: "listEnrolled", summary: "The contacts enrolled in a sequence", res: listJSON[enrolledJSON]{}},
	"DELETE /api/sequences/:id/contacts/:contactId": {id: "unenrol", summary: "Take a contact out of a sequence", status: http.StatusNoContent},
	"GET /api/sequences/:id/status":                 {id: "sequenceStatus", summary: "A sequence's enrolments by status", res: sequenceStatusJSON{}},
	"GET /api/sequences/:id/experiment": {id: "sequenceExperiment", summary: "A sequence's split branches and holdout: conversions to its goal, with intervals and uplift",
		desc: "Each branch's enrolments (entered), the messages they were sent and their outcomes, and the enrolments that converted " +
			"(the goal event arrived within goal.within of enrolment, by the event's time). conversionRate is converted / entered and " +
			"interval its 95% Wilson score interval over n = entered. uplift is each branch's conversionRate minus the holdout's. " +
			"A sequence without a split has one branch, default.",
		res: sequenceExperimentJSON{}},
	"POST /api/sequences/:id/dry-run": {id: "dryRunSequence", summary: "What a step would do for a contact now (nothing is sent or stored)",
		req: dryRunReq{}, res: dryRunJSON{}},

	"GET /api/scheduled":     {id: "listScheduled", summary: "Scheduled sends", res: scheduledPageJSON{}},
	"GET /api/scheduled/:id": {id: "getScheduled", summary: "A scheduled send", res: scheduledJSON{}},

	// Templates.
	"PUT /api/templates/:id": {id: "putTemplate", summary: "Create a template or save a new version (MJML + Liquid)",
		req: templatePutReq{}, reqName: "TemplatePutRequest", atLeastOne: true, res: templateJSON{}, status: http.StatusCreated, also: []int{http.StatusOK}},
	"GET /api/templates":              {id: "listTemplates", summary: "List templates", res: listJSON[templateJSON]{}},
	"GET /api/templates/:id":          {id: "getTemplate", summary: "A template with its content", res: templateJSON{}},
	"DELETE /api/templates/:id":       {id: "deleteTemplate", summary: "Delete a template", status: http.StatusNoContent},
	"GET /api/templates/:id/versions": {id: "listTemplateVersions", summary: "A template's versions", res: itemsJSON[templateVersionJSON]{}},
	"POST /api/templates/:id/preview": {id: "previewTemplate", summary: "Render a template with sample variables", req: previewReq{}, bodyOptional: true,
		desc: "locale renders the locale version a contact of that locale gets (exact tag, then its language, then the template's own). " +
			"warnings name the variables the template reads that the variables lack. A partial that does not exist is VALIDATION_ERROR naming it.",
		res: previewJSON{}},
	"PUT /api/templates/:id/locales/:locale": {id: "putTemplateLocale", summary: "Create or replace a template's version in a language (BCP 47 tag)",
		desc: "Its own subject and content, in the template's layout with its partials. A contact whose locale property is the tag " +
			"(any case), or a tag of that language (de-AT for de), gets it. 201 when created, 200 when replaced.",
		req: localePutReq{}, res: localeJSON{}, status: http.StatusCreated, also: []int{http.StatusOK}},
	"GET /api/templates/:id/locales":            {id: "listTemplateLocales", summary: "A template's locale versions", res: itemsJSON[localeJSON]{}},
	"GET /api/templates/:id/locales/:locale":    {id: "getTemplateLocale", summary: "A template's locale version, with its content", res: localeJSON{}},
	"DELETE /api/templates/:id/locales/:locale": {id: "deleteTemplateLocale", summary: "Delete a template's locale version", status: http.StatusNoContent},

	// Partials: layouts and includes shared by templates.
	"PUT /api/partials/:id": {id: "putPartial", summary: "Create or replace a partial (a layout or an include)",
		desc: "MJML fragment or HTML, with Liquid. Templates include it with {% include 'id' %} or name it as their layout " +
			"(whose content holds {{ content }}). Every template using it is compiled again: the change takes effect at " +
			"their next message; a change one of them cannot compile with is VALIDATION_ERROR naming it. 201 when created, 200 when replaced.",
		req: partialPutReq{}, res: partialJSON{}, status: http.StatusCreated, also: []int{http.StatusOK}},
	"GET /api/partials":     {id: "listPartials", summary: "List partials", res: listJSON[partialJSON]{}},
	"GET /api/partials/:id": {id: "getPartial", summary: "A partial", res: partialJSON{}},
	"DELETE /api/partials/:id": {id: "deletePartial", summary: "Delete a partial no template or partial uses",
		desc: "409 PARTIAL_REFERENCED while a template, a locale version or another partial names it.", status: http.StatusNoContent},

	// Segments.
	"POST /api/segments":             {id: "createSegment", summary: "Create a rule-based segment", req: segmentReq{}, reqName: "SegmentCreateRequest", required: []string{"name", "rules"}, res: segmentJSON{}, status: http.StatusCreated},
	"GET /api/segments":              {id: "listSegments", summary: "List segments", res: listJSON[segmentJSON]{}},
	"GET /api/segments/:id":          {id: "getSegment", summary: "A segment", res: segmentJSON{}},
	"PATCH /api/segments/:id":        {id: "updateSegment", summary: "Change a segment", req: segmentReq{}, reqName: "SegmentUpdateRequest", atLeastOne: true, res: segmentJSON{}},
	"DELETE /api/segments/:id":       {id: "deleteSegment", summary: "Delete a segment", status: http.StatusNoContent},
	"GET /api/segments/:id/members":  {id: "listSegmentMembers", summary: "A segment's members as last computed", res: listJSON[memberJSON]{}},
	"POST /api/segments/:id/compute": {id: "computeSegment", summary: "Compute a segment's members now", res: computedJSON{}},
	"GET /api/segments/:id/explain": {id: "explainSegment", summary: "Why a contact is or is not a member: the rules judged on its current data",
		desc: "Query contactId (required). Each rule node has result; each leaf also actual, the contact's value (null when absent).", res: explainJSON{}},

	// Campaigns.
	"POST /api/campaigns":                              {id: "createCampaign", summary: "Create a campaign", req: campaignReq{}, reqName: "CampaignCreateRequest", required: []string{"name"}, res: campaignJSON{}, status: http.StatusCreated},
	"GET /api/campaigns":                               {id: "listCampaigns", summary: "List campaigns", res: listJSON[campaignJSON]{}},
	"GET /api/campaigns/:campaignId":                   {id: "getCampaign", summary: "A campaign", res: campaignJSON{}},
	"PATCH /api/campaigns/:campaignId":                 {id: "updateCampaign", summary: "Change a campaign", req: campaignReq{}, reqName: "CampaignUpdateRequest", atLeastOne: true, omit: []string{"sequenceIds", "templateIds"}, res: campaignJSON{}},
	"DELETE /api/campaigns/:campaignId":                {id: "deleteCampaign", summary: "Delete a campaign", status: http.StatusNoContent},
	"POST /api/campaigns/:campaignId/sequences/:ref":   {id: "addCampaignSequence", summary: "Add a sequence to a campaign", res: campaignJSON{}},
	"DELETE /api/campaigns/:campaignId/sequences/:ref": {id: "removeCampaignSequence", summary: "Take a sequence out of a campaign", res: campaignJSON{}},
	"POST /api/campaigns/:campaignId/templates/:ref":   {id: "addCampaignTemplate", summary: "Add a template to a campaign", res: campaignJSON{}},
	"DELETE /api/campaigns/:campaignId/templates/:ref": {id: "removeCampaignTemplate", summary: "Take a template out of a campaign", res: campaignJSON{}},

	// Broadcasts.
	"POST /api/broadcasts":               {id: "createBroadcast", summary: "Create a broadcast (a draft)", req: broadcastReq{}, reqName: "BroadcastCreateRequest", required: []string{"name", "templateId", "segmentId"}, res: broadcastJSON{}, status: http.StatusCreated},
	"GET /api/broadcasts":                {id: "listBroadcasts", summary: "List broadcasts", res: listJSON[broadcastJSON]{}},
	"GET /api/broadcasts/:id":            {id: "getBroadcast", summary: "A broadcast with its counts", res: broadcastJSON{}},
	"PATCH /api/broadcasts/:id":          {id: "updateBroadcast", summary: "Change a broadcast not yet sending", req: broadcastReq{}, reqName: "BroadcastUpdateRequest", atLeastOne: true, res: broadcastJSON{}},
	"DELETE /api/broadcasts/:id":         {id: "deleteBroadcast", summary: "Delete a draft broadcast", status: http.StatusNoContent},
	"POST /api/broadcasts/:id/send":      {id: "sendBroadcast", summary: "Send a broadcast now or at sendAt", req: broadcastSendReq{}, bodyOptional: true, res: broadcastJSON{}},
	"POST /api/broadcasts/:id/pause":     {id: "pauseBroadcast", summary: "Pause a sending broadcast", res: broadcastJSON{}},
	"POST /api/broadcasts/:id/resume":    {id: "resumeBroadcast", summary: "Resume a paused broadcast", res: broadcastJSON{}},
	"POST /api/broadcasts/:id/cancel":    {id: "cancelBroadcast", summary: "Cancel a broadcast's unsent messages", res: broadcastJSON{}},
	"GET /api/broadcasts/:id/recipients": {id: "listBroadcastRecipients", summary: "A broadcast's recipients and what became of each", res: listJSON[recipientJSON]{}},
	"POST /api/broadcasts/:id/winner":    {id: "pickBroadcastWinner", summary: "Pick an A/B broadcast's winner by hand; the rest of the audience is sent it", req: broadcastWinnerReq{}, res: broadcastJSON{}},

	// Consent.
	"GET /api/suppressions":           {id: "listSuppressions", summary: "The suppression list, newest first", res: listJSON[suppressionJSON]{}},
	"POST /api/suppressions":          {id: "addSuppression", summary: "Suppress an address (201; 200 when listed already)", req: suppressionReq{}, res: suppressionJSON{}, status: http.StatusCreated, also: []int{http.StatusOK}},
	"DELETE /api/suppressions/:email": {id: "removeSuppression", summary: "Take an address off the suppression list", status: http.StatusNoContent},
	"POST /api/topics":                {id: "createTopic", summary: "Create a topic contacts may subscribe to", req: topicReq{}, reqName: "TopicCreateRequest", required: []string{"topicId", "name", "default"}, res: topicJSON{}, status: http.StatusCreated},
	"GET /api/topics":                 {id: "listTopics", summary: "List topics", res: listJSON[topicJSON]{}},
	"GET /api/topics/:id":             {id: "getTopic", summary: "A topic", res: topicJSON{}},
	"PATCH /api/topics/:id":           {id: "updateTopic", summary: "Change a topic", req: topicReq{}, reqName: "TopicUpdateRequest", atLeastOne: true, omit: []string{"topicId", "default"}, res: topicJSON{}},
	"DELETE /api/topics/:id":          {id: "deleteTopic", summary: "Delete a topic", status: http.StatusNoContent},

	// The audit log.
	"GET /api/audit-log": {id: "listAuditLog", summary: "The audit log: every write under /api that succeeded, newest first",
		desc: "One entry per successful POST, PUT, PATCH or DELETE under /api (a batch of sends: one per send), written in the " +
			"write's own transaction, so a refused or failed write has none; a replayed Idempotency-Key answer adds none. " +
			"Filters: actor (an API key's keyId or a session's subject), action (`<resourceType>.<verb>`, e.g. contact.create), " +
			"resourceType, since (ISO 8601, inclusive). Entries are kept a year; no route changes or deletes them.",
		res: listJSON[auditEntryJSON]{}},

	// Outbound webhooks.
	"POST /api/webhooks":                                 {id: "createWebhook", summary: "Add a webhook endpoint (the secret is shown once)", req: endpointReq{}, reqName: "WebhookCreateRequest", required: []string{"url"}, res: endpointJSON{}, status: http.StatusCreated},
	"GET /api/webhooks":                                  {id: "listWebhooks", summary: "List webhook endpoints", res: listJSON[endpointJSON]{}},
	"GET /api/webhooks/:id":                              {id: "getWebhook", summary: "A webhook endpoint", res: endpointJSON{}},
	"PATCH /api/webhooks/:id":                            {id: "updateWebhook", summary: "Change a webhook endpoint", req: endpointReq{}, reqName: "WebhookUpdateRequest", atLeastOne: true, res: endpointJSON{}},
	"DELETE /api/webhooks/:id":                           {id: "deleteWebhook", summary: "Delete a webhook endpoint", status: http.StatusNoContent},
	"POST /api/webhooks/:id/rotate-secret":               {id: "rotateWebhookSecret", summary: "Replace an endpoint's signing secret", res: secretJSON{}},
	"POST /api/webhooks/:id/test":                        {id: "testWebhook", summary: "Queue a test message to an endpoint", res: queuedJSON{}, status: http.StatusAccepted},
	"GET /api/webhooks/:id/deliveries":                   {id: "listWebhookDeliveries", summary: "An endpoint's deliveries, newest first", res: listJSON[deliveryJSON]{}},
	"POST /api/webhooks/:id/deliveries/:messageId/retry": {id: "retryWebhookDelivery", summary: "Deliver a message again", res: queuedJSON{}, status: http.StatusAccepted},

	// Sending domains.
	"POST /api/domains":                {id: "createDomain", summary: "Add a sending domain", req: domainCreateReq{}, res: domainJSON{}, status: http.StatusCreated},
	"GET /api/domains":                 {id: "listDomains", summary: "List sending domains", res: listJSON[domainJSON]{}},
	"GET /api/domains/:domain":         {id: "getDomain", summary: "A sending domain with its DNS records", res: domainJSON{}},
	"PATCH /api/domains/:domain":       {id: "updateDomain", summary: "Enable or disable sending from a domain, or set its warm-up", req: domainUpdateReq{}, reqName: "DomainUpdateRequest", atLeastOne: true, res: domainJSON{}},
	"DELETE /api/domains/:domain":      {id: "deleteDomain", summary: "Remove a sending domain", status: http.StatusNoContent},
	"POST /api/domains/:domain/verify": {id: "verifyDomain", summary: "Check a domain's DNS records now", res: domainCheckedJSON{}},

	// Engagement metrics.
	"GET /api/metrics":               {id: "getMetrics", summary: "The tenant's counters for a month, a day or a range of days", res: metricsReportJSON{}},
	"GET /api/metrics/sequences":     {id: "listSequenceMetrics", summary: "Each sequence's counters for a month", res: scopedPageJSON{}},
	"GET /api/metrics/sequences/:id": {id: "getSequenceMetrics", summary: "A sequence's counters for a month", res: scopedJSON{}},
	"GET /api/metrics/templates":     {id: "listTemplateMetrics", summary: "Each template's counters for a month", res: scopedPageJSON{}},
	"GET /api/metrics/templates/:id": {id: "getTemplateMetrics", summary: "A template's counters for a month", res: scopedJSON{}},
}

// batchReq is POST /api/send/batch's body as documented. The handler
// reads each message raw, so that a malformed one is an error item rather
// than a 400 for the batch.
type batchReq struct {
	Messages []sendReq `json:"messages" required:"true" min:"1" max:"100" doc:"1-100 messages, each a POST /api/send body."`
}
