// Drives a contact, a template and a send through the generated client
// against a running service: TIDINGS_URL and TIDINGS_API_KEY name it
// (api/client_ts_test.go starts one and runs this file with node --test).
import { test } from "node:test";
import assert from "node:assert/strict";
import { tidings } from "./index.js";

const url = process.env.TIDINGS_URL;
const key = process.env.TIDINGS_API_KEY;

test("a contact, a template and a send", { skip: !url || !key }, async () => {
  const api = tidings(url!, key!);

  const contact = await api.POST("/api/contacts", {
    body: { email: "ann@example.com", properties: { firstName: "Ann" } },
  });
  assert.equal(contact.response.status, 201, JSON.stringify(contact.error));
  assert.equal(contact.data?.email, "ann@example.com");

  const template = await api.PUT("/api/templates/{id}", {
    params: { path: { id: "welcome" } },
    body: {
      name: "Welcome",
      subject: "Hi {{ contact.properties.firstName }}",
      content: "<mjml><mj-body><mj-section><mj-column><mj-text>Hello {{ name }}!</mj-text></mj-column></mj-section></mj-body></mjml>",
    },
  });
  assert.equal(template.response.status, 201, JSON.stringify(template.error));
  assert.equal(template.data?.currentVersion, 1);

  const allowed = await api.POST("/api/tenant/sandbox-whitelist", { body: { email: "ann@example.com" } });
  assert.ok(allowed.data?.emails.includes("ann@example.com"), JSON.stringify(allowed.error));

  const sent = await api.POST("/api/send", {
    params: { header: { "Idempotency-Key": "ts-order-1" } },
    body: { to: "ann@example.com", template: "welcome", variables: { name: "Ada" } },
  });
  assert.equal(sent.response.status, 200, JSON.stringify(sent.error));
  assert.equal(sent.data?.status, "sent");
  const sendId = sent.data!.sendId;

  const record = await api.GET("/api/sends/{sendId}", { params: { path: { sendId } } });
  assert.equal(record.data?.toAddress, "ann@example.com");
  assert.equal(record.data?.templateId, "welcome");

  const missing = await api.POST("/api/send", { body: { to: "ann@example.com", template: "nope" } });
  assert.equal(missing.response.status, 404);
  assert.equal(missing.error?.error.code, "TEMPLATE_NOT_FOUND");
});
