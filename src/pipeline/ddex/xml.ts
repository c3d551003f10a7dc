/**
 * A small XML writer for the DDEX messages: elements as plain data, optional parts left out by
 * passing undefined, text and attribute values escaped. Enough for writing; nothing here parses.
 */
export interface XmlElement {
  name: string;
  attrs: Record<string, string | number | boolean | undefined>;
  children: XmlChild[];
}

export type XmlChild = XmlElement | string | number | undefined | null | false | XmlChild[];

type Attrs = Record<string, string | number | boolean | undefined>;

/** `x("Name", {Attr: 1}, child, ...)` or `x("Name", child, ...)`. */
export function x(name: string, attrsOrChild?: Attrs | XmlChild, ...children: XmlChild[]): XmlElement {
  if (isAttrs(attrsOrChild)) return { name, attrs: attrsOrChild, children };
  return { name, attrs: {}, children: [attrsOrChild, ...children] };
}

/** An element only when its value is there: `opt("Year", release.copyright_year)`. */
export function opt(
  name: string,
  value: string | number | null | undefined,
  attrs: Attrs = {},
): XmlElement | undefined {
  return value === null || value === undefined || value === "" ? undefined : x(name, attrs, value);
}

function isAttrs(v: unknown): v is Attrs {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !("children" in v);
}

// XML 1.0 allows tab, newline, carriage return and the characters from U+0020 up, less lone
// surrogates and U+FFFE/U+FFFF; anything else is dropped.
const NOT_XML = /[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu;

export function escapeText(value: string): string {
  // A carriage return is written as a reference: a parser would turn a literal one into a newline.
  return value
    .replace(NOT_XML, "")
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/\r/g, "&#13;");
}

function escapeAttr(value: string): string {
  return escapeText(value).replace(/"/g, "&quot;").replace(/\n/g, "&#10;").replace(/\t/g, "&#9;");
}

function flatten(children: XmlChild[], into: (XmlElement | string)[] = []): (XmlElement | string)[] {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) flatten(c, into);
    else into.push(typeof c === "number" ? String(c) : c);
  }
  return into;
}

function render(el: XmlElement, depth: number, out: string[]): void {
  const pad = "  ".repeat(depth);
  const attrs = Object.entries(el.attrs)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => ` ${k}="${escapeAttr(String(v))}"`)
    .join("");
  const kids = flatten(el.children);
  if (kids.length === 0) {
    out.push(`${pad}<${el.name}${attrs}/>`);
  } else if (kids.every((k) => typeof k === "string")) {
    out.push(`${pad}<${el.name}${attrs}>${escapeText((kids as string[]).join(""))}</${el.name}>`);
  } else {
    out.push(`${pad}<${el.name}${attrs}>`);
    for (const k of kids) {
      if (typeof k === "string") out.push(`${pad}  ${escapeText(k)}`);
      else render(k, depth + 1, out);
    }
    out.push(`${pad}</${el.name}>`);
  }
}

/** The document, with its XML declaration, indented two spaces, ending in a newline. */
export function toXml(root: XmlElement): string {
  const out = ['<?xml version="1.0" encoding="UTF-8"?>'];
  render(root, 0, out);
  return `${out.join("\n")}\n`;
}
