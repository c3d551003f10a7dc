import assert from "node:assert/strict";
import { test } from "node:test";
import { renderDocsPage } from "./docs-page.ts";

const doc: Record<string, unknown> = {
  openapi: "3.1.0",
  info: {
    title: "Backline <script>alert('title')</script>",
    version: "1.2.3",
    description:
      "Manage your **catalog**.\n\n- Use `Authorization: Bearer <key>`\n- See [guide](https://example.com/guide)\n\n[bad](javascript:alert(1)) <img src=x onerror=alert(1)>",
  },
  servers: [{ url: "https://api.example.com/api/public/v1", description: "Production" }],
  tags: [{ name: "releases", description: "Releases and their tracks." }, { name: "webhooks" }],
  security: [{ apiKey: [] }],
  paths: {
    "/releases": {
      get: {
        operationId: "listReleases",
        tags: ["releases"],
        summary: "List releases",
        parameters: [
          {
            name: "status",
            in: "query",
            description: "Filter by status",
            schema: { type: "string", enum: ["draft", "submitted", "live"], default: "draft" },
          },
          { $ref: "#/components/parameters/limit" },
        ],
        responses: {
          "200": {
            description: "The releases",
            content: {
              "application/json": {
                schema: { type: "array", items: { $ref: "#/components/schemas/Release" } },
              },
            },
          },
          "401": { $ref: "#/components/responses/Unauthorized" },
        },
      },
      post: {
        operationId: "createRelease",
        tags: ["releases"],
        summary: "Create a release",
        description: "Creates a draft. <script>alert('op')</script>",
        requestBody: {
          required: true,
          content: { "application/json": { schema: { $ref: "#/components/schemas/ReleaseInput" } } },
        },
        responses: { "201": { description: "Created" } },
      },
    },
    "/releases/{id}": {
      parameters: [{ name: "id", in: "path", required: true, schema: { type: "string", format: "uuid" } }],
      delete: {
        operationId: "deleteRelease",
        tags: ["releases"],
        deprecated: true,
        responses: { "204": { description: "Gone" } },
      },
    },
    "/webhooks": {
      get: { operationId: "listWebhooks", tags: ["webhooks"], summary: "List webhooks", responses: {} },
    },
    "/ping": { get: { summary: "Ping", responses: { default: { description: "pong" } } } },
  },
  components: {
    parameters: {
      limit: { name: "limit", in: "query", schema: { type: "integer", minimum: 1, maximum: 100 } },
    },
    responses: { Unauthorized: { description: "Missing or invalid API key" } },
    securitySchemes: { apiKey: { type: "http", scheme: "bearer", description: "An account API key" } },
    schemas: {
      Release: {
        type: "object",
        required: ["id", "title"],
        properties: {
          id: { type: "string", format: "uuid" },
          title: { type: "string", maxLength: 200, description: "Shown <b>in stores</b>" },
          upc: { type: ["string", "null"], pattern: "^[0-9]{12,13}$", examples: ["012345678905"] },
          artist: { $ref: "#/components/schemas/Artist" },
          tracks: { type: "array", items: { $ref: "#/components/schemas/Track" } },
          labels: { type: "object", additionalProperties: { type: "string" } },
        },
      },
      ReleaseInput: {
        allOf: [
          { $ref: "#/components/schemas/Release" },
          { type: "object", properties: { note: { type: "string" } } },
        ],
      },
      Artist: { type: "object", properties: { artistName: { type: "string", description: "Stage name" } } },
      Track: {
        type: "object",
        required: ["isrc"],
        properties: {
          isrc: { type: "string" },
          release: { $ref: "#/components/schemas/Release" },
          kind: { oneOf: [{ const: "audio" }, { const: "video" }] },
        },
      },
      Node: {
        type: "object",
        properties: { children: { type: "array", items: { $ref: "#/components/schemas/Node" } } },
      },
      Loop: { $ref: "#/components/schemas/Loop" },
      "<img src=x>": { type: "string" },
    },
  },
};

const page = renderDocsPage(doc);
/** The section for one operation, from its anchor to the end of that section. */
const section = (anchor: string) => {
  const start = page.indexOf(`id="${anchor}"`);
  assert.ok(start >= 0, `missing #${anchor}`);
  return page.slice(start, page.indexOf("</section>", start));
};

test("renders a complete page with no external resources", () => {
  assert.match(page, /^<!doctype html>/);
  assert.match(page, /<\/html>\n$/);
  assert.doesNotMatch(page, /<script|<link|@import|url\(/i);
  assert.doesNotMatch(page, /\bsrc=["']?https?:/i);
  assert.match(page, /1\.2\.3/);
  assert.match(page, /https:\/\/api\.example\.com\/api\/public\/v1/);
  assert.match(page, /An account API key/);
});

test("lists every operation with an anchor, grouped by tag in the sidebar", () => {
  for (const id of ["listReleases", "createRelease", "deleteRelease", "listWebhooks"]) {
    assert.match(page, new RegExp(`id="op-${id}"`));
    assert.match(page, new RegExp(`href="#op-${id}"`));
  }
  assert.match(page, /id="op-get--ping"/, "operations without an operationId still get an anchor");
  const nav = page.slice(page.indexOf("<nav>"), page.indexOf("</nav>"));
  const releases = nav.indexOf(">releases<");
  const webhooks = nav.indexOf(">webhooks<");
  assert.ok(releases >= 0 && webhooks > releases);
  assert.ok(nav.indexOf("#op-createRelease") > releases && nav.indexOf("#op-createRelease") < webhooks);
  assert.ok(nav.indexOf("#op-listWebhooks") > webhooks);
  assert.match(nav, />Other</);
  assert.match(page, /Releases and their tracks\./);
  assert.match(section("op-listReleases"), /m-get">GET</);
  assert.match(section("op-deleteRelease"), /\{id\}/);
  assert.match(section("op-deleteRelease"), /deprecated/);
});

test("resolves $refs to schemas, parameters and responses", () => {
  const list = section("op-listReleases");
  assert.match(list, /array&lt;<a href="#schema-Release">Release<\/a>&gt;/);
  assert.match(list, /<code>artistName<\/code>/, "nested referenced schema is expanded inline");
  assert.match(list, /<code>limit<\/code>/);
  assert.match(list, /<b>minimum<\/b> <code>1<\/code>/);
  assert.match(list, /<b>maximum<\/b> <code>100<\/code>/);
  assert.match(list, /Missing or invalid API key/);
  assert.match(list, /any other key/);
  assert.match(section("op-createRelease"), />all of</);
  assert.match(section("op-createRelease"), /<code>note<\/code>/);
  assert.match(page, /id="schema-Artist"/);
  assert.match(page, /nullable/);
  assert.match(page, /<b>pattern<\/b> <code>\^\[0-9\]\{12,13\}\$<\/code>/);
});

test("stops at recursive references", () => {
  assert.match(page, /recursive: see <a href="#schema-Release">Release<\/a>/);
  assert.match(page, /recursive: see <a href="#schema-Node">Node<\/a>/);
  assert.match(page, /recursive: see <a href="#schema-Loop">Loop<\/a>/);
});

test("escapes every string taken from the document", () => {
  assert.doesNotMatch(page, /<script/i);
  assert.doesNotMatch(page, /<img/i);
  assert.doesNotMatch(page, /<b>in stores/);
  assert.doesNotMatch(page, /href="javascript:/i);
  assert.match(
    page,
    /<title>Backline &#60;script&#62;alert\(&#39;title&#39;\)&#60;\/script&#62; — API reference<\/title>/,
  );
  assert.match(page, /Creates a draft\. &#60;script&#62;/);
  assert.match(page, /&#60;img src=x onerror=alert\(1\)&#62;/);
});

test("renders a safe Markdown subset in descriptions", () => {
  assert.match(page, /<strong>catalog<\/strong>/);
  assert.match(page, /<li>Use <code>Authorization: Bearer &#60;key&#62;<\/code><\/li>/);
  assert.match(page, /<a href="https:\/\/example\.com\/guide" rel="noreferrer">guide<\/a>/);
  assert.match(page, /\[bad\]\(javascript:alert\(1\)\)/);
});

test("renders enums, defaults and required markers", () => {
  const list = section("op-listReleases");
  assert.match(
    list,
    /<b>enum<\/b> <code>&#34;draft&#34;<\/code> <code>&#34;submitted&#34;<\/code> <code>&#34;live&#34;<\/code>/,
  );
  assert.match(list, /<b>default<\/b> <code>&#34;draft&#34;<\/code>/);
  const required = /<code>(\w+)<\/code><span class="req"/g;
  const release = page.slice(page.indexOf('id="schema-Release"'), page.indexOf('id="schema-ReleaseInput"'));
  const marked = new Set([...release.matchAll(required)].map((m) => m[1]));
  assert.ok(marked.has("id") && marked.has("title") && marked.has("isrc"));
  assert.ok(!marked.has("upc") && !marked.has("artist"));
  assert.match(section("op-deleteRelease"), /<code>id<\/code><span class="req"/);
  assert.match(section("op-createRelease"), /Request body<span class="req"/);
  assert.doesNotMatch(section("op-listReleases"), /<code>status<\/code><span class="req"/);
});

test("accepts an empty or malformed document", () => {
  const empty = renderDocsPage({});
  assert.match(empty, /API reference/);
  const odd = renderDocsPage({
    info: { title: 42 },
    paths: { "/x": { get: null, post: "nope" } },
    tags: "x",
  });
  assert.match(odd, /<\/html>/);
});
