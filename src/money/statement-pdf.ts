/**
 * A statement (src/money/types.ts, StatementDocument) as a PDF for the payee, in the tenant's
 * branding: A4, pdfkit's built-in Helvetica (nothing is loaded from disk or the network).
 *
 * Page 1 opens with the brand (its logo, PNG or JPEG, or else its name, in its primary colour),
 * the title "Royalty statement", the period ("November 2026") and whether the statement is
 * approved or still a draft; then who it is for (the payee's name and e-mail) and who pays (the
 * account), and a summary box: the balance (opening, net earnings, payments, adjustments,
 * closing) beside the earnings' totals (earned, fees, recouped, net). Then the sections, each
 * only when it has rows, except the earnings: the earnings table (release, track, store,
 * territory, earned, fees, recouped, net; "No earnings in this period." when there are none) with
 * its totals, the payments, the advances and expenses with what is still to recoup, and the
 * exchange rates the earnings were converted at. A table that runs over a page goes on under a
 * small running header with its column headings repeated, and every page ends with
 * "Page n of N".
 *
 * Amounts are shown as the document states them, with thousands separators put into the decimal
 * string itself (`formatAmount`: "-1234.5" is "-1,234.5"), never through a JavaScript number.
 * Amount columns are as wide as their widest amount; text columns share the rest and a text too
 * long for its column ends in "…". Helvetica has only the Windows-1252 characters: letters with
 * accents outside them lose the accent ("ő" becomes "o", "ł" "l"), and what is left (other
 * scripts, emoji) is shown as "?"; the PDF's metadata (Title, Author) keeps the full text.
 *
 * The same document and brand always give the same bytes: the creation date is the approval time
 * (a draft's is the first instant after its period), and the file ID is derived from the metadata.
 */
import { inflateSync } from "node:zlib";
import PDFDocument from "pdfkit";
import type { StatementDocument } from "./types.ts";

export interface StatementBrand {
  name: string;
  /** "#rrggbb"; anything else falls back to the default blue. */
  primaryColor?: string | null;
  /** PNG or JPEG bytes; an image pdfkit cannot read is left out and the name shown instead. */
  logo?: Buffer | null;
}

export interface StatementPdfOptions {
  /** Compress the page contents (default true; tests turn it off to read the text). */
  compress?: boolean;
}

const MONTHS = [
  "January",
  "February",
  "March",
  "April",
  "May",
  "June",
  "July",
  "August",
  "September",
  "October",
  "November",
  "December",
];

const DEFAULT_COLOR = "#1f4fd1";
const INK = "#1f2328";
const MUTED = "#656d76";
const RULE = "#d0d7de";
const ZEBRA = "#f6f8fa";
const REGULAR = "Helvetica";
const BOLD = "Helvetica-Bold";

const MARGIN = 48;
/** How far above the page's foot the footer line of text starts; content stops 18 points above it. */
const FOOTER_FROM_FOOT = MARGIN + 10;
const PAD = 4;
const ROW_H = 13;
const HEAD_H = 16;
const BODY_SIZE = 8;
const HEAD_SIZE = 7.5;

/** The statement as a PDF (see the module comment). */
export async function statementPdf(
  doc: StatementDocument,
  brand: StatementBrand,
  options: StatementPdfOptions = {},
): Promise<Buffer> {
  const period = periodLabel(doc.period);
  const pdf = new PDFDocument({
    size: "A4",
    margin: MARGIN,
    bufferPages: true,
    compress: options.compress ?? true,
    lang: "en",
    displayTitle: true,
    info: {
      Title: `Royalty statement ${period}: ${doc.payee.name}`,
      Author: brand.name,
      Subject: `${doc.account_name}, ${doc.currency}`,
      Creator: "Backline",
      Producer: "Backline (PDFKit)",
      CreationDate: creationDate(doc),
    },
  });
  const chunks: Buffer[] = [];
  const done = new Promise<Buffer>((resolve, reject) => {
    pdf.on("data", (chunk: Buffer) => chunks.push(chunk));
    pdf.on("end", () => resolve(Buffer.concat(chunks)));
    pdf.on("error", reject);
  });
  try {
    new Layout(pdf, doc, brand, period).render();
  } catch (err) {
    pdf.end();
    await done.catch(() => undefined);
    throw err;
  }
  pdf.end();
  return done;
}

/** "2026-11" as "November 2026" (anything else as it is). */
export function periodLabel(period: string): string {
  const m = /^([0-9]{4})-([0-9]{2})$/.exec(period);
  const month = m ? MONTHS[Number(m[2]) - 1] : undefined;
  return m && month ? `${month} ${m[1]}` : period;
}

/**
 * A decimal string with thousands separators in its whole part: "1234567.891" is
 * "1,234,567.891", "-1200" is "-1,200". Works on the digits, never a number; anything that is not
 * a plain decimal comes back as it is.
 */
export function formatAmount(value: string): string {
  const m = /^(-?)([0-9]+)((?:\.[0-9]+)?)$/.exec(value);
  if (!m) return value;
  const [, minus = "", whole = "", fraction = ""] = m;
  return `${minus}${whole.replace(/\B(?=(?:[0-9]{3})+$)/g, ",")}${fraction}`;
}

/** The approval time, or for a draft the first instant after its period: never the clock. */
function creationDate(doc: StatementDocument): Date {
  if (doc.approved_at) {
    const at = new Date(doc.approved_at);
    if (!Number.isNaN(at.getTime())) return at;
  }
  const m = /^([0-9]{4})-([0-9]{2})$/.exec(doc.period);
  return m ? new Date(Date.UTC(Number(m[1]), Number(m[2]), 1)) : new Date(0);
}

function dayLabel(iso: string, short = false): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  const month = MONTHS[d.getUTCMonth()] ?? "";
  return `${d.getUTCDate()} ${short ? month.slice(0, 3) : month} ${d.getUTCFullYear()}`;
}

function nextPeriodLabel(period: string): string | undefined {
  const m = /^([0-9]{4})-([0-9]{2})$/.exec(period);
  if (!m) return undefined;
  const d = new Date(Date.UTC(Number(m[1]), Number(m[2]), 1));
  return `${MONTHS[d.getUTCMonth()]} ${d.getUTCFullYear()}`;
}

// Helvetica (a PDF standard font) draws Windows-1252: Latin-1 and these from higher up.
const WIN_ANSI_EXTRA = new Set([
  0x152, 0x153, 0x160, 0x161, 0x178, 0x17d, 0x17e, 0x192, 0x2c6, 0x2dc, 0x2013, 0x2014, 0x2018, 0x2019,
  0x201a, 0x201c, 0x201d, 0x201e, 0x2020, 0x2021, 0x2022, 0x2026, 0x2030, 0x2039, 0x203a, 0x20ac, 0x2122,
]);

/** Letters Unicode does not decompose, as their base letter. */
const BASE_LETTERS: Record<string, string> = {
  Ł: "L",
  ł: "l",
  Đ: "D",
  đ: "d",
  Ħ: "H",
  ħ: "h",
  ı: "i",
  Ŀ: "L",
  ŀ: "l",
};

function drawable(code: number): boolean {
  return (code >= 0x20 && code < 0x7f) || (code >= 0xa0 && code <= 0xff) || WIN_ANSI_EXTRA.has(code);
}

/** Text Helvetica can draw: controls become spaces, accents outside it go, the rest is "?". */
export function pdfText(value: string): string {
  let out = "";
  for (const ch of value) {
    const code = ch.codePointAt(0) ?? 0;
    if (drawable(code)) {
      out += ch;
    } else if (code < 0x20 || (code >= 0x7f && code < 0xa0)) {
      out += " ";
    } else if (BASE_LETTERS[ch]) {
      out += BASE_LETTERS[ch];
    } else {
      const base = ch.normalize("NFKD").replace(/\p{M}/gu, "");
      out += base.length > 0 && [...base].every((c) => drawable(c.codePointAt(0) ?? 0)) ? base : "?";
    }
  }
  return out;
}

/** Only the two standard colour forms; a light colour is darkened until it reads on white. */
function brandColor(value: string | null | undefined): string {
  if (!value || !/^#[0-9a-f]{6}$/i.test(value)) return DEFAULT_COLOR;
  let rgb = rgbOf(value);
  for (let i = 0; i < 20 && contrastOnWhite(rgb) < 3; i++) rgb = rgb.map((v) => v * 0.85) as Rgb;
  return hexOf(rgb);
}

type Rgb = [number, number, number];

function rgbOf(hex: string): Rgb {
  const n = Number.parseInt(hex.slice(1), 16);
  return [(n >> 16) & 255, (n >> 8) & 255, n & 255];
}

function hexOf(rgb: Rgb): string {
  return `#${rgb.map((v) => Math.round(v).toString(16).padStart(2, "0")).join("")}`;
}

function contrastOnWhite([r, g, b]: Rgb): number {
  const lin = (v: number) => {
    const s = v / 255;
    return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
  };
  const l = 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
  return 1.05 / (l + 0.05);
}

/** The colour mixed with white: `amount` 0.08 is a faint tint for a box's background. */
function tint(hex: string, amount: number): string {
  return hexOf(rgbOf(hex).map((v) => 255 - (255 - v) * amount) as Rgb);
}

/**
 * Whether pdfkit can embed the logo without failing later: it decodes a PNG's pixels
 * asynchronously (for transparency), where a corrupt stream would throw out of a zlib callback,
 * so the PNG's data is inflated here first.
 */
function usableLogo(logo: Buffer | null | undefined): Buffer | undefined {
  if (!logo || logo.length < 8) return undefined;
  if (logo[0] === 0xff && logo[1] === 0xd8) return logo;
  if (!logo.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])))
    return undefined;
  const idat: Buffer[] = [];
  let at = 8;
  while (at + 8 <= logo.length) {
    const length = logo.readUInt32BE(at);
    const type = logo.toString("latin1", at + 4, at + 8);
    if (at + 12 + length > logo.length) return undefined;
    if (type === "IDAT") idat.push(logo.subarray(at + 8, at + 8 + length));
    if (type === "IEND") break;
    at += 12 + length;
  }
  if (idat.length === 0) return undefined;
  try {
    inflateSync(Buffer.concat(idat));
  } catch {
    return undefined;
  }
  return logo;
}

interface Column {
  label: string;
  align: "left" | "right";
  /** A fixed width, or as wide as the widest cell (amounts), or a share of what is left. */
  width?: number;
  fit?: boolean;
  flex?: number;
}

interface Table {
  title: string;
  note?: string;
  columns: Column[];
  rows: string[][];
  total?: string[];
  empty?: string;
}

class Layout {
  pdf: PDFKit.PDFDocument;
  doc: StatementDocument;
  brand: StatementBrand;
  period: string;
  color: string;
  y = MARGIN;
  left = MARGIN;
  width: number;
  bottom: number;

  constructor(pdf: PDFKit.PDFDocument, doc: StatementDocument, brand: StatementBrand, period: string) {
    this.pdf = pdf;
    this.doc = doc;
    this.brand = brand;
    this.period = period;
    this.color = brandColor(brand.primaryColor);
    this.width = pdf.page.width - 2 * MARGIN;
    this.bottom = pdf.page.height - FOOTER_FROM_FOOT - 18;
  }

  render(): void {
    const d = this.doc;
    this.header();
    this.parties();
    this.summary();
    const converted = d.earnings.some((e) => e.rate !== null);
    this.table({
      title: "Earnings",
      note: `Amounts in ${d.currency}.${converted ? " Earnings in other currencies are converted at the rates listed at the end." : ""}`,
      columns: [
        { label: "Release", align: "left", flex: 1 },
        { label: "Track", align: "left", flex: 1 },
        { label: "Store", align: "left", width: 72 },
        { label: "Territory", align: "left", width: 44 },
        { label: "Earned", align: "right", fit: true },
        { label: "Fees", align: "right", fit: true },
        { label: "Recouped", align: "right", fit: true },
        { label: "Net", align: "right", fit: true },
      ],
      rows: d.earnings.map((e) => [
        e.release_title ?? "—",
        e.track_title ?? (e.track_id === null ? "All tracks" : "—"),
        e.store ?? "—",
        e.territory ?? "—",
        formatAmount(e.earned),
        formatAmount(e.fees),
        formatAmount(e.recouped),
        formatAmount(e.net),
      ]),
      total:
        d.earnings.length > 0
          ? [
              "Total",
              "",
              "",
              "",
              formatAmount(d.totals.earned),
              formatAmount(d.totals.fees),
              formatAmount(d.totals.recouped),
              formatAmount(d.totals.net),
            ]
          : undefined,
      empty: "No earnings in this period.",
    });
    if (d.payments.length > 0) {
      this.table({
        title: "Payments",
        note: `Payout requests, payments and failed payments in the period, in ${d.currency}. A negative amount left the balance.`,
        columns: [
          { label: "Date", align: "left", width: 76 },
          { label: "Payout", align: "left", flex: 1 },
          { label: "Status", align: "left", width: 64 },
          { label: "Withholding", align: "right", fit: true },
          { label: "Amount", align: "right", fit: true },
        ],
        rows: d.payments.map((p) => [
          dayLabel(p.at, true),
          p.payout_id,
          p.status === "paid" ? "Paid" : p.status === "failed" ? "Failed" : "Requested",
          formatAmount(p.withholding),
          formatAmount(p.amount),
        ]),
        total: ["Total", "", "", "", formatAmount(d.payments_total)],
      });
    }
    if ((d.charges ?? []).length > 0) {
      this.table({
        title: "Add-ons bought",
        note: "Charged to the account as expenses of their releases (below), recouped from their earnings.",
        columns: [
          { label: "Date", align: "left", fit: true },
          { label: "Add-on", align: "left", flex: 1 },
          { label: "Release", align: "left", flex: 1 },
          { label: "Amount", align: "right", fit: true },
        ],
        rows: (d.charges ?? []).map((c) => [
          dayLabel(c.at, true),
          c.name,
          c.release_title ?? "",
          `${formatAmount(c.amount)} ${c.currency}`,
        ]),
      });
    }
    if (d.recoupables.length > 0) {
      this.table({
        title: "Advances and expenses",
        note: "What is still to recoup is taken from future earnings before they are paid out.",
        columns: [
          { label: "Kind", align: "left", width: 56 },
          { label: "Description", align: "left", flex: 1 },
          { label: "Amount", align: "right", fit: true },
          { label: "Still to recoup", align: "right", fit: true },
        ],
        rows: d.recoupables.map((c) => [
          c.kind === "advance" ? "Advance" : "Expense",
          c.description,
          `${formatAmount(c.amount)} ${c.currency}`,
          `${formatAmount(c.unrecouped)} ${c.currency}`,
        ]),
      });
    }
    if (d.rates.length > 0) {
      this.table({
        title: "Exchange rates",
        note: `The rates of ${this.period} the earnings were converted at.`,
        columns: [
          { label: "From", align: "left", width: 64 },
          { label: "To", align: "left", width: 64 },
          { label: "Rate", align: "left", flex: 1 },
        ],
        rows: d.rates.map((r) => [r.from, r.to, `1 ${r.from} = ${formatAmount(r.rate)} ${r.to}`]),
      });
    }
    this.footers();
  }

  /** Writes one line of text at (x, y) without wrapping, cut to `max` points with "…". */
  put(
    value: string,
    x: number,
    y: number,
    font: string,
    size: number,
    color: string,
    opts: { max?: number; align?: "left" | "right" } = {},
  ): number {
    const pdf = this.pdf;
    pdf.font(font).fontSize(size).fillColor(color);
    const text = opts.max === undefined ? pdfText(value) : this.fit(pdfText(value), opts.max);
    const w = pdf.widthOfString(text);
    if (text.length > 0) pdf.text(text, opts.align === "right" ? x - w : x, y, { lineBreak: false });
    return w;
  }

  /** `text` cut to fit `max` points (in the current font), ending in "…" when cut. */
  fit(text: string, max: number): string {
    const pdf = this.pdf;
    if (pdf.widthOfString(text) <= max) return text;
    let lo = 0;
    let hi = text.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (pdf.widthOfString(`${text.slice(0, mid).trimEnd()}…`) <= max) lo = mid;
      else hi = mid - 1;
    }
    if (lo === 0) return pdf.widthOfString("…") <= max ? "…" : "";
    return `${text.slice(0, lo).trimEnd()}…`;
  }

  rule(y: number, color = RULE, width = 0.75, x0 = this.left, x1 = this.left + this.width): void {
    this.pdf.moveTo(x0, y).lineTo(x1, y).lineWidth(width).strokeColor(color).stroke();
  }

  header(): void {
    const pdf = this.pdf;
    const top = MARGIN;
    const right = this.left + this.width;
    this.put("Royalty statement", right, top, BOLD, 18, INK, { align: "right" });
    this.put(this.period, right, top + 24, REGULAR, 11, MUTED, { align: "right" });
    const status =
      this.doc.status === "approved"
        ? this.doc.approved_at
          ? `Approved ${dayLabel(this.doc.approved_at)}`
          : "Approved"
        : "Draft: not yet approved, figures may change";
    this.put(status, right, top + 40, this.doc.status === "approved" ? REGULAR : BOLD, 8, MUTED, {
      align: "right",
    });
    pdf.font(BOLD).fontSize(18);
    const brandMax = this.width - pdf.widthOfString("Royalty statement") - 24;
    const logo = usableLogo(this.brand.logo);
    let drewLogo = false;
    if (logo) {
      try {
        // pdfkit reads the image before it draws anything, so a refusal leaves the page as it was.
        pdf.image(logo, this.left, top, { fit: [Math.min(180, brandMax), 48] });
        drewLogo = true;
      } catch {
        drewLogo = false;
      }
    }
    if (!drewLogo) this.put(this.brand.name, this.left, top + 4, BOLD, 20, this.color, { max: brandMax });
    this.rule(top + 58, this.color, 2);
    this.y = top + 74;
  }

  /** The small header of every page after the first. */
  runningHeader(): void {
    const right = this.left + this.width;
    this.put(this.brand.name, this.left, MARGIN, BOLD, 9, this.color, { max: this.width / 2 - 12 });
    this.put(
      `Royalty statement · ${this.period} · ${this.doc.payee.name}`,
      right,
      MARGIN + 1,
      REGULAR,
      8,
      MUTED,
      {
        align: "right",
        max: this.width / 2 - 12,
      },
    );
    this.rule(MARGIN + 16);
    this.y = MARGIN + 28;
  }

  parties(): void {
    const d = this.doc;
    const half = this.width / 2;
    const y = this.y;
    const block = (x: number, label: string, name: string, lines: string[]) => {
      this.put(label.toUpperCase(), x, y, BOLD, 7, MUTED);
      this.put(name, x, y + 12, BOLD, 11, INK, { max: half - 16 });
      lines.forEach((line, i) => {
        this.put(line, x, y + 28 + i * 12, REGULAR, 9, INK, { max: half - 16 });
      });
    };
    block(this.left, "Statement for", d.payee.name, d.payee.email ? [d.payee.email] : []);
    block(this.left + half, "Paid by", d.account_name, [`Currency: ${d.currency}`]);
    this.y = y + 28 + 12 + 20;
  }

  summary(): void {
    const pdf = this.pdf;
    const d = this.doc;
    const top = this.y;
    const lineH = 16;
    const height = 12 + 16 + 4 * lineH + 8 + 20 + 14;
    pdf.roundedRect(this.left, top, this.width, height, 6).fill(tint(this.color, 0.07));
    const colW = (this.width - 3 * 16) / 2;
    const amount = (v: string) => `${formatAmount(v)} ${d.currency}`;
    const column = (
      x: number,
      title: string,
      lines: [string, string][],
      last: [string, string],
      note?: string,
    ) => {
      let y = top + 12;
      this.put(title.toUpperCase(), x, y, BOLD, 7, MUTED);
      y += 16;
      for (const [label, value] of lines) {
        this.put(label, x, y, REGULAR, 9.5, INK, { max: colW / 2 });
        this.put(value, x + colW, y, REGULAR, 9.5, INK, { align: "right" });
        y += lineH;
      }
      this.rule(y + 1, RULE, 0.75, x, x + colW);
      y += 8;
      this.put(last[0], x, y, BOLD, 11, this.color, { max: colW / 2 });
      this.put(last[1], x + colW, y, BOLD, 11, this.color, { align: "right" });
      if (note) this.put(note, x, y + 16, REGULAR, 7.5, MUTED, { max: colW });
    };
    const next = nextPeriodLabel(d.period);
    column(
      this.left + 16,
      "Balance",
      [
        ["Opening balance", amount(d.opening_balance)],
        ["Earnings (net)", amount(d.totals.net)],
        ["Payments", amount(d.payments_total)],
        ["Adjustments", amount(d.adjustments_total)],
      ],
      ["Closing balance", amount(d.closing_balance)],
      next ? `Carried forward to ${next}.` : undefined,
    );
    column(
      this.left + 32 + colW,
      "Earnings this period",
      [
        ["Earned", amount(d.totals.earned)],
        ["Fees", amount(d.totals.fees)],
        ["Recouped", amount(d.totals.recouped)],
        ["Earnings lines", formatAmount(String(d.earnings.length))],
      ],
      ["Net earnings", amount(d.totals.net)],
    );
    this.y = top + height + 22;
  }

  newPage(): void {
    this.pdf.addPage();
    this.runningHeader();
  }

  /** A table under its title; rows run over pages with the column headings repeated. */
  table(t: Table): void {
    const pdf = this.pdf;
    const widths = this.widths(t);
    const xs: number[] = [];
    let x = this.left;
    for (const w of widths) {
      xs.push(x);
      x += w;
    }
    const titleH = 18 + (t.note ? 12 : 0);
    const firstRows = Math.min(Math.max(t.rows.length, 1), 3);
    if (this.y + titleH + HEAD_H + firstRows * ROW_H + (t.total ? ROW_H + 4 : 0) > this.bottom)
      this.newPage();
    this.put(t.title, this.left, this.y, BOLD, 12, INK);
    this.y += 18;
    if (t.note) {
      this.put(t.note, this.left, this.y, REGULAR, 7.5, MUTED, { max: this.width });
      this.y += 12;
    }
    if (t.rows.length === 0) {
      this.put(t.empty ?? "None.", this.left, this.y + 2, REGULAR, 9, MUTED);
      this.y += ROW_H + 20;
      return;
    }
    const headings = () => {
      t.columns.forEach((c, i) => {
        const cx = c.align === "right" ? (xs[i] ?? 0) + (widths[i] ?? 0) - PAD : (xs[i] ?? 0) + PAD;
        this.put(c.label, cx, this.y + 4, BOLD, HEAD_SIZE, MUTED, {
          align: c.align,
          max: (widths[i] ?? 0) - 2 * PAD,
        });
      });
      this.y += HEAD_H;
      this.rule(this.y - 1.5);
    };
    const row = (cells: string[], font: string) => {
      cells.forEach((cell, i) => {
        const c = t.columns[i];
        if (!c || cell === "") return;
        const cx = c.align === "right" ? (xs[i] ?? 0) + (widths[i] ?? 0) - PAD : (xs[i] ?? 0) + PAD;
        this.put(cell, cx, this.y + 3, font, BODY_SIZE, INK, {
          align: c.align,
          max: (widths[i] ?? 0) - 2 * PAD,
        });
      });
      this.y += ROW_H;
    };
    headings();
    t.rows.forEach((cells, n) => {
      if (this.y + ROW_H > this.bottom) {
        this.newPage();
        this.put(`${t.title} (continued)`, this.left, this.y, BOLD, 9, INK);
        this.y += 14;
        headings();
      }
      if (n % 2 === 1) pdf.rect(this.left, this.y, this.width, ROW_H).fill(ZEBRA);
      row(cells, REGULAR);
    });
    if (t.total) {
      if (this.y + ROW_H + 4 > this.bottom) {
        this.newPage();
        this.put(`${t.title} (continued)`, this.left, this.y, BOLD, 9, INK);
        this.y += 14;
        headings();
      }
      this.rule(this.y + 0.5, INK, 0.75);
      this.y += 2;
      row(t.total, BOLD);
    }
    this.y += 20;
  }

  /** Column widths: amounts as wide as their widest cell, fixed ones as given, the rest shared. */
  widths(t: Table): number[] {
    const pdf = this.pdf;
    const widths = t.columns.map((c, i) => {
      if (c.width !== undefined) return c.width;
      if (!c.fit) return 0;
      pdf.font(BOLD).fontSize(HEAD_SIZE);
      let w = pdf.widthOfString(pdfText(c.label));
      pdf.font(REGULAR).fontSize(BODY_SIZE);
      for (const r of t.rows) w = Math.max(w, pdf.widthOfString(pdfText(r[i] ?? "")));
      if (t.total) {
        pdf.font(BOLD).fontSize(BODY_SIZE);
        w = Math.max(w, pdf.widthOfString(pdfText(t.total[i] ?? "")));
      }
      return Math.max(Math.ceil(w) + 2 * PAD, 44);
    });
    const flex = t.columns.reduce((s, c) => s + (c.width === undefined && !c.fit ? (c.flex ?? 1) : 0), 0);
    const left = this.width - widths.reduce((s, w) => s + w, 0);
    return t.columns.map((c, i) =>
      c.width === undefined && !c.fit ? Math.max((left * (c.flex ?? 1)) / flex, 40) : (widths[i] ?? 0),
    );
  }

  footers(): void {
    const range = this.pdf.bufferedPageRange();
    const y = this.pdf.page.height - FOOTER_FROM_FOOT;
    const right = this.left + this.width;
    for (let i = range.start; i < range.start + range.count; i++) {
      this.pdf.switchToPage(i);
      this.rule(y - 8);
      this.put(
        `${this.brand.name} · Royalty statement ${this.period} · ${this.doc.payee.name}`,
        this.left,
        y,
        REGULAR,
        7.5,
        MUTED,
        {
          max: this.width - 90,
        },
      );
      this.put(`Page ${i - range.start + 1} of ${range.count}`, right, y, REGULAR, 7.5, MUTED, {
        align: "right",
      });
    }
  }
}
