import assert from "node:assert/strict";
import { describe, it } from "node:test";
import sharp from "sharp";
import { compare, format, sum } from "./decimal.ts";
import { STATEMENT_CSV_COLUMNS, statementCsv } from "./statement-csv.ts";
import { formatAmount, pdfText, periodLabel, statementPdf } from "./statement-pdf.ts";
import type { StatementDocument, StatementEarning } from "./types.ts";

const LONG_TITLE = "Songs from the Lighthouse: The Complete Sessions, Remastered and Expanded Deluxe Edition";

function earning(overrides: Partial<StatementEarning>): StatementEarning {
  return {
    release_id: "9b2f3a52-7c1e-4f7a-9d1e-2a6b8c0d1e2f",
    release_title: "Midnight",
    track_id: "5d9c1f4e-0a3b-4c2d-8e7f-6a5b4c3d2e1f",
    track_title: "Intro",
    isrc: "PTABC2600001",
    store: "Spotify",
    territory: "PT",
    currency: "EUR",
    original_currency: "EUR",
    rate: null,
    earned: "0.00",
    fees: "0.00",
    recouped: "0.00",
    net: "0.00",
    ...overrides,
  };
}

/** Ana Lima's statement for November 2026: consistent figures (the rows add up to the totals). */
function sample(): StatementDocument {
  return {
    id: "3f0c9a8e-5b7d-4e21-9c3a-1d2e3f4a5b6c",
    object: "statement",
    tenant_name: "Moonlight Music",
    account_id: "c1d2e3f4-a5b6-4c7d-8e9f-0a1b2c3d4e5f",
    account_name: "Moonlight Records",
    payee: { id: "7a8b9c0d-1e2f-4a3b-8c4d-5e6f7a8b9c0d", name: "Ana Lima", email: "ana@example.com" },
    period: "2026-11",
    currency: "EUR",
    status: "approved",
    approved_at: "2026-12-03T10:15:00.000Z",
    opening_balance: "120.00",
    earnings: [
      earning({
        release_title: 'Midnight, "Live"',
        earned: "12.50",
        fees: "1.88",
        net: "10.62",
      }),
      earning({
        release_title: '=HYPERLINK("http://evil.example","click")',
        track_title: "-5 Remix",
        store: "Apple Music",
        territory: "BR",
        earned: "3.40",
        fees: "0.51",
        recouped: "1.00",
        net: "1.89",
      }),
      earning({
        release_title: LONG_TITLE,
        track_title: "@home",
        store: "YouTube Music",
        territory: "US",
        original_currency: "USD",
        rate: "0.92",
        earned: "1234.56",
        fees: "185.18",
        recouped: "200.00",
        net: "849.38",
      }),
      earning({
        release_title: null,
        track_id: null,
        track_title: "Line one\nLine two",
        isrc: null,
        store: null,
        territory: null,
        earned: "-1.20",
        net: "-1.20",
      }),
    ],
    totals: { currency: "EUR", earned: "1249.26", fees: "187.57", recouped: "201.00", net: "860.69" },
    payments: [
      {
        payout_id: "0e1d2c3b-4a59-4867-9a5b-4c3d2e1f0a9b",
        status: "paid",
        currency: "EUR",
        amount: "-100.00",
        withholding: "0.00",
        at: "2026-11-12T09:00:00.000Z",
      },
    ],
    payments_total: "-100.00",
    adjustments_total: "-0.01",
    closing_balance: "880.68",
    recoupables: [
      {
        id: "1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d",
        kind: "advance",
        description: "Album advance",
        release_id: null,
        currency: "EUR",
        amount: "5000.00",
        unrecouped: "3799.00",
      },
    ],
    rates: [{ from: "USD", to: "EUR", rate: "0.92" }],
  };
}

/** The sample with `n` generated earnings (totals recomputed; the balance is not, the PDF does not check it). */
function withEarnings(n: number): StatementDocument {
  const doc = sample();
  doc.earnings = Array.from({ length: n }, (_, i) =>
    earning({
      release_title: `Release ${i + 1}`,
      track_title: `Track ${i + 1}`,
      earned: `${1000 + i}.25`,
      fees: "150.04",
      recouped: "0.00",
      net: `${850 + i}.21`,
    }),
  );
  const total = (k: "earned" | "fees" | "recouped" | "net") => format(sum(doc.earnings.map((e) => e[k])), 2);
  doc.totals = {
    currency: doc.currency,
    earned: total("earned"),
    fees: total("fees"),
    recouped: total("recouped"),
    net: total("net"),
  };
  return doc;
}

/** RFC 4180: records end with CRLF; quoted fields may hold commas, CR, LF and doubled quotes. */
function parseCsv(text: string): string[][] {
  const records: string[][] = [];
  let record: string[] = [];
  let i = 0;
  for (;;) {
    let value = "";
    if (text[i] === '"') {
      i++;
      for (;;) {
        const q = text.indexOf('"', i);
        assert.notEqual(q, -1, "an unterminated quoted field");
        value += text.slice(i, q);
        i = q + 1;
        if (text[i] === '"') {
          value += '"';
          i++;
        } else break;
      }
    } else {
      while (i < text.length && text[i] !== "," && text[i] !== "\r" && text[i] !== "\n") {
        assert.notEqual(text[i], '"', `a quote inside an unquoted field at ${i}`);
        value += text[i++];
      }
    }
    record.push(value);
    if (text[i] === ",") {
      i++;
      continue;
    }
    assert.equal(text.slice(i, i + 2), "\r\n", `a record must end with CRLF (at ${i})`);
    i += 2;
    records.push(record);
    record = [];
    if (i === text.length) return records;
  }
}

function csvRows(doc: StatementDocument): Record<string, string>[] {
  const [header, ...rows] = parseCsv(statementCsv(doc));
  assert.deepEqual(header, [...STATEMENT_CSV_COLUMNS]);
  for (const r of rows) assert.equal(r.length, STATEMENT_CSV_COLUMNS.length);
  return rows.map((r) => Object.fromEntries(STATEMENT_CSV_COLUMNS.map((c, i) => [c, r[i] ?? ""])));
}

describe("statementCsv", () => {
  it("has the header, the opening balance, one row per earning and payment, adjustments and closing balance", () => {
    const rows = csvRows(sample());
    assert.deepEqual(
      rows.map((r) => r.row_type),
      [
        "opening_balance",
        "earning",
        "earning",
        "earning",
        "earning",
        "payment",
        "adjustments",
        "closing_balance",
      ],
    );
    for (const r of rows) {
      assert.equal(r.period, "2026-11");
      assert.equal(r.payee_id, "7a8b9c0d-1e2f-4a3b-8c4d-5e6f7a8b9c0d");
      assert.equal(r.payee_name, "Ana Lima");
      assert.equal(r.currency, "EUR");
    }
    assert.equal(rows[0]?.net, "120.00");
    const payment = rows[5];
    assert.deepEqual(
      [payment?.net, payment?.payout_id, payment?.payout_status, payment?.payout_at, payment?.withholding],
      ["-100.00", "0e1d2c3b-4a59-4867-9a5b-4c3d2e1f0a9b", "paid", "2026-11-12T09:00:00.000Z", "0.00"],
    );
    assert.deepEqual([payment?.earned, payment?.release_title, payment?.original_currency], ["", "", ""]);
    assert.equal(rows[6]?.net, "-0.01");
    assert.equal(rows[7]?.net, "880.68");
  });

  it("gives back every earning's strings exactly, amounts verbatim, nulls empty", () => {
    const doc = sample();
    const rows = csvRows(doc).filter((r) => r.row_type === "earning");
    const [first, formula, converted, correction] = rows;
    assert.equal(first?.release_title, 'Midnight, "Live"');
    assert.deepEqual(
      [first?.earned, first?.fees, first?.recouped, first?.net, first?.rate],
      ["12.50", "1.88", "0.00", "10.62", ""],
    );
    assert.equal(converted?.release_title, LONG_TITLE);
    assert.equal(converted?.original_currency, "USD");
    assert.equal(converted?.rate, "0.92");
    assert.equal(converted?.earned, "1234.56");
    assert.equal(correction?.track_title, "Line one\nLine two");
    assert.equal(correction?.release_title, "");
    assert.equal(correction?.store, "");
    assert.equal(correction?.earned, "-1.20", "a negative amount is not guarded");
    assert.equal(correction?.net, "-1.20");
    assert.equal(formula?.isrc, "PTABC2600001");
    // The earnings columns add up to the totals, and the nets of all rows to the closing balance.
    for (const k of ["earned", "fees", "recouped", "net"] as const) {
      assert.equal(compare(sum(rows.map((r) => r[k] ?? "")), doc.totals[k]), 0, k);
    }
    const all = csvRows(doc);
    const closing = all.pop();
    assert.equal(compare(sum(all.map((r) => r.net ?? "")), closing?.net ?? ""), 0);
  });

  it("guards text that a spreadsheet would run as a formula, and only text", () => {
    const doc = sample();
    doc.payee.name = "+Ana";
    const e = doc.earnings[0] as StatementEarning;
    e.store = "@store";
    e.territory = "\tPT";
    e.isrc = "\rX";
    const rows = csvRows(doc);
    const formula = rows[2];
    assert.equal(formula?.release_title, `'=HYPERLINK("http://evil.example","click")`);
    assert.equal(formula?.track_title, "'-5 Remix");
    assert.equal(rows[3]?.track_title, "'@home");
    assert.equal(rows[1]?.store, "'@store");
    assert.equal(rows[1]?.territory, "'\tPT");
    assert.equal(rows[1]?.isrc, "'\rX");
    for (const r of rows) assert.equal(r.payee_name, "'+Ana");
    assert.equal(rows[6]?.net, "-0.01");
    // An amount that is not a plain decimal is a bug upstream: it is not trusted either.
    e.earned = "=1+1";
    assert.equal(csvRows(doc)[1]?.earned, "'=1+1");
  });

  it("writes CRLF between and after records, and quotes only what needs it", () => {
    const csv = statementCsv(sample());
    assert.ok(csv.endsWith("\r\n"));
    assert.equal(csv.replaceAll("\r\n", "").includes("\r"), false, "no lone CR outside the guarded field");
    assert.equal(
      csv.split("\r\n").length - 1,
      9,
      "nine records: the track title's LF is inside quotes, no record's end",
    );
    assert.match(csv, /^row_type,period,payee_id,/);
    assert.ok(csv.includes(',"Midnight, ""Live""",Intro,'));
    assert.ok(csv.includes(',"Line one\nLine two",'));
    assert.ok(csv.includes(",USD,0.92,1234.56,185.18,200.00,849.38,"));
  });

  it("has a charge row per add-on bought, its amount in fees and its net empty, so the nets still sum to the closing balance", () => {
    const doc = sample();
    doc.charges = [
      {
        kind: "add_on",
        order_id: "0f0e0d0c-0b0a-4908-8706-050403020100",
        add_on: "youtube_content_id",
        name: "YouTube Content ID",
        release_id: "3f2b6a5e-8c1d-4e7a-9b0f-2a6c5d4e3f21",
        release_title: "Night Drive",
        currency: "USD",
        amount: "4.99",
        at: "2026-11-20T10:00:00.000Z",
      },
    ];
    const rows = csvRows(doc);
    const charges = rows.filter((r) => r.row_type === "charge");
    assert.deepEqual(
      charges.map((r) => [r.release_title, r.original_currency, r.fees, r.net, r.description]),
      [["Night Drive", "USD", "4.99", "", "Add-on: YouTube Content ID"]],
    );
    assert.deepEqual(rows.map((r) => r.row_type).slice(-3), ["charge", "adjustments", "closing_balance"]);
  });

  it("has no earning rows for a statement without earnings", () => {
    const doc = withEarnings(0);
    assert.deepEqual(
      csvRows(doc).map((r) => r.row_type),
      ["opening_balance", "payment", "adjustments", "closing_balance"],
    );
  });
});

// pdfkit draws Helvetica text as `[<hex> kerning <hex> …] TJ`, one operation per string drawn,
// the hex being the string's Windows-1252 codes; read them back with the compression off.
const WIN_ANSI_BACK: Record<number, string> = { 128: "€", 133: "…", 147: "“", 148: "”", 150: "–", 151: "—" };

function pdfTexts(pdf: Buffer): string[] {
  const texts: string[] = [];
  for (const m of pdf.toString("latin1").matchAll(/\[([^\]]*)\] TJ/g)) {
    const hex = [...(m[1] ?? "").matchAll(/<([0-9a-f]*)>/g)].map((h) => h[1]).join("");
    let text = "";
    for (let i = 0; i < hex.length; i += 2) {
      const code = Number.parseInt(hex.slice(i, i + 2), 16);
      text += WIN_ANSI_BACK[code] ?? String.fromCharCode(code);
    }
    texts.push(text);
  }
  return texts;
}

/** An entry of the PDF's Info dictionary, written inline or (pdfkit 0.20) as an indirect object. */
function pdfInfo(pdf: Buffer, key: string): string | undefined {
  const raw = pdf.toString("latin1");
  const entry = new RegExp(`/${key} (?:([0-9]+) 0 R|(\\([^)]*\\)))`).exec(raw);
  if (!entry) return undefined;
  if (entry[2]) return entry[2];
  return new RegExp(`(?:^|\\n)${entry[1]} 0 obj\\n(\\([^)]*\\))\\nendobj`).exec(raw)?.[1];
}

const pageCount = (pdf: Buffer) => pdf.toString("latin1").match(/\/Type \/Page(?![a-zA-Z])/g)?.length ?? 0;

const BRAND = { name: "Moonlight Music", primaryColor: "#7c3aed" };

function assertPdf(pdf: Buffer): void {
  assert.equal(pdf.subarray(0, 5).toString("latin1"), "%PDF-");
  assert.match(pdf.subarray(-8).toString("latin1"), /%%EOF\s*$/);
}

describe("statementPdf", () => {
  it("is one A4 page for a short statement, with its texts and metadata", async () => {
    const pdf = await statementPdf(sample(), BRAND, { compress: false });
    assertPdf(pdf);
    assert.equal(pageCount(pdf), 1);
    const raw = pdf.toString("latin1");
    assert.ok(raw.includes("/MediaBox [0 0 595.28 841.89]"));
    assert.equal(pdfInfo(pdf, "Title"), "(Royalty statement November 2026: Ana Lima)");
    assert.equal(pdfInfo(pdf, "Author"), "(Moonlight Music)");
    assert.equal(pdfInfo(pdf, "CreationDate"), "(D:20261203101500Z)");
    const texts = pdfTexts(pdf);
    for (const t of [
      "Moonlight Music",
      "Royalty statement",
      "November 2026",
      "Approved 3 December 2026",
      "Ana Lima",
      "ana@example.com",
      "Moonlight Records",
      "120.00 EUR",
      "860.69 EUR",
      "-100.00 EUR",
      "-0.01 EUR",
      "880.68 EUR",
      "1,249.26 EUR",
      "1,234.56",
      "849.38",
      "-1.20",
      'Midnight, "Live"',
      "-5 Remix",
      "YouTube Music",
      "Release",
      "Net",
      "Album advance",
      "5,000.00 EUR",
      "3,799.00 EUR",
      "1 USD = 0.92 EUR",
      "12 Nov 2026",
      "Page 1 of 1",
    ]) {
      assert.ok(texts.includes(t), `the PDF shows ${JSON.stringify(t)}`);
    }
    const long = texts.find((t) => t.startsWith("Songs from the Light"));
    assert.ok(long?.endsWith("…") && long.length < LONG_TITLE.length, `a long title is cut: ${long}`);
    assert.ok(
      texts.some((t) => t.startsWith("=HYPERLINK")),
      "the PDF shows text as it is (no formula guard)",
    );
    assert.ok(!texts.some((t) => t.includes("\n")), "a line break in a title is not drawn");
  });

  it("is the same bytes for the same statement, and compressed by default", async () => {
    const a = await statementPdf(sample(), BRAND);
    const b = await statementPdf(sample(), BRAND);
    assertPdf(a);
    assert.deepEqual(a, b);
    assert.ok(a.toString("latin1").includes("/FlateDecode"));
    const draft = { ...sample(), status: "draft" as const, approved_at: null };
    const c = await statementPdf(draft, BRAND, { compress: false });
    assert.equal(pdfInfo(c, "CreationDate"), "(D:20261201000000Z)", "a draft's date is its period's end");
    assert.ok(pdfTexts(c).includes("Draft: not yet approved, figures may change"));
  });

  it("lists the add-ons bought in the period", async () => {
    const doc = sample();
    doc.charges = [
      {
        kind: "add_on",
        order_id: "0f0e0d0c-0b0a-4908-8706-050403020100",
        add_on: "youtube_content_id",
        name: "YouTube Content ID",
        release_id: "3f2b6a5e-8c1d-4e7a-9b0f-2a6c5d4e3f21",
        release_title: "Night Drive",
        currency: "USD",
        amount: "4.99",
        at: "2026-11-20T10:00:00.000Z",
      },
    ];
    const texts = pdfTexts(await statementPdf(doc, BRAND, { compress: false }));
    for (const t of ["Add-ons bought", "YouTube Content ID", "20 Nov 2026", "4.99 USD"]) {
      assert.ok(
        texts.some((x) => x.includes(t)),
        `the PDF says ${t}: ${JSON.stringify(texts)}`,
      );
    }
    assert.ok(!pdfTexts(await statementPdf(sample(), BRAND, { compress: false })).includes("Add-ons bought"));
  });

  it("says so when there are no earnings", async () => {
    const pdf = await statementPdf(withEarnings(0), BRAND, { compress: false });
    assertPdf(pdf);
    assert.equal(pageCount(pdf), 1);
    const texts = pdfTexts(pdf);
    assert.ok(texts.includes("No earnings in this period."));
    assert.ok(texts.includes("Page 1 of 1"));
  });

  it("fits 20 earnings on the first page", async () => {
    const pdf = await statementPdf(withEarnings(20), BRAND, { compress: false });
    const texts = pdfTexts(pdf);
    const pageTwo = texts.indexOf("Page 1 of 2");
    assert.ok(pageTwo > 0, "the advances and rates follow on a second page");
    assert.ok(texts.indexOf("Release 20") < pageTwo, "the last earning is on page 1");
    assert.equal(texts.includes("Earnings (continued)"), false);
    assert.ok(texts.includes("20,195.00 EUR"), "the earned total, 20 × 1000.25 + (0 + 1 + … + 19)");
  });

  it("runs 2,000 earnings over pages, headings repeated and every page numbered", async () => {
    const pdf = await statementPdf(withEarnings(2000), BRAND, { compress: false });
    assertPdf(pdf);
    // 29 rows on page 1 (under the header and summary), 50 on each later page: 1 + ceil(1971 / 50).
    assert.equal(pageCount(pdf), 41);
    const texts = pdfTexts(pdf);
    for (let n = 1; n <= 41; n++) assert.ok(texts.includes(`Page ${n} of 41`), `page ${n} is numbered`);
    assert.equal(texts.filter((t) => t === "Page 1 of 41").length, 1);
    assert.equal(
      texts.filter((t) => t === "Recouped").length,
      1 + 41,
      "the summary's label, then the earnings' headings on every page",
    );
    assert.equal(texts.filter((t) => t === "Earnings (continued)").length, 40);
    const order = texts.filter((t) => /^Release [0-9]+$/.test(t)).map((t) => Number(t.slice(8)));
    assert.deepEqual(
      order,
      Array.from({ length: 2000 }, (_, i) => i + 1),
    );
    assert.ok(texts.includes("3,999,500.00"), "the earned total, 2000 × 1000.25 + (0 + 1 + … + 1999)");
  });

  it("shows the logo when it is a PNG or JPEG, and the name when the logo cannot be read", async () => {
    const png = await sharp({
      create: { width: 120, height: 40, channels: 4, background: { r: 124, g: 58, b: 237, alpha: 0.5 } },
    })
      .png()
      .toBuffer();
    const jpeg = await sharp({ create: { width: 40, height: 40, channels: 3, background: "#7c3aed" } })
      .jpeg()
      .toBuffer();
    for (const logo of [png, jpeg]) {
      const pdf = await statementPdf(withEarnings(0), { ...BRAND, logo }, { compress: false });
      assertPdf(pdf);
      assert.ok(pdf.toString("latin1").includes("/Subtype /Image"));
      assert.equal(
        pdfTexts(pdf).filter((t) => t === "Moonlight Music").length,
        0,
        "the logo stands for the name",
      );
    }
    const broken = Buffer.concat([png.subarray(0, 41), Buffer.alloc(30, 0xee), png.subarray(71)]);
    for (const logo of [Buffer.from("not an image"), broken]) {
      const pdf = await statementPdf(
        withEarnings(0),
        { ...BRAND, primaryColor: "nonsense", logo },
        { compress: false },
      );
      assertPdf(pdf);
      assert.equal(pdf.toString("latin1").includes("/Subtype /Image"), false);
      assert.ok(pdfTexts(pdf).includes("Moonlight Music"));
    }
  });

  it("draws what Helvetica cannot as the nearest letter or ?", async () => {
    assert.equal(pdfText("Łódź, Ærø, Zoë, Őrs 日本\u0007x"), "Lódz, Ærø, Zoë, Ors ?? x");
    const doc = sample();
    doc.payee.name = "Zoë Łódź 日本";
    const pdf = await statementPdf(doc, BRAND, { compress: false });
    assert.ok(pdfTexts(pdf).includes("Zoë Lódz ??"));
    // The metadata keeps the name as it is (UTF-16, as PDF strings take it).
    const utf16 = Buffer.from("Zoë Łódź 日本", "utf16le").swap16().toString("latin1");
    assert.ok(pdf.toString("latin1").includes(utf16.replaceAll("(", "\\(").replaceAll(")", "\\)")));
  });
});

describe("formatAmount and periodLabel", () => {
  it("group the whole digits of a decimal string without going through a number", () => {
    assert.equal(formatAmount("0.00"), "0.00");
    assert.equal(formatAmount("999.99"), "999.99");
    assert.equal(formatAmount("1000"), "1,000");
    assert.equal(formatAmount("-1234.5"), "-1,234.5");
    assert.equal(formatAmount("1234567.891"), "1,234,567.891");
    assert.equal(formatAmount("12345678901234567890.12"), "12,345,678,901,234,567,890.12");
    assert.equal(formatAmount("n/a"), "n/a");
    assert.equal(periodLabel("2026-11"), "November 2026");
    assert.equal(periodLabel("2027-01"), "January 2027");
    assert.equal(periodLabel("2026-13"), "2026-13");
  });
});
