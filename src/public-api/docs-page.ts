/**
 * The reference page served at GET /api/public/v1/docs, rendered from the OpenAPI 3.1 document.
 * Self-contained (the server may be offline); every string from the document is escaped, it is data
 * and never markup, and a CSP meta tag forbids scripts as a second line of defence.
 */

type Json = Record<string, unknown>;

/** An OpenAPI 3.1 document. Read defensively: info, servers, tags, paths, components, security. */
export interface OpenApiDocument {
  info?: { title?: unknown; version?: unknown; description?: unknown; [key: string]: unknown };
  [key: string]: unknown;
}

const METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"] as const;
/** Inline expansion of `$ref`s stops here (recursion is caught earlier; this bounds wide fan-out). */
const MAX_REF_DEPTH = 6;
const REQUIRED = '<span class="req" title="required">required</span>';
/** minimum, maxLength, exclusiveMaximum, minItems, maxProperties, multipleOf, ... */
const BOUND = /^(min|max|exclusiveM|multipleOf)/;
const FLAGS = ["readOnly", "writeOnly", "deprecated", "uniqueItems"];
const COMPOSITIONS = { oneOf: "one of", anyOf: "any of", allOf: "all of" };
const SAFE_URL = /^(https?:\/\/|mailto:|#|\/(?!\/))/i;
const INLINE_MD = /`([^`\n]+)`|\[([^\]\n]+)\]\(([^()\s]+)\)|\*\*([^*\n]+)\*\*/g;
const FENCE = /^\s*(```|~~~)/;

const isObj = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);
const obj = (v: unknown): Json => (isObj(v) ? v : {});
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
const slug = (s: string): string => s.replace(/[^A-Za-z0-9_.-]/g, "-");

/** Every string from the document goes through here before it reaches the page. */
const esc = (v: unknown): string => String(v ?? "").replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

const keyList = (v: unknown, sep: string): string => Object.keys(obj(v)).map(esc).join(sep);

/** The document is served as JSON too, so its values always stringify. */
const json = (v: unknown): string => `<code>${esc(JSON.stringify(v) ?? String(v))}</code>`;
const chip = (label: string, html = ""): string => `<span class="chip"><b>${label}</b> ${html}</span>`;
const table = (cols: string[], rows: string[]): string =>
  `<table><thead><tr>${cols.map((c) => `<th>${c}</th>`).join("")}</tr></thead><tbody>${rows.join("")}</tbody></table>`;
const cells = (...tds: string[]): string => `<tr>${tds.map((td) => `<td>${td}</td>`).join("")}</tr>`;

function inline(text: string): string {
  let out = "";
  let last = 0;
  for (const m of text.matchAll(INLINE_MD)) {
    const [all, code, label, href, bold] = m;
    out += esc(text.slice(last, m.index));
    if (code !== undefined) out += `<code>${esc(code)}</code>`;
    else if (label !== undefined && href !== undefined)
      out += SAFE_URL.test(href) ? `<a href="${esc(href)}" rel="noreferrer">${esc(label)}</a>` : esc(all);
    else out += `<strong>${esc(bold)}</strong>`;
    last = m.index + all.length;
  }
  return out + esc(text.slice(last));
}

/** A small, safe Markdown subset: paragraphs, lists, fenced code, headings, `code`, links, bold. */
function markdown(src: unknown): string {
  if (typeof src !== "string" || !src.trim()) return "";
  const out: string[] = [];
  let para: string[] = [];
  let list: { tag: "ul" | "ol"; items: string[] } | undefined;
  const flush = () => {
    if (para.length) out.push(`<p>${inline(para.join(" "))}</p>`);
    if (list)
      out.push(`<${list.tag}>${list.items.map((i) => `<li>${inline(i)}</li>`).join("")}</${list.tag}>`);
    para = [];
    list = undefined;
  };
  const lines = src.replace(/\r\n?/g, "\n").split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? "";
    const item = /^\s*([-*+]|\d+[.)])\s+(.*)$/.exec(line);
    const heading = /^#{1,6}\s+(.*)$/.exec(line);
    if (FENCE.test(line)) {
      flush();
      const code: string[] = [];
      while (++i < lines.length && !FENCE.test(lines[i] ?? "")) code.push(lines[i] ?? "");
      out.push(`<pre><code>${esc(code.join("\n"))}</code></pre>`);
    } else if (item) {
      const tag = /\d/.test(item[1] ?? "") ? "ol" : "ul";
      if (para.length || list?.tag !== tag) flush();
      list ??= { tag, items: [] };
      list.items.push(item[2] ?? "");
    } else if (!line.trim()) flush();
    else if (heading) {
      flush();
      out.push(`<p><strong>${inline(heading[1] ?? "")}</strong></p>`);
    } else if (list && /^\s/.test(line)) list.items.push(`${list.items.pop() ?? ""} ${line.trim()}`);
    else {
      if (list) flush();
      para.push(line.trim());
    }
  }
  flush();
  return `<div class="md">${out.join("")}</div>`;
}

/** Follows a local JSON pointer (`#/components/...`); anything else is left unresolved. */
function pointer(doc: unknown, ref: string): unknown {
  if (!ref.startsWith("#/")) return undefined;
  let cur = doc;
  for (const raw of ref.slice(2).split("/")) {
    const key = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    if (!isObj(cur) || !Object.hasOwn(cur, key)) return undefined;
    cur = cur[key];
  }
  return cur;
}

/** Resolves a referenced parameter, response, request body or path item (chains bounded). */
function deref(v: unknown, doc: unknown): Json {
  let cur = v;
  for (let hops = 0; hops < 10 && isObj(cur) && typeof cur.$ref === "string"; hops++)
    cur = pointer(doc, cur.$ref);
  return obj(cur);
}

function refLink(ref: string): string {
  const name = /^#\/components\/schemas\/([^/]+)$/.exec(ref)?.[1];
  return name ? `<a href="#schema-${esc(slug(name))}">${esc(name)}</a>` : `<code>${esc(ref)}</code>`;
}

function typeLabel(s: unknown): string {
  if (!isObj(s)) return s === false ? "never" : "any";
  if (typeof s.$ref === "string") return refLink(s.$ref);
  const types = (Array.isArray(s.type) ? s.type : [s.type]).filter((t) => typeof t === "string");
  const nullable = types.includes("null") || s.nullable === true;
  const array = `array&lt;${s.items === undefined ? "any" : typeLabel(s.items)}&gt;`;
  const names = types.filter((t) => t !== "null").map((t) => (t === "array" ? array : esc(t)));
  if (types.length && !names.length) return "null";
  const composition = Object.entries(COMPOSITIONS).find(([key]) => key in s)?.[1];
  if (!names.length) names.push(composition ?? (s.properties || s.additionalProperties ? "object" : "any"));
  const format = typeof s.format === "string" ? ` <span class="fmt">${esc(s.format)}</span>` : "";
  return `${names.join(" | ")}${format}${nullable ? ' <span class="null">nullable</span>' : ""}`;
}

/** Description and constraints of one schema (not its nested structure). */
function facts(s: unknown): string {
  if (!isObj(s)) return "";
  const chips: string[] = [];
  const add = (label: string, html: string) => chips.push(chip(label, html));
  if (Array.isArray(s.enum)) add("enum", s.enum.map(json).join(" "));
  if ("const" in s) add("const", json(s.const));
  if ("default" in s) add("default", json(s.default));
  for (const [key, v] of Object.entries(s)) if (BOUND.test(key)) add(esc(key), json(v));
  if (typeof s.pattern === "string") add("pattern", `<code>${esc(s.pattern)}</code>`);
  const examples = Array.isArray(s.examples) ? s.examples : "example" in s ? [s.example] : [];
  if (examples.length) add("example", examples.map(json).join(" "));
  for (const flag of FLAGS) if (s[flag] === true) chips.push(chip(flag));
  return markdown(s.description) + (chips.length ? `<div class="chips">${chips.join("")}</div>` : "");
}

function fieldRow(nameHtml: string, s: unknown, doc: Json, seen: ReadonlySet<string>, depth: number): string {
  return cells(nameHtml, typeLabel(s), facts(s) + structure(s, doc, seen, depth));
}

/** Nested structure: `$ref` expansion, properties, items and compositions. */
function structure(s: unknown, doc: Json, seen: ReadonlySet<string>, depth: number): string {
  if (!isObj(s)) return "";
  if (typeof s.$ref === "string") {
    const ref = s.$ref;
    if (seen.has(ref)) return `<p class="note">↻ recursive: see ${refLink(ref)}</p>`;
    if (depth >= MAX_REF_DEPTH) return `<p class="note">see ${refLink(ref)}</p>`;
    const target = pointer(doc, ref);
    if (target === undefined) return `<p class="note">unresolved reference <code>${esc(ref)}</code></p>`;
    const inner = facts(target) + structure(target, doc, new Set(seen).add(ref), depth + 1);
    return `<div class="nest"><span class="tl">${typeLabel(target)}</span>${inner}</div>`;
  }
  const parts: string[] = [];
  const required = new Set(arr(s.required));
  const rows = Object.entries(obj(s.properties)).map(([name, p]) =>
    fieldRow(`<code>${esc(name)}</code>${required.has(name) ? REQUIRED : ""}`, p, doc, seen, depth),
  );
  const extra = s.additionalProperties;
  if (extra === true || isObj(extra)) rows.push(fieldRow("<em>any other key</em>", extra, doc, seen, depth));
  if (rows.length) parts.push(table(["Field", "Type", "Details"], rows));
  if (extra === false) parts.push('<p class="note">No other properties allowed.</p>');
  if (s.items !== undefined) {
    const inner = facts(s.items) + structure(s.items, doc, seen, depth);
    if (inner) parts.push(`<div class="nest"><div class="label">each item</div>${inner}</div>`);
  }
  for (const [key, label] of Object.entries(COMPOSITIONS)) {
    const variants = arr(s[key]).map(
      (v) => `<li><span class="tl">${typeLabel(v)}</span>${facts(v)}${structure(v, doc, seen, depth)}</li>`,
    );
    if (variants.length)
      parts.push(`<div class="nest"><div class="label">${label}</div><ol>${variants.join("")}</ol></div>`);
  }
  return parts.join("");
}

function schemaBlock(s: unknown, doc: Json, seen: ReadonlySet<string> = new Set()): string {
  if (s === undefined) return "";
  const body = facts(s) + structure(s, doc, seen, 0);
  return `<div class="schema"><div class="tl">${typeLabel(s)}</div>${body}</div>`;
}

function content(c: unknown, doc: Json): string {
  let html = "";
  for (const [type, m] of Object.entries(obj(c)))
    html += `<div class="media"><code>${esc(type)}</code>${schemaBlock(obj(m).schema, doc)}</div>`;
  return html;
}

function securityText(reqs: unknown): string {
  const alternatives = arr(reqs).map((r) => keyList(r, " + ") || "none");
  return alternatives.length ? alternatives.join(" or ") : "none";
}

type Operation = { anchor: string; method: string; path: string; op: Json; params: Json[] };

/** Operations grouped by tag, declared tags first; each is listed under its first tag only. */
function collectOperations(doc: Json): Map<string, Operation[]> {
  const groups = new Map<string, Operation[]>();
  for (const t of arr(doc.tags)) groups.set(String(obj(t).name), []);
  const used = new Set<string>();
  for (const [path, rawItem] of Object.entries(obj(doc.paths))) {
    const item = deref(rawItem, doc);
    for (const method of METHODS) {
      const op = item[method];
      if (!isObj(op)) continue;
      const base = `op-${slug(str(op.operationId) ?? `${method}-${path}`)}`;
      let anchor = base;
      for (let n = 2; used.has(anchor); n++) anchor = `${base}-${n}`;
      used.add(anchor);
      const params = new Map<string, Json>();
      for (const p of [...arr(item.parameters), ...arr(op.parameters)].map((p) => deref(p, doc)))
        params.set(`${String(p.in)}:${String(p.name)}`, p);
      const tag = str(arr(op.tags)[0]) ?? "Other";
      if (!groups.has(tag)) groups.set(tag, []);
      groups.get(tag)?.push({ anchor, method, path, op, params: [...params.values()] });
    }
  }
  for (const [tag, ops] of groups) if (!ops.length) groups.delete(tag);
  return groups;
}

const methodBadge = (m: string) => `<span class="m m-${m}">${m.toUpperCase()}</span>`;
const pathHtml = (p: string) => esc(p).replace(/\{([^}]+)\}/g, '<span class="pp">{$1}</span>');

function renderParameters(params: Json[], doc: Json): string {
  if (!params.length) return "";
  const rows = params.map((p) => {
    const schema = p.schema ?? obj(Object.values(obj(p.content))[0]).schema;
    const name = `<code>${esc(p.name)}</code>${p.required === true ? REQUIRED : ""}`;
    const details = markdown(p.description) + (p.deprecated === true ? chip("deprecated") : "");
    const schemaHtml = facts(schema) + structure(schema, doc, new Set(), 0);
    return cells(name, esc(p.in), typeLabel(schema), details + schemaHtml);
  });
  return `<h4>Parameters</h4>${table(["Name", "In", "Type", "Details"], rows)}`;
}

function renderOperation(o: Operation, doc: Json): string {
  const { op } = o;
  const deprecated = op.deprecated === true;
  const meta = [
    op.operationId !== undefined ? `Operation ID <code>${esc(op.operationId)}</code>` : "",
    `Auth: ${securityText(op.security ?? doc.security)}`,
  ].filter(Boolean);
  const path = `<code class="path">${pathHtml(o.path)}</code>${deprecated ? chip("deprecated") : ""}`;
  const out = [
    `<section class="op${deprecated ? " deprecated" : ""}" id="${esc(o.anchor)}">`,
    `<h3>${methodBadge(o.method)} ${path}</h3>`,
    op.summary ? `<p class="summary">${esc(op.summary)}</p>` : "",
    markdown(op.description),
    `<p class="muted">${meta.join(" · ")}</p>`,
    renderParameters(o.params, doc),
  ];
  if (op.requestBody !== undefined) {
    const body = deref(op.requestBody, doc);
    out.push(`<h4>Request body${body.required === true ? REQUIRED : ""}</h4>`, markdown(body.description));
    out.push(content(body.content, doc));
  }
  const responses = Object.entries(obj(op.responses)).sort(([a], [b]) => a.localeCompare(b));
  if (responses.length) out.push("<h4>Responses</h4>");
  for (const [status, raw] of responses) {
    const r = deref(raw, doc);
    const cls = /^[1-5]/.test(status) ? `s${status[0]}` : "sd";
    out.push(`<div class="resp"><span class="status ${cls}">${esc(status)}</span>${markdown(r.description)}`);
    out.push(`${content(r.content, doc)}</div>`);
  }
  return `${out.join("")}</section>`;
}

function renderSecuritySchemes(schemes: Json): string {
  const rows = Object.entries(schemes).map(([name, raw]) => {
    const s = obj(raw);
    const details = [
      s.scheme !== undefined ? `scheme <code>${esc(s.scheme)}</code>` : "",
      s.bearerFormat !== undefined ? `format <code>${esc(s.bearerFormat)}</code>` : "",
      s.in !== undefined ? `<code>${esc(s.name)}</code> in ${esc(s.in)}` : "",
      s.openIdConnectUrl !== undefined ? `<code>${esc(s.openIdConnectUrl)}</code>` : "",
      ...Object.entries(obj(s.flows)).map(
        ([flow, f]) => `${esc(flow)} flow: ${keyList(obj(f).scopes, ", ")}`,
      ),
    ].filter(Boolean);
    return cells(`<code>${esc(name)}</code>`, esc(s.type), details.join("<br>"), markdown(s.description));
  });
  const heading = "<h2>Authentication</h2>";
  return rows.length
    ? `<section id="auth">${heading}${table(["Name", "Type", "Details", "Description"], rows)}</section>`
    : "";
}

const CSS = `
:root{--fg:#1f2328;--muted:#656d76;--line:#d0d7de;--soft:#f6f8fa;--accent:#0969da}
*{box-sizing:border-box}
body{margin:0;display:flex;font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:#fff}
nav{position:sticky;top:0;height:100vh;overflow:auto;width:290px;flex:none;padding:1rem;border-right:1px solid var(--line);background:var(--soft);font-size:13px}
nav ul{list-style:none;margin:0;padding:0}nav a{display:block;padding:2px 0;color:inherit;text-decoration:none}nav a:hover{color:var(--accent)}
nav h4{margin:1rem 0 .3rem;font-size:11px;text-transform:uppercase;letter-spacing:.05em;color:var(--muted)}
main{flex:1;min-width:0;max-width:1100px;padding:1.5rem 2.5rem}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.9em}
code{background:var(--soft);padding:0 .25em;border-radius:4px}pre{background:var(--soft);padding:.75rem;overflow:auto;border-radius:6px}
a{color:var(--accent)}h2{margin-top:2.5rem;padding-bottom:.3rem;border-bottom:1px solid var(--line)}
.op{margin:1.25rem 0;padding:1rem 1.25rem;border:1px solid var(--line);border-radius:8px}
.op h3{margin:0;display:flex;gap:.6rem;align-items:center;flex-wrap:wrap}.path{font-weight:600;background:none}.pp{color:var(--accent)}
.deprecated .path{text-decoration:line-through}.summary{font-weight:600;margin:.5rem 0 0}
.m{display:inline-block;min-width:4.5em;padding:1px 6px;border-radius:4px;text-align:center;font:700 11px/1.6 ui-monospace,monospace;color:#fff;background:#6e7781}
.m-get{background:#1a7f37}.m-post{background:#0969da}.m-put{background:#9a6700}.m-patch{background:#8250df}.m-delete{background:#cf222e}
table{width:100%;margin:.5rem 0;border-collapse:collapse;font-size:14px}th,td{padding:.35rem .5rem;border:1px solid var(--line);text-align:left;vertical-align:top}th{background:var(--soft)}
.req{margin-left:.4em;font-size:11px;font-weight:600;color:#cf222e}
.chip{display:inline-block;margin:0 .5rem .2rem 0;font-size:12px;color:var(--muted)}.chip b{color:var(--fg)}
.fmt,.null,.muted,.note{font-size:12px;color:var(--muted)}.tl{font-size:13px}
.nest{margin:.4rem 0 .2rem;padding-left:.75rem;border-left:3px solid var(--line)}.nest ol{padding-left:1.2rem}
.label{font-size:11px;font-weight:600;text-transform:uppercase;color:var(--muted)}
.resp,.media{margin:.5rem 0}.media>code{font-size:12px}.schema{margin:.3rem 0}
.status{padding:1px 6px;border-radius:4px;background:var(--soft);font:700 13px ui-monospace,monospace}
.s2{color:#1a7f37}.s3{color:#9a6700}.s4,.s5{color:#cf222e}
@media (max-width:800px){body{display:block}nav{position:static;width:auto;height:auto}}
`;

/** Renders the complete HTML reference page for an OpenAPI 3.1 document. Pure; no I/O. */
export function renderDocsPage(doc: OpenApiDocument): string {
  const d = doc as Json;
  const info = obj(d.info);
  const title = str(info.title) ?? "API reference";
  const groups = collectOperations(d);
  const schemas = obj(obj(d.components).schemas);
  const tagInfo = new Map(arr(d.tags).map((t) => [String(obj(t).name), obj(t)]));
  const tagIds = new Map([...groups.keys()].map((tag, i) => [tag, `tag-${i + 1}-${slug(tag)}`]));

  const nav = [`<strong>${esc(title)}</strong><ul><li><a href="#overview">Overview</a></li></ul>`];
  for (const [tag, ops] of groups) {
    const link = (o: Operation) => `${methodBadge(o.method)} ${esc(o.op.summary ?? o.path)}`;
    const items = ops.map((o) => `<li><a href="#${esc(o.anchor)}">${link(o)}</a></li>`);
    nav.push(`<h4><a href="#${esc(tagIds.get(tag))}">${esc(tag)}</a></h4><ul>${items.join("")}</ul>`);
  }
  if (Object.keys(schemas).length) {
    const items = Object.keys(schemas).map((n) => `<li><a href="#schema-${esc(slug(n))}">${esc(n)}</a></li>`);
    nav.push(`<h4><a href="#schemas">Schemas</a></h4><ul>${items.join("")}</ul>`);
  }

  const server = (s: Json) => `<li><code>${esc(s.url)}</code> ${markdown(s.description)}</li>`;
  const servers = arr(d.servers).map((s) => server(obj(s)));
  const main = [
    `<header id="overview"><h1>${esc(title)}</h1>`,
    `<p class="muted">Version <code>${esc(info.version ?? "unversioned")}</code> · OpenAPI ${esc(d.openapi)}</p>`,
    `${markdown(info.description)}</header>`,
    servers.length ? `<section id="servers"><h2>Servers</h2><ul>${servers.join("")}</ul></section>` : "",
    renderSecuritySchemes(obj(obj(d.components).securitySchemes)),
  ];
  for (const [tag, ops] of groups) {
    main.push(`<section class="tag" id="${esc(tagIds.get(tag))}"><h2>${esc(tag)}</h2>`);
    main.push(markdown(tagInfo.get(tag)?.description), ...ops.map((o) => renderOperation(o, d)));
    main.push("</section>");
  }
  if (Object.keys(schemas).length) {
    main.push('<section id="schemas"><h2>Schemas</h2>');
    for (const [name, s] of Object.entries(schemas)) {
      const seen = new Set([`#/components/schemas/${name}`]);
      const heading = `<h3><code>${esc(name)}</code></h3>`;
      main.push(`<div class="op" id="schema-${esc(slug(name))}">${heading}${schemaBlock(s, d, seen)}</div>`);
    }
    main.push("</section>");
  }

  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<title>${esc(title)} — API reference</title>
<style>${CSS}</style></head>
<body><nav>${nav.join("")}</nav><main>${main.join("\n")}</main></body></html>
`;
}
