import assert from "node:assert/strict";
import { test } from "node:test";
import { adminOpenApiDocument } from "../admin/openapi.ts";
import { adminRouteSpecs } from "../admin/routes.ts";
import type { Db } from "../db/db.ts";
import { openApiDocument } from "../public-api/openapi.ts";
import { PUBLIC_API_VERSION, ROUTES } from "../public-api/plugin.ts";
import type { TokenSigner } from "../storage/tokens.ts";
import { WEBHOOK_EVENTS } from "../webhooks/events.ts";
import { BODY_READING_METHODS, type Json, requestErrors } from "./openapi.ts";

/**
 * The statuses the generator derives from how a request is made: wherever the server reads a body
 * (every method but GET, whether or not the operation takes one), a body can be too large (413),
 * of a media type not taken (415) or not JSON (400), so every such operation documents all three.
 */

const publicDoc = openApiDocument(
  ROUTES,
  "https://api.backline.local/api/public/v1",
  PUBLIC_API_VERSION,
  WEBHOOK_EVENTS,
);
const adminDoc = adminOpenApiDocument(
  adminRouteSpecs({
    // Only the specs are read: no handler runs.
    db: undefined as unknown as Db,
    signer: undefined as unknown as TokenSigner,
    publicUrl: "https://api.backline.local",
    royaltyImportMaxBytes: 0,
  }),
  "https://api.backline.local/admin/v1",
);

function operations(doc: Json): { where: string; method: string; op: Json }[] {
  const out: { where: string; method: string; op: Json }[] = [];
  for (const [path, item] of Object.entries(doc.paths as Record<string, Json>)) {
    for (const [method, op] of Object.entries(item)) {
      out.push({
        where: `${method.toUpperCase()} ${path} (${(op as Json).operationId})`,
        method,
        op: op as Json,
      });
    }
  }
  return out;
}

for (const [name, doc] of [
  ["/api/public/v1", publicDoc],
  ["/admin/v1", adminDoc],
] as const) {
  test(`${name}: every operation whose body the server reads documents 400, 413 and 415`, () => {
    const ops = operations(doc);
    const reading = ops.filter((o) => BODY_READING_METHODS.has(o.method.toUpperCase()));
    assert.ok(reading.length > 10, `${reading.length} operations read a body`);
    for (const { where, op } of reading) {
      const responses = op.responses as Record<string, Json>;
      for (const status of ["400", "413", "415"]) {
        assert.ok(responses[status], `${where} documents ${status}`);
      }
    }
    // GET bodies are never read: no GET documents 413 or 415.
    for (const { where, op } of ops.filter((o) => o.method === "get")) {
      const responses = op.responses as Record<string, Json>;
      assert.equal(responses["413"], undefined, `${where} documents no 413`);
      assert.equal(responses["415"], undefined, `${where} documents no 415`);
    }
  });
}

test("/api/public/v1: the operations without a request body that read one document 413 and 415", () => {
  const bodiless = operations(publicDoc).filter((o) => o.method !== "get" && !o.op.requestBody);
  const names = bodiless.map((o) => String(o.op.operationId));
  // The five POSTs issue 47 found without 413 and 415, and the DELETEs.
  for (const id of [
    "submitRelease",
    "resendApiKeyVerification",
    "freezeApiKey",
    "unfreezeApiKey",
    "retryWebhookDelivery",
    "deleteRelease",
  ]) {
    assert.ok(names.includes(id), `${id} has no request body (${names})`);
  }
  for (const { where, op } of bodiless) {
    const responses = op.responses as Record<string, Json>;
    assert.ok(responses["413"] && responses["415"], `${where}: 413 and 415`);
  }
});

test("requestErrors: 400/413/415 by method, 400 for a GET with a query", () => {
  assert.deepEqual(requestErrors({ method: "GET" }), []);
  assert.deepEqual(requestErrors({ method: "GET", query: {} }), [400]);
  for (const method of ["POST", "PUT", "PATCH", "DELETE", "post"]) {
    assert.deepEqual(requestErrors({ method }), [400, 413, 415], method);
  }
});
