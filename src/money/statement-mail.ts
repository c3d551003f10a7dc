import type { Tx } from "../db/types.ts";
import type { Mailer } from "../mail/mailer.ts";
import { portalUrl } from "../portal/links.ts";
import { periodLabel } from "./statement-pdf.ts";
import type { StatementDocument } from "./types.ts";

/**
 * An approved statement, e-mailed to the payee's address (docs/payouts.md, "Accounting periods
 * and statements"): its figures, and a link to it in the tenant's portal, where it is read whole
 * and downloaded as a PDF or CSV. The PDF is not attached: the mail stays small, and the portal
 * is also where someone a split names claims the money held for them (by proving this address).
 * The tenant's branding is applied when the mail is sent (src/mail/branding.ts), as for every mail.
 */
export interface StatementMail {
  mailer: Pick<Mailer, "enqueue">;
  /** PUBLIC_URL: the portal's address is made from it and the tenant's domains. */
  publicUrl: string;
}

export function statementMessage(doc: StatementDocument, link: string): { subject: string; text: string } {
  const period = periodLabel(doc.period);
  const money = (amount: string) => `${amount} ${doc.currency}`;
  const lines = [
    `Hello ${doc.payee.name},`,
    "",
    `${doc.account_name}'s royalty statement for ${period} is ready.`,
    "",
    `Opening balance: ${money(doc.opening_balance)}`,
    `Earnings (after fees and recoupment): ${money(doc.totals.net)}`,
    `Payments: ${money(doc.payments_total)}`,
    `Adjustments: ${money(doc.adjustments_total)}`,
    `Closing balance: ${money(doc.closing_balance)}`,
    "",
    "Read it line by line, and download it as a PDF or CSV, in your portal:",
    link,
    "",
    "This statement is final. A correction that comes later is shown as an adjustment on a later statement.",
  ];
  return { subject: `Your royalty statement for ${period} from ${doc.account_name}`, text: lines.join("\n") };
}

/** Queues the statement's mail in the approval's transaction and records that it was e-mailed. */
export async function mailStatement(
  tx: Tx,
  mail: StatementMail,
  tenantId: string,
  doc: StatementDocument,
): Promise<boolean> {
  if (!doc.payee.email) return false;
  const tenant = (
    await tx.query<{ slug: string; settings: Record<string, unknown> }>(
      "select slug, settings from internal.tenants where id = $1",
      [tenantId],
    )
  ).rows[0];
  if (!tenant) return false;
  const link = `${portalUrl(mail.publicUrl, tenant)}money/statements/${doc.id}`;
  await mail.mailer.enqueue(tx, {
    tenantId,
    to: doc.payee.email,
    kind: "statement.ready",
    ...statementMessage(doc, link),
  });
  await tx.query("update internal.statements set emailed_at = now() where id = $1", [doc.id]);
  return true;
}
