import assert from "node:assert/strict";
import fs from "node:fs";
import { test } from "node:test";
import { z } from "zod";
import { deprecationHeaders } from "./deprecation.ts";
import { openApiDocument } from "./openapi.ts";
import { PUBLIC_API_VERSION } from "./plugin.ts";
import { route } from "./route.ts";

const d = {
  since: "2027-01-01",
  sunset: "2028-01-01",
  successor: "/api/public/v2/things",
  changelog: "https://x/changelog#2027",
};

test("deprecationHeaders: RFC 9745 Deprecation, RFC 8594 Sunset, Link to the changelog and the successor", () => {
  assert.deepEqual(deprecationHeaders(d), {
    Deprecation: "@1798761600",
    Sunset: "Sat, 01 Jan 2028 00:00:00 GMT",
    Link: '<https://x/changelog#2027>; rel="deprecation"; type="text/html", </api/public/v2/things>; rel="successor-version"',
  });
});

test("deprecationHeaders refuses a sunset less than twelve months after the deprecation", () => {
  assert.throws(() => deprecationHeaders({ ...d, sunset: "2027-06-01" }), /365 days/);
  assert.throws(() => deprecationHeaders({ ...d, since: "soon" }), /dates/);
});

test("a deprecated route is deprecated in the OpenAPI document, its answers with the three headers", () => {
  const spec = route({
    method: "GET",
    path: "/things",
    operationId: "listThings",
    summary: "List things",
    tag: "Things",
    scope: "catalog:read",
    deprecated: d,
    response: { status: 200, description: "Things.", schema: z.object({ ok: z.boolean() }) },
    handler: async () => ({ body: { ok: true } }),
  });
  const doc = openApiDocument([spec], "http://x", "1.0.0") as {
    paths: Record<
      string,
      Record<
        string,
        { deprecated?: boolean; description?: string; responses: Record<string, { headers?: object }> }
      >
    >;
  };
  const op = doc.paths["/things"]?.get;
  assert.equal(op?.deprecated, true);
  assert.match(
    op?.description ?? "",
    /since 2027-01-01; answers until at least 2028-01-01; use \/api\/public\/v2\/things/,
  );
  for (const status of ["200", "401", "429"]) {
    const headers = Object.keys(op?.responses[status]?.headers ?? {});
    for (const h of ["Deprecation", "Sunset", "Link"]) assert.ok(headers.includes(h), `${status}: ${h}`);
  }
});

test("docs/changelog.md has an entry for the public API's current version", () => {
  const changelog = fs.readFileSync(new URL("../../docs/changelog.md", import.meta.url), "utf8");
  assert.match(changelog, new RegExp(`^## ${PUBLIC_API_VERSION.replace(/\./g, "\\.")} `, "m"));
});
