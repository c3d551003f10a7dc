import { randomUUID } from "node:crypto";
import type { Db } from "../db/db.ts";
import { asDbError } from "../db/errors.ts";
import type { Tx } from "../db/types.ts";
import { add, format, largestRemainder, minorUnits, roundHalfUp, sub, sum } from "./decimal.ts";
import { MoneyError } from "./errors.ts";
import { mailStatement, type StatementMail } from "./statement-mail.ts";
import type {
  StatementCharge,
  StatementDocument,
  StatementEarning,
  StatementPayment,
  StatementRecoupable,
} from "./types.ts";

/**
 * Statements (docs/payouts.md, "Statements"): what a payee earned and was paid in one accounting
 * period, in their currency. A draft is computed from the ledger whenever it is asked for; the
 * operator's approval of a period converts each payee's other currencies (ledger entries, at the
 * rates set), writes every payee's statement once, and from then on the statement is read as it
 * was approved — the database refuses to change it.
 *
 * Stated figures are the ledger's exact sums rounded by the one rule (src/money/decimal.ts
 * largestRemainder): the opening balance rounded half up; the earnings, adjustments and payments
 * rounded together so that opening + earnings + adjustments + payments is exactly the closing
 * balance rounded half up. The sub-cent part of the opening balance is carried in adjustments, so
 * nothing is ever lost between statements.
 */

export const monthOf = (period: string) => `${period.slice(0, 7)}-01`;

interface PayeeRow {
  id: string;
  kind: "account" | "person";
  tenant_id: string;
  account_id: string;
  name: string | null;
  email: string | null;
  currency: string;
  account_name: string;
  tenant_name: string;
}

interface EarningRow {
  release_id: string | null;
  release_title: string | null;
  track_id: string | null;
  track_title: string | null;
  isrc: string | null;
  store: string | null;
  territory: string | null;
  currency: string;
  rate: string | null;
  amount: string | null;
  fee: string | null;
  recouped: string | null;
}

async function payeeRow(tx: Tx, payeeId: string): Promise<PayeeRow | undefined> {
  const r = await tx.query<PayeeRow>(
    `select p.id, p.kind, p.tenant_id, p.account_id, p.name, p.email, p.currency, a.name as account_name, t.name as tenant_name
     from internal.payees p join internal.accounts a on a.id = p.account_id join internal.tenants t on t.id = p.tenant_id
     where p.id = $1`,
    [payeeId],
  );
  return r.rows[0];
}

/** The rate a payee's entries of an import convert at: the import's, else the period's. */
const RATE = `(select trim_scale(x.rate)::text from internal.exchange_rates x where x.tenant_id = e.tenant_id and x.period = e.period
    and x.from_currency = e.currency and x.to_currency = $3 and (x.import_id is null or x.import_id = e.import_id)
    order by (x.import_id is not null) desc limit 1)`;

/**
 * The statement of a payee for a period as the ledger has it now (a draft), or the approved one.
 * Entries in another currency are shown converted at the rate that applies (rate null and amounts
 * unconverted in a draft whose rate the operator has not set yet).
 */
export async function statementFor(
  tx: Tx,
  payeeId: string,
  period: string,
): Promise<StatementDocument | undefined> {
  const p = monthOf(period);
  const approved = await tx.query<{ document: StatementDocument }>(
    "select document from internal.statements where payee_id = $1 and period = $2",
    [payeeId, p],
  );
  if (approved.rows[0]) return approved.rows[0].document;
  return draftStatement(tx, payeeId, p);
}

async function draftStatement(tx: Tx, payeeId: string, p: string): Promise<StatementDocument | undefined> {
  const payee = await payeeRow(tx, payeeId);
  if (!payee) return undefined;
  const places = minorUnits(payee.currency);
  const cur = payee.currency;
  const opening =
    (
      await tx.query<{ v: string | null }>(
        `select trim_scale(sum(amount))::text as v from internal.ledger_entries
         where payee_id = $1 and period < $2 and currency = $3`,
        [payeeId, p, cur],
      )
    ).rows[0]?.v ?? "0";
  // Converted entries: the conversion's own entries are left out, the originals shown at their rate.
  const earnings = (
    await tx.query<EarningRow>(
      `with e as (
         select e.*, case when e.currency = $3 then '1' else ${RATE} end as rate
         from internal.ledger_entries e
         where e.payee_id = $1 and e.period = $2 and e.txn_kind = 'allocation'
       )
       select e.release_id, r.title as release_title, e.track_id, t.title as track_title, t.isrc, e.store, e.territory,
         e.currency, case when e.currency = $3 then null else min(e.rate) end as rate,
         trim_scale(sum(e.amount * e.rate::numeric))::text as amount,
         trim_scale(sum(e.fee_amount * e.rate::numeric))::text as fee,
         trim_scale(sum(e.recouped_amount * e.rate::numeric))::text as recouped
       from e left join public.releases r on r.id = e.release_id left join public.tracks t on t.id = e.track_id
       group by e.release_id, r.title, e.track_id, t.title, t.isrc, e.store, e.territory, e.currency, e.rate
       order by r.title nulls last, t.title nulls last, e.store nulls last, e.territory nulls last, e.currency`,
      [payeeId, p, cur],
    )
  ).rows;
  const adjustments =
    (
      await tx.query<{ v: string | null }>(
        `select trim_scale(sum(e.amount * coalesce(case when e.currency = $3 then 1 else ${RATE}::numeric end, 1)))::text as v
         from internal.ledger_entries e where e.payee_id = $1 and e.period = $2 and e.txn_kind = 'void'`,
        [payeeId, p, cur],
      )
    ).rows[0]?.v ?? "0";
  const payments = (
    await tx.query<{
      payout_id: string;
      status: "requested" | "paid" | "failed";
      amount: string;
      withholding: string;
      at: Date;
    }>(
      `select e.payout_id, case e.txn_kind when 'payout_failed' then 'failed'
           else (case o.status when 'paid' then 'paid' else 'requested' end) end as status,
         trim_scale(e.amount)::text as amount, o.withholding::text as withholding, e.posted_at as at
       from internal.ledger_entries e join internal.payouts o on o.id = e.payout_id
       where e.payee_id = $1 and e.period = $2 and e.txn_kind in ('payout_request', 'payout_failed') and e.currency = $3
       order by e.posted_at, e.id`,
      [payeeId, p, cur],
    )
  ).rows;
  const recoupables = (
    await tx.query<{
      id: string;
      kind: "advance" | "expense";
      description: string;
      release_id: string | null;
      currency: string;
      amount: string;
      unrecouped: string;
    }>(
      `select c.id, c.kind, c.description, c.release_id, c.currency, c.amount::text,
         trim_scale(-coalesce((select sum(e.amount) from internal.ledger_entries e
           where e.recoupable_id = c.id and e.period <= $2), 0))::text as unrecouped
       from internal.recoupables c where c.account_id = $1 and c.created_at < ($2::date + interval '1 month')
       order by c.created_at, c.id`,
      [payee.account_id, p],
    )
  ).rows;
  const rates = (
    await tx.query<{ from: string; to: string; rate: string }>(
      `select distinct x.from_currency as from, x.to_currency as to, trim_scale(x.rate)::text as rate
       from internal.exchange_rates x where x.tenant_id = $1 and x.period = $2 and x.to_currency = $3
         and exists (select 1 from internal.ledger_entries e where e.payee_id = $4 and e.period = $2
           and e.currency = x.from_currency)
       order by 1, 3`,
      [payee.tenant_id, p, cur, payeeId],
    )
  ).rows;
  // Add-ons bought in the period (migration 0051): on the account's own statement, charged as
  // expenses (in recoupables above) — listed so the statement says what was bought.
  const charges =
    payee.kind === "account"
      ? (
          await tx.query<{
            order_id: string;
            add_on: string;
            name: string;
            release_id: string;
            release_title: string | null;
            currency: string;
            amount: string;
            at: Date;
          }>(
            `select o.id as order_id, o.add_on, o.name, o.release_id, r.title as release_title, o.currency,
               o.price::text as amount, o.created_at as at
             from internal.add_on_orders o
             join internal.ledger_entries e on e.recoupable_id = o.recoupable_id and e.txn_kind = 'add_on'
             left join public.releases r on r.id = o.release_id
             where o.account_id = $1 and e.period = $2
             order by o.created_at, o.id`,
            [payee.account_id, p],
          )
        ).rows.map(
          (c): StatementCharge => ({
            ...c,
            kind: "add_on",
            amount: format(c.amount, minorUnits(c.currency)),
            at: c.at.toISOString(),
          }),
        )
      : [];
  if (
    earnings.length === 0 &&
    payments.length === 0 &&
    charges.length === 0 &&
    adjustments === "0" &&
    opening === "0"
  )
    return undefined;
  const doc = stateStatement(payee, p, opening, earnings, adjustments, payments, recoupables, rates, places);
  if (charges.length > 0) doc.charges = charges;
  return doc;
}

/** Rounds the exact figures into the stated document (the rule in this module's comment). */
function stateStatement(
  payee: PayeeRow,
  p: string,
  openingExact: string,
  rows: EarningRow[],
  adjustmentsExact: string,
  paymentRows: {
    payout_id: string;
    status: "requested" | "paid" | "failed";
    amount: string;
    withholding: string;
    at: Date;
  }[],
  recoupables: StatementRecoupable[],
  rates: { from: string; to: string; rate: string }[],
  places: number,
): StatementDocument {
  const nets = rows.map((r) => r.amount ?? "0");
  const fees = rows.map((r) => r.fee ?? "0");
  const recouped = rows.map((r) => r.recouped ?? "0");
  const earned = nets.map((net, i) => add(add(net, fees[i] ?? "0"), recouped[i] ?? "0"));
  const opening = roundHalfUp(openingExact, places);
  const carried = sub(openingExact, opening);
  const pays = paymentRows.map((r) => r.amount);
  const parts = largestRemainder([...nets, add(adjustmentsExact, carried), ...pays], places);
  const statedNets = parts.slice(0, nets.length);
  const statedAdjustments = parts[nets.length] ?? format("0", places);
  const statedPays = parts.slice(nets.length + 1);
  const statedEarned = largestRemainder(earned, places);
  const statedFees = largestRemainder(fees, places);
  const statedRecouped = largestRemainder(recouped, places);
  const earnings: StatementEarning[] = rows.map((r, i) => ({
    release_id: r.release_id,
    release_title: r.release_title,
    track_id: r.track_id,
    track_title: r.track_title,
    isrc: r.isrc,
    store: r.store,
    territory: r.territory,
    currency: payee.currency,
    original_currency: r.currency,
    rate: r.rate,
    earned: statedEarned[i] as string,
    fees: statedFees[i] as string,
    recouped: statedRecouped[i] as string,
    net: statedNets[i] as string,
  }));
  const payments: StatementPayment[] = paymentRows.map((r, i) => ({
    payout_id: r.payout_id,
    status: r.status,
    currency: payee.currency,
    amount: statedPays[i] as string,
    withholding: r.withholding,
    at: r.at.toISOString(),
  }));
  const totalOf = (xs: string[]) => format(sum(xs), places);
  const closing = format(sum([opening, ...parts]), places);
  return {
    id: "",
    object: "statement",
    tenant_name: payee.tenant_name,
    account_id: payee.account_id,
    account_name: payee.account_name,
    payee: { id: payee.id, name: payee.name ?? payee.email ?? payee.account_name, email: payee.email },
    period: p.slice(0, 7),
    currency: payee.currency,
    status: "draft",
    approved_at: null,
    opening_balance: format(opening, places),
    earnings,
    totals: {
      currency: payee.currency,
      earned: totalOf(statedEarned),
      fees: totalOf(statedFees),
      recouped: totalOf(statedRecouped),
      net: totalOf(statedNets),
    },
    payments,
    payments_total: totalOf(statedPays),
    adjustments_total: statedAdjustments,
    closing_balance: closing,
    recoupables: recoupables.map((c) => ({
      ...c,
      amount: format(c.amount, minorUnits(c.currency)),
      unrecouped: format(c.unrecouped, minorUnits(c.currency)),
    })),
    rates,
  };
}

export interface ApprovalReport {
  period: string;
  statements: {
    id: string;
    payee_id: string;
    account_id: string;
    currency: string;
    closing_balance: string;
  }[];
}

/**
 * The operator approves a period: each payee with entries in it gets their statement, converted
 * and rounded, written once, and e-mailed to the payee's address when `mail` is given. Earlier periods with entries must be approved first; a missing rate
 * stops the whole approval (nothing is written).
 */
export async function approvePeriod(
  db: Db,
  tenantId: string,
  period: string,
  by: string,
  /** Where each statement is e-mailed to its payee from (without it, none is). */
  mail?: StatementMail,
): Promise<ApprovalReport> {
  const p = monthOf(period);
  return db.asService(async (tx) => {
    const current = (
      await tx.query<{ future: boolean }>("select $1::date > date_trunc('month', now())::date as future", [p])
    ).rows[0];
    if (current?.future) {
      throw new MoneyError(
        "period_not_started",
        `${period.slice(0, 7)} has not begun: there is nothing to approve yet`,
      );
    }
    await tx.query(
      "insert into internal.money_periods (tenant_id, period) values ($1, $2) on conflict do nothing",
      [tenantId, p],
    );
    const row = (
      await tx.query<{ status: string }>(
        "select status from internal.money_periods where tenant_id = $1 and period = $2 for update",
        [tenantId, p],
      )
    ).rows[0];
    if (row?.status === "approved") {
      throw new MoneyError(
        "period_approved",
        `the statements of ${period.slice(0, 7)} were approved already`,
      );
    }
    const earlier = (
      await tx.query<{ period: string }>(
        `select to_char(m.period, 'YYYY-MM') as period from internal.money_periods m
         where m.tenant_id = $1 and m.period < $2 and m.status = 'open'
           and exists (select 1 from internal.ledger_entries e where e.tenant_id = m.tenant_id and e.period = m.period)
         order by m.period limit 1`,
        [tenantId, p],
      )
    ).rows[0];
    if (earlier) {
      throw new MoneyError(
        "earlier_period_open",
        `approve ${earlier.period} first: statements are approved in order, each opening with the last one's closing balance`,
      );
    }
    // Every payee with entries in the period, and the own payee of each account charged for an
    // add-on in it (migration 0051), whose statement shows the charge.
    const payees = (
      await tx.query<{ payee_id: string }>(
        `select payee_id from internal.ledger_entries
         where tenant_id = $1 and period = $2 and payee_id is not null
         union
         select internal.account_payee(x.account_id) from (select distinct account_id from internal.ledger_entries
           where tenant_id = $1 and period = $2 and txn_kind = 'add_on') x
         order by 1`,
        [tenantId, p],
      )
    ).rows;
    const statements: ApprovalReport["statements"] = [];
    const approvedAt = ((await tx.query<{ at: Date }>("select now() as at")).rows[0] as { at: Date }).at;
    for (const { payee_id } of payees) {
      try {
        await tx.query("select internal.convert_payee_period($1, $2)", [payee_id, p]);
      } catch (error) {
        const e = asDbError(error);
        if (e?.detail === "rate_missing") throw new MoneyError("rate_missing", e.message);
        throw error;
      }
      const doc = await draftStatement(tx, payee_id, p);
      if (!doc) continue;
      doc.id = randomUUID();
      doc.status = "approved";
      doc.approved_at = approvedAt.toISOString();
      await tx.query(
        `insert into internal.statements (id, tenant_id, account_id, payee_id, period, currency, opening_balance,
           closing_balance, document, approved_at)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
        [
          doc.id,
          tenantId,
          doc.account_id,
          payee_id,
          p,
          doc.currency,
          doc.opening_balance,
          doc.closing_balance,
          JSON.stringify(doc),
          approvedAt,
        ],
      );
      const summary = statementObject(doc);
      await tx.query(
        `insert into internal.events (tenant_id, account_id, type, data)
         values ($1, $2, 'statement.ready', jsonb_build_object('object', $3::jsonb))`,
        [tenantId, doc.account_id, JSON.stringify(summary)],
      );
      await tx.query(
        `insert into public.notifications (tenant_id, user_id, account_id, kind, title, body, data)
         select p.tenant_id, coalesce(p.user_id, u.id), p.account_id, 'statement.ready', $2, $3, $4::jsonb
         from internal.payees p
         left join internal.users u on p.user_id is null and u.tenant_id = p.tenant_id and u.email = p.email
           and u.email_proven_at is not null and u.deleted_at is null
         where p.id = $1 and coalesce(p.user_id, u.id) is not null`,
        [
          payee_id,
          `Your statement for ${doc.period} is ready`,
          `${doc.account_name}: closing balance ${doc.closing_balance} ${doc.currency}.`,
          JSON.stringify({ statement_id: doc.id, period: doc.period }),
        ],
      );
      if (mail) await mailStatement(tx, mail, tenantId, doc);
      statements.push({
        id: doc.id,
        payee_id,
        account_id: doc.account_id,
        currency: doc.currency,
        closing_balance: doc.closing_balance,
      });
    }
    await tx.query(
      "update internal.money_periods set status = 'approved', approved_at = now(), approved_by = $3 where tenant_id = $1 and period = $2",
      [tenantId, p, by],
    );
    return { period: p.slice(0, 7), statements };
  });
}

/** A statement as the API lists it and statement.ready carries it (the document without its lines). */
export function statementObject(doc: StatementDocument) {
  return {
    id: doc.id,
    object: "statement" as const,
    account_id: doc.account_id,
    payee_id: doc.payee.id,
    period: doc.period,
    currency: doc.currency,
    status: doc.status,
    approved_at: doc.approved_at,
    opening_balance: doc.opening_balance,
    earnings_total: doc.totals.net,
    payments_total: doc.payments_total,
    adjustments_total: doc.adjustments_total,
    closing_balance: doc.closing_balance,
  };
}

/** Approved statements (summaries), newest period first, of the payees and accounts the filter names. */
export async function listStatements(
  tx: Tx,
  filter: {
    tenantId?: string | undefined;
    accountId?: string | undefined;
    payeeId?: string | undefined;
    period?: string | undefined;
    mine?: boolean;
  },
): Promise<ReturnType<typeof statementObject>[]> {
  const rows = await tx.query<{ document: StatementDocument }>(
    `select s.document from internal.statements s
     where ($1::uuid is null or s.tenant_id = $1) and ($2::uuid is null or s.account_id = $2)
       and ($3::uuid is null or s.payee_id = $3) and ($4::date is null or s.period = $4)
       and (not $5 or s.payee_id = any (auth.my_payee_ids()))
     order by s.period desc, s.account_id, s.payee_id limit 1000`,
    [
      filter.tenantId ?? null,
      filter.accountId ?? null,
      filter.payeeId ?? null,
      filter.period ? monthOf(filter.period) : null,
      filter.mine ?? false,
    ],
  );
  return rows.rows.map((r) => statementObject(r.document));
}
