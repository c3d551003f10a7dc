import type { Db } from "../db/db.ts";
import type { Tx } from "../db/types.ts";
import type { SecretBox } from "../secrets/box.ts";
import { floorTo, format, minorUnits } from "./decimal.ts";
import { MoneyError } from "./errors.ts";
import type { PayoutMethod } from "./types.ts";

/**
 * Payees and what they hold (docs/payouts.md, "Payees"). Reads run in the caller's transaction,
 * so row security decides who sees which payee: the payee themself (by their user, or their
 * proven e-mail address), or the paying account's owners, admins and payouts:read keys.
 */

export interface PayeeOut {
  id: string;
  object: "payee";
  account_id: string;
  kind: "account" | "person";
  name: string | null;
  email: string | null;
  claimed: boolean;
  currency: string;
  tax: {
    form: string | null;
    status: string;
    country: string | null;
    tax_id_last4: string | null;
    withholding_rate: string;
  };
  payout_method: PayoutMethod | null;
  created_at: string;
}

export interface BalanceOut {
  object: "balance";
  payee_id: string;
  account_id: string;
  currency: string;
  /** Every entry of the payee in this currency, at full precision. */
  balance: string;
  /** What a payout request would ask for now: the balance rounded down to the currency's minor unit. */
  available: string;
  /** Requested or approved payouts not yet paid. */
  pending_payouts: string;
}

const PAYEE_SELECT = `select p.id, 'payee' as object, p.account_id, p.kind, p.name, p.email, p.user_id is not null as claimed,
    p.currency, jsonb_build_object('form', p.tax_form, 'status', p.tax_status, 'country', p.tax_country,
      'tax_id_last4', p.tax_id_last4, 'withholding_rate', trim_scale(p.withholding_rate)::text) as tax,
    p.payout_method, p.created_at
  from internal.payees p`;

export async function listPayees(
  tx: Tx,
  filter: { tenantId?: string | undefined; accountId?: string | undefined; mine?: boolean },
): Promise<PayeeOut[]> {
  return (
    await tx.query<PayeeOut>(
      `${PAYEE_SELECT}
       where p.erased_at is null and ($1::uuid is null or p.account_id = $1)
         and (not $2 or p.id = any (auth.my_payee_ids())) and ($3::uuid is null or p.tenant_id = $3)
       order by p.kind, p.name nulls last, p.email nulls last, p.id limit 1000`,
      [filter.accountId ?? null, filter.mine ?? false, filter.tenantId ?? null],
    )
  ).rows;
}

export async function findPayee(tx: Tx, id: string): Promise<PayeeOut | undefined> {
  return (await tx.query<PayeeOut>(`${PAYEE_SELECT} where p.id = $1 and p.erased_at is null`, [id])).rows[0];
}

/** Balances per payee and currency, of the payees the caller sees (row security), optionally one account's. */
export async function balances(
  tx: Tx,
  filter: { accountId?: string | undefined; payeeId?: string | undefined; mine?: boolean },
): Promise<BalanceOut[]> {
  const rows = (
    await tx.query<{
      payee_id: string;
      account_id: string;
      currency: string;
      balance: string;
      pending: string;
    }>(
      `select e.payee_id, e.account_id, e.currency, trim_scale(sum(e.amount))::text as balance,
         coalesce((select trim_scale(sum(o.amount))::text from internal.payouts o
           where o.payee_id = e.payee_id and o.currency = e.currency and o.status in ('requested', 'approved')), '0') as pending
       from internal.ledger_entries e
       where e.holder = 'payee' and ($1::uuid is null or e.account_id = $1) and ($2::uuid is null or e.payee_id = $2)
         and (not $3 or e.payee_id = any (auth.my_payee_ids()))
       group by e.payee_id, e.account_id, e.currency
       order by e.account_id, e.payee_id, e.currency`,
      [filter.accountId ?? null, filter.payeeId ?? null, filter.mine ?? false],
    )
  ).rows;
  return rows.map((r) => {
    const places = minorUnits(r.currency);
    const available = format(floorTo(r.balance, places), places);
    return {
      object: "balance" as const,
      payee_id: r.payee_id,
      account_id: r.account_id,
      currency: r.currency,
      balance: r.balance,
      available: available.startsWith("-") ? format("0", places) : available,
      pending_payouts: r.pending,
    };
  });
}

export interface TaxFormInput {
  form: "W-9" | "W-8BEN" | "W-8BEN-E";
  name: string;
  country: string;
  tax_id: string;
}

/**
 * The payee files a tax form: its id is sealed at rest (src/secrets), only its last four
 * characters readable. It waits for the operator's review (pending) before payouts.
 */
export async function fileTaxForm(
  db: Db,
  box: SecretBox,
  payeeId: string,
  input: TaxFormInput,
): Promise<void> {
  const sealed = box.encrypt(input.tax_id);
  await db.asService((tx) =>
    tx.query(
      `update internal.payees set tax_form = $2, tax_name = $3, tax_country = $4, tax_id_sealed = $5,
         tax_id_last4 = right($6, 4), tax_status = 'pending', tax_reviewed_at = null, updated_at = now()
       where id = $1`,
      [payeeId, input.form, input.name, input.country, sealed, input.tax_id.replace(/[^0-9A-Za-z]/g, "")],
    ),
  );
}

/**
 * The operator's review of a payee's tax form: verified (with the withholding rate that applies:
 * 0 for a W-9 without backup withholding, the treaty rate or 30 for a W-8) or rejected.
 */
export async function reviewTaxForm(
  db: Db,
  tenantId: string,
  payeeId: string,
  review: { status: "verified" | "rejected"; withholding_rate?: string | undefined },
): Promise<PayeeOut> {
  return db.asService(async (tx) => {
    const row = (
      await tx.query<{ tax_form: string | null }>(
        "select tax_form from internal.payees where id = $1 and tenant_id = $2 and erased_at is null for update",
        [payeeId, tenantId],
      )
    ).rows[0];
    if (!row) throw new MoneyError("not_found", `no payee ${payeeId}`);
    if (!row.tax_form)
      throw new MoneyError("tax_form_required", "the payee has not filed a tax form yet", "status");
    const rate = review.withholding_rate ?? (row.tax_form === "W-9" ? "0" : "30");
    const withholding = review.status === "verified" ? rate : "0";
    await tx.query(
      `update internal.payees set tax_status = $2, withholding_rate = $3, tax_reviewed_at = now(), updated_at = now()
       where id = $1`,
      [payeeId, review.status, withholding],
    );
    // The act in the audit log (migration 0041): the decision, never the tax identity.
    await tx.query(
      `select internal.audit('money.tax_review', 'internal.payees', $1, $2, null,
         jsonb_build_object('tax_form', $3::text, 'tax_status', $4::text, 'withholding_rate', $5::numeric))`,
      [payeeId, tenantId, row.tax_form, review.status, withholding],
    );
    return (await findPayee(tx, payeeId)) as PayeeOut;
  });
}

export async function setPayoutMethod(db: Db, payeeId: string, method: PayoutMethod | null): Promise<void> {
  await db.asService(async (tx) => {
    await tx.query("update internal.payees set payout_method = $2, updated_at = now() where id = $1", [
      payeeId,
      method === null ? null : JSON.stringify(method),
    ]);
    // Where a payee's money goes changed: an act to find again (which provider; not the account).
    await tx.query(
      `select internal.audit('money.payout_method', 'internal.payees', p.id::text, p.tenant_id, null,
         jsonb_build_object('provider', $2::text))
       from internal.payees p where p.id = $1`,
      [payeeId, method?.provider ?? null],
    );
  });
}

/**
 * Erases a payee's personal data (name, e-mail, tax identity, payout method): the ledger keeps the
 * pseudonymous payee id, so every balance and statement still adds up.
 */
export async function erasePayee(db: Db, tenantId: string, payeeId: string): Promise<boolean> {
  // One place for this and a person's erasure: internal.payee_erase (migration 0043), which also
  // records the act (money.payee_erased), with nothing of what was erased.
  return db.asService(
    async (tx) =>
      (
        await tx.query<{ erased: boolean }>("select internal.payee_erase($2, $1) as erased", [
          payeeId,
          tenantId,
        ])
      ).rows[0]?.erased === true,
  );
}
