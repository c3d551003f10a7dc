import type { Db } from "../db/db.ts";
import { asDbError } from "../db/errors.ts";
import type { Tx } from "../db/types.ts";
import { MoneyError, moneyErrorOf } from "./errors.ts";
import { type PAYOUT_PROVIDERS, payoutFile } from "./providers.ts";
import type { PayoutLine, PayoutMethod } from "./types.ts";

/**
 * Payouts (docs/payouts.md, "Payouts"). A payee asks (public.request_payout, in the database: the
 * checks of tax form, method, threshold and second factor, and the ledger entries that move the
 * amount from their balance to payouts_pending, are one statement); the operator approves the
 * open requests for one provider as a batch, exports the batch as that provider's bulk-upload
 * file, and settles it: every line paid, or some failed (their money returns to the balance).
 */

export type PayoutProvider = (typeof PAYOUT_PROVIDERS)[number];

export interface PayoutRow {
  id: string;
  object: "payout";
  payee_id: string;
  account_id: string;
  status: "requested" | "approved" | "paid" | "failed";
  currency: string;
  amount: string;
  withholding: string;
  net_amount: string;
  batch_id: string | null;
  requested_at: string;
  settled_at: string | null;
  failure_reason: string | null;
}

/** The payee (a signed-in person) asks for their available balance; the transaction is theirs. */
export async function requestPayout(tx: Tx, payeeId: string): Promise<PayoutRow> {
  try {
    const id = (await tx.query<{ id: string }>("select public.request_payout($1) as id", [payeeId])).rows[0]
      ?.id as string;
    return (await payoutById(tx, id)) as PayoutRow;
  } catch (error) {
    throw moneyErrorOf(asDbError(error)) ?? error;
  }
}

export async function payoutById(tx: Tx, id: string): Promise<PayoutRow | undefined> {
  const r = await tx.query<{ o: PayoutRow }>("select internal.payout_object($1) as o", [id]);
  return r.rows[0]?.o ?? undefined;
}

export interface BatchRow {
  id: string;
  object: "payout_batch";
  provider: PayoutProvider;
  status: string;
  approved_at: string;
  approved_by: string | null;
  exported_at: string | null;
  settled_at: string | null;
  payouts: number;
  currencies: { currency: string; amount: string; net_amount: string; withholding: string }[];
}

const BATCH_SELECT = `select b.id, 'payout_batch' as object, b.provider, b.status, b.approved_at, b.approved_by,
    b.exported_at, b.settled_at,
    (select count(*)::int from internal.payouts o where o.batch_id = b.id) as payouts,
    coalesce((select jsonb_agg(jsonb_build_object('currency', c.currency, 'amount', c.amount::text,
        'net_amount', c.net::text, 'withholding', c.withholding::text) order by c.currency)
      from (select o.currency, sum(o.amount) as amount, sum(o.net_amount) as net, sum(o.withholding) as withholding
            from internal.payouts o where o.batch_id = b.id group by o.currency) c), '[]') as currencies
  from internal.payout_batches b`;

export async function listBatches(db: Db, tenantId: string): Promise<BatchRow[]> {
  return db.asService(
    async (tx) =>
      (
        await tx.query<BatchRow>(`${BATCH_SELECT} where b.tenant_id = $1 order by b.approved_at desc, b.id`, [
          tenantId,
        ])
      ).rows,
  );
}

async function batchById(tx: Tx, tenantId: string, id: string): Promise<BatchRow> {
  const row = (
    await tx.query<BatchRow>(`${BATCH_SELECT} where b.tenant_id = $1 and b.id = $2`, [tenantId, id])
  ).rows[0];
  if (!row) throw new MoneyError("not_found", `no payout batch ${id}`);
  return row;
}

export async function findBatch(db: Db, tenantId: string, id: string): Promise<BatchRow> {
  return db.asService((tx) => batchById(tx, tenantId, id));
}

/** The tenant's payouts, newest first, optionally of one status. */
export async function listPayouts(
  db: Db,
  tenantId: string,
  filter: { status?: string | undefined; batchId?: string | undefined } = {},
): Promise<PayoutRow[]> {
  return db.asService(async (tx) =>
    (
      await tx.query<{ o: PayoutRow }>(
        `select internal.payout_object(o.id) as o from internal.payouts o
         where o.tenant_id = $1 and ($2::text is null or o.status = $2) and ($3::uuid is null or o.batch_id = $3)
         order by o.requested_at desc, o.id limit 1000`,
        [tenantId, filter.status ?? null, filter.batchId ?? null],
      )
    ).rows.map((r) => r.o),
  );
}

/**
 * Approves the open requests paid through `provider` in one currency (all of them, or those named)
 * as one batch. A request named but not open, or for another provider or currency, is refused
 * with its id.
 */
export async function approveBatch(
  db: Db,
  tenantId: string,
  provider: PayoutProvider,
  by: string,
  payoutIds?: readonly string[],
  currency?: string,
): Promise<BatchRow> {
  return db.asService(async (tx) => {
    const open = (
      await tx.query<{ id: string; provider: string | null; status: string; currency: string }>(
        `select o.id, o.method ->> 'provider' as provider, o.status, o.currency from internal.payouts o
         where o.tenant_id = $1 and ($2::uuid[] is null or o.id = any ($2::uuid[]))
           and ($2::uuid[] is not null or o.status = 'requested')
         order by o.requested_at, o.id for update`,
        [tenantId, payoutIds ?? null],
      )
    ).rows;
    for (const id of payoutIds ?? []) {
      const row = open.find((o) => o.id === id);
      if (!row) throw new MoneyError("not_found", `no payout ${id}`, "payout_ids");
      if (row.status !== "requested")
        throw new MoneyError("not_settleable", `payout ${id} is ${row.status}, not requested`, "payout_ids");
      if (row.provider !== provider)
        throw new MoneyError(
          "not_in_batch",
          `payout ${id} is paid through ${row.provider}, not ${provider}`,
          "payout_ids",
        );
    }
    // One currency per batch: a provider's bulk file is in one currency (PayPal's is). Unless named,
    // the currency of the oldest open request.
    const eligible = open.filter((o) => o.status === "requested" && o.provider === provider);
    const cur = currency ?? eligible[0]?.currency;
    const chosen = eligible.filter((o) => o.currency === cur).map((o) => o.id);
    if (chosen.length === 0)
      throw new MoneyError(
        "nothing_to_pay",
        `no open payout request is paid through ${provider}${currency ? ` in ${currency}` : ""}`,
      );
    if (payoutIds && chosen.length !== payoutIds.length)
      throw new MoneyError(
        "not_in_batch",
        "the payouts named are in several currencies: one batch is one currency",
        "payout_ids",
      );
    const batch = (
      await tx.query<{ id: string }>(
        "insert into internal.payout_batches (tenant_id, provider, approved_by) values ($1, $2, $3) returning id",
        [tenantId, provider, by],
      )
    ).rows[0] as { id: string };
    await tx.query(
      "update internal.payouts set status = 'approved', batch_id = $2 where id = any ($1::uuid[])",
      [chosen, batch.id],
    );
    return batchById(tx, tenantId, batch.id);
  });
}

/** The batch as the provider's bulk-upload file (src/money/providers.ts, docs/payout-providers.md). */
export async function exportBatch(db: Db, tenantId: string, batchId: string) {
  return db.asService(async (tx) => {
    const batch = await batchById(tx, tenantId, batchId);
    const lines = (
      await tx.query<{
        payout_id: string;
        payee_id: string;
        payee_name: string;
        method: PayoutMethod;
        currency: string;
        amount: string;
        reference: string;
      }>(
        `select o.id as payout_id, o.payee_id, coalesce(p.name, p.email, '') as payee_name, o.method, o.currency,
           o.net_amount::text as amount,
           left(t.name || ' royalties ' || to_char(o.requested_at, 'YYYY-MM'), 140) as reference
         from internal.payouts o join internal.payees p on p.id = o.payee_id join internal.tenants t on t.id = o.tenant_id
         where o.batch_id = $1 order by o.requested_at, o.id`,
        [batchId],
      )
    ).rows as PayoutLine[];
    await tx.query(
      "update internal.payout_batches set exported_at = coalesce(exported_at, now()) where id = $1",
      [batchId],
    );
    return { batch, file: payoutFile(batch.provider, lines, {}) };
  });
}

/**
 * Settles a batch: each payout named in `failed` failed (with its reason), every other one paid.
 * Posts the ledger entries and the payout.paid / payout.failed events.
 */
export async function settleBatch(
  db: Db,
  tenantId: string,
  batchId: string,
  failed: readonly { payout_id: string; reason: string }[] = [],
  reference?: string,
): Promise<BatchRow> {
  return db.asService(async (tx) => {
    const batch = (
      await tx.query<{ status: string }>(
        "select status from internal.payout_batches where tenant_id = $1 and id = $2 for update",
        [tenantId, batchId],
      )
    ).rows[0];
    if (!batch) throw new MoneyError("not_found", `no payout batch ${batchId}`);
    if (batch.status !== "approved")
      throw new MoneyError("batch_settled", `payout batch ${batchId} is ${batch.status}`);
    const members = (
      await tx.query<{ id: string }>("select id from internal.payouts where batch_id = $1 order by id", [
        batchId,
      ])
    ).rows.map((r) => r.id);
    for (const f of failed) {
      if (!members.includes(f.payout_id))
        throw new MoneyError("not_in_batch", `payout ${f.payout_id} is not in batch ${batchId}`, "failed");
    }
    const failedIds = new Set(failed.map((f) => f.payout_id));
    for (const id of members) {
      const f = failed.find((x) => x.payout_id === id);
      await tx.query("select internal.settle_payout($1, $2, $3, $4)", [
        id,
        f ? "failed" : "paid",
        f?.reason ?? null,
        f ? null : (reference ?? null),
      ]);
    }
    // The payee hears of it in the portal (docs/operator.md, "Notifications"), as the account hears through
    // payout.paid and payout.failed.
    await tx.query(
      `insert into public.notifications (tenant_id, user_id, account_id, kind, title, body, data)
       select o.tenant_id, p.user_id, o.account_id, 'payout.' || o.status,
         case o.status when 'paid' then 'Your payout of ' || o.net_amount || ' ' || o.currency || ' was sent'
           else 'Your payout of ' || o.amount || ' ' || o.currency || ' could not be sent' end,
         case o.status when 'paid' then a.name || ' paid it through ' || case b.provider when 'paypal' then 'PayPal' else 'Wise' end || '.'
           else coalesce(left(o.failure_reason, 4000), 'The provider refused it') || '. The amount is back in your balance.'
         end,
         jsonb_build_object('payout_id', o.id, 'payee_id', o.payee_id)
       from internal.payouts o
       join internal.payees p on p.id = o.payee_id
       join internal.accounts a on a.id = o.account_id
       join internal.payout_batches b on b.id = o.batch_id
       where o.batch_id = $1 and p.user_id is not null`,
      [batchId],
    );
    const status =
      failedIds.size === 0 ? "paid" : failedIds.size === members.length ? "failed" : "partially_paid";
    await tx.query("update internal.payout_batches set status = $2, settled_at = now() where id = $1", [
      batchId,
      status,
    ]);
    return batchById(tx, tenantId, batchId);
  });
}
