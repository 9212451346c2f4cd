// The TypeScript client of the Tidings API. The types (schema.d.ts) are
// generated from docs/openapi.json by openapi-typescript (make generate);
// openapi-fetch makes typed requests with them: paths, parameters, bodies
// and answers are checked by the compiler.
import createClient, { type Client } from "openapi-fetch";
import type { paths, components } from "./schema.js";

export type { paths, components };
export type Schemas = components["schemas"];

/** A client of the Tidings api at baseUrl (http://localhost:8080 under make run), authenticated by an API key. */
export function tidings(baseUrl: string, apiKey: string): Client<paths> {
  return createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${apiKey}` } });
}
