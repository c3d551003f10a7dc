/**
 * An issued invoice as files (docs/operator.md, "Plans and invoices"): a PDF with pdfkit, the
 * library the royalty statements use (src/money/statement-pdf.ts; A4, built-in Helvetica,
 * nothing loaded from disk or the network, the same invoice always the same bytes), and CSV.
 *
 * The CSV (RFC 4180, CRLF, no byte-order mark) has the columns
 * `invoice_number, row_type, description, quantity, unit, unit_price, amount, currency`; its rows
 * are each `line` in order, then `subtotal`, `tax` (its rate in `unit_price`, percent) and
 * `total`. The `line` amounts add up exactly to `subtotal`, and `subtotal` plus `tax` is `total`
 * (the rounding rule of src/billing/invoices.ts). Text fields are guarded against spreadsheet
 * formula injection as the statements' are (a leading apostrophe before = + - @).
 */
import PDFDocument from "pdfkit";
import { formatAmount, pdfText } from "../money/statement-pdf.ts";
import { type CreditNote, type Invoice, monthLabel } from "./invoices.ts";

export const INVOICE_CSV_COLUMNS = [
  "invoice_number",
  "row_type",
  "description",
  "quantity",
  "unit",
  "unit_price",
  "amount",
  "currency",
] as const;

const DECIMAL = /^-?[0-9]+(\.[0-9]+)?$/;

function csvField(value: string, amount = false): string {
  let v = value;
  if (!(amount && DECIMAL.test(v)) && /^[=+\-@\t\r]/.test(v)) v = `'${v}`;
  return /[",\r\n]/.test(v) ? `"${v.replace(/"/g, '""')}"` : v;
}

export function invoiceCsv(invoice: Invoice): string {
  const rows: string[][] = [[...INVOICE_CSV_COLUMNS]];
  for (const l of invoice.lines)
    rows.push([
      invoice.number,
      "line",
      l.description,
      l.quantity,
      l.unit,
      l.unit_price,
      l.amount,
      invoice.currency,
    ]);
  rows.push([invoice.number, "subtotal", "Subtotal", "", "", "", invoice.subtotal, invoice.currency]);
  rows.push([
    invoice.number,
    "tax",
    invoice.tax_note || "Tax",
    "",
    "percent",
    invoice.tax_rate,
    invoice.tax,
    invoice.currency,
  ]);
  rows.push([invoice.number, "total", "Total", "", "", "", invoice.total, invoice.currency]);
  return rows
    .map((r) => r.map((f, i) => csvField(f, i === 3 || i === 5 || i === 6)).join(","))
    .map((line) => `${line}\r\n`)
    .join("");
}

const RULE_LABEL: Record<Invoice["tax_rule"], string> = {
  domestic: "VAT",
  eu_reverse_charge: "VAT (reverse charge)",
  eu_consumer: "VAT",
  outside_eu: "VAT (outside the scope)",
  not_applicable: "Tax",
};

export interface InvoicePdfOptions {
  /** Compress the page contents (default true; tests turn it off to read the text). */
  compress?: boolean;
  /** A credit note of the invoice (its number, the invoice it corrects): no due date, usage or payment details. */
  creditNote?: { corrects: string };
}

/**
 * A credit note (src/billing/invoices.ts) as an invoice-shaped document for the files: one line
 * crediting its net amount, the invoice's parties and tax rule, the credit note's own number and totals.
 */
export function creditNoteDocument(invoice: Invoice, note: CreditNote): Invoice {
  return {
    ...invoice,
    number: note.number,
    issued_at: note.issued_at,
    due_on: "",
    subtotal: note.subtotal,
    tax_rate: note.tax_rate,
    tax: note.tax,
    total: note.total,
    lines: [
      {
        description: `Credit for invoice ${invoice.number}: ${note.reason}`,
        currency: note.currency,
        quantity: "1",
        unit: "credit",
        unit_price: note.subtotal,
        amount: note.subtotal,
      },
    ],
  };
}

/** The invoice as a PDF: issuer, customer, number and dates, lines, totals, the tax mention, how to pay. */
export async function invoicePdf(invoice: Invoice, options: InvoicePdfOptions = {}): Promise<Buffer> {
  const pdf = new PDFDocument({
    size: "A4",
    margin: 48,
    compress: options.compress ?? true,
    lang: "en",
    displayTitle: true,
    info: {
      Title: `${options.creditNote ? "Credit note" : "Invoice"} ${invoice.number}`,
      Author: invoice.issuer.legal_name,
      Subject: `${invoice.customer.legal_name}, ${monthLabel(invoice.month)}`,
      Creator: "Backline",
      Producer: "Backline (PDFKit)",
      CreationDate: new Date(invoice.issued_at),
    },
  });
  const chunks: Buffer[] = [];
  const done = new Promise<Buffer>((resolve, reject) => {
    pdf.on("data", (c: Buffer) => chunks.push(c));
    pdf.on("end", () => resolve(Buffer.concat(chunks)));
    pdf.on("error", reject);
  });
  const t = (s: string) => pdfText(s);
  const left = 48;
  const width = pdf.page.width - 96;
  const ink = "#1f2328";
  const muted = "#656d76";
  const money = (v: string) => `${formatAmount(v)} ${invoice.currency}`;

  pdf.fillColor(ink).font("Helvetica-Bold").fontSize(18).text(t(invoice.issuer.legal_name), left, 48);
  pdf.font("Helvetica").fontSize(9).fillColor(muted).text(t(invoice.issuer.address));
  if (invoice.issuer.vat_id) pdf.text(t(`VAT ID ${invoice.issuer.vat_id}`));
  if (invoice.issuer.email) pdf.text(t(invoice.issuer.email));
  pdf.moveDown(1.2);
  pdf
    .fillColor(ink)
    .font("Helvetica-Bold")
    .fontSize(14)
    .text(t(`${options.creditNote ? "Credit note" : "Invoice"} ${invoice.number}`));
  pdf.font("Helvetica").fontSize(9);
  pdf.text(
    t(
      options.creditNote
        ? `Issued ${invoice.issued_at.slice(0, 10)} - corrects invoice ${options.creditNote.corrects} for ${monthLabel(invoice.month)}`
        : `Issued ${invoice.issued_at.slice(0, 10)} - due ${invoice.due_on} - for ${monthLabel(invoice.month)}`,
    ),
  );
  pdf.moveDown(0.8);
  pdf.font("Helvetica-Bold").text("Bill to");
  pdf.font("Helvetica").text(t(invoice.customer.legal_name));
  pdf.text(t(invoice.customer.address));
  pdf.text(
    t(
      `Country ${invoice.customer.country}${invoice.customer.vat_id ? `, VAT ID ${invoice.customer.vat_id}` : ""}`,
    ),
  );
  pdf.moveDown(1);

  const cols = [
    { label: "Description", w: width - 290, align: "left" as const },
    { label: "Quantity", w: 60, align: "right" as const },
    { label: "Unit", w: 60, align: "left" as const },
    { label: "Unit price", w: 80, align: "right" as const },
    { label: "Amount", w: 90, align: "right" as const },
  ];
  const row = (cells: string[], bold = false) => {
    const y = pdf.y;
    let x = left;
    pdf.font(bold ? "Helvetica-Bold" : "Helvetica").fontSize(8.5);
    let h = 0;
    cells.forEach((c, i) => {
      const col = cols[i];
      if (!col) return;
      pdf.text(t(c), x + 2, y, { width: col.w - 4, align: col.align });
      h = Math.max(h, pdf.y - y);
      x += col.w;
    });
    pdf.y = y + h + 4;
    pdf.x = left;
  };
  row(
    cols.map((c) => c.label),
    true,
  );
  pdf
    .moveTo(left, pdf.y - 2)
    .lineTo(left + width, pdf.y - 2)
    .strokeColor("#d0d7de")
    .stroke();
  for (const l of invoice.lines)
    row([l.description, formatAmount(l.quantity), l.unit, formatAmount(l.unit_price), money(l.amount)]);
  pdf
    .moveTo(left, pdf.y)
    .lineTo(left + width, pdf.y)
    .strokeColor("#d0d7de")
    .stroke();
  pdf.y += 4;
  row(["Subtotal", "", "", "", money(invoice.subtotal)]);
  row([`${RULE_LABEL[invoice.tax_rule]} ${invoice.tax_rate}%`, "", "", "", money(invoice.tax)]);
  row(["Total", "", "", "", money(invoice.total)], true);
  pdf.moveDown(1);
  pdf.font("Helvetica").fontSize(8.5).fillColor(ink);
  if (invoice.tax_note) pdf.text(t(invoice.tax_note), left, pdf.y, { width });
  if (!options.creditNote) {
    pdf.moveDown(0.6);
    pdf.text(
      t(
        `Usage in ${monthLabel(invoice.month)}: ${invoice.usage.accounts} accounts, ${invoice.usage.releases_delivered} releases delivered, ` +
          `${invoice.usage.tracks} tracks, ${formatAmount(String(invoice.usage.storage_bytes))} bytes stored, ${formatAmount(String(invoice.usage.api_calls))} API calls.`,
      ),
      { width },
    );
    if (invoice.issuer.bank_details) {
      pdf.moveDown(0.6);
      pdf.font("Helvetica-Bold").text("How to pay");
      pdf
        .font("Helvetica")
        .text(t(`${invoice.issuer.bank_details} - reference ${invoice.number}`), { width });
    }
  }
  pdf.end();
  return done;
}
