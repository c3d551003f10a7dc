import type { Db } from "../db/db.ts";
import { minorUnits } from "./decimal.ts";
import { MoneyError } from "./errors.ts";

/**
 * What the operator sets for a tenant's money (docs/payouts.md, "What the operator sets"): the
 * settings, the distributor's fee (tenant, account or release), exchange rates per period or
 * import, and advances and expenses to recoup. Used by the CLI and /admin/v1 alike.
 */

export interface MoneySettings {
  default_currency: string;
  payout_threshold: string;
  payout_requires_aal2: boolean;
}

export async function moneySettings(db: Db, tenantId: string): Promise<MoneySettings> {
  return db.asService(async (tx) => {
    const row = (
      await tx.query<MoneySettings>(
        `select default_currency, payout_threshold::text, payout_requires_aal2 from internal.money_settings
         where tenant_id = $1`,
        [tenantId],
      )
    ).rows[0];
    return row ?? { default_currency: "USD", payout_threshold: "10.00", payout_requires_aal2: true };
  });
}

export async function updateMoneySettings(
  db: Db,
  tenantId: string,
  patch: Partial<MoneySettings>,
): Promise<MoneySettings> {
  await db.asService((tx) =>
    tx.query(
      `insert into internal.money_settings (tenant_id, default_currency, payout_threshold, payout_requires_aal2)
       values ($1, coalesce($2, 'USD'), coalesce($3::numeric, 10), coalesce($4, true))
       on conflict (tenant_id) do update set
         default_currency = coalesce($2, internal.money_settings.default_currency),
         payout_threshold = coalesce($3::numeric, internal.money_settings.payout_threshold),
         payout_requires_aal2 = coalesce($4, internal.money_settings.payout_requires_aal2), updated_at = now()`,
      [
        tenantId,
        patch.default_currency ?? null,
        patch.payout_threshold ?? null,
        patch.payout_requires_aal2 ?? null,
      ],
    ),
  );
  return moneySettings(db, tenantId);
}

export interface FeeOut {
  account_id: string | null;
  release_id: string | null;
  rate: string;
  updated_at: string;
}

export async function listFees(db: Db, tenantId: string): Promise<FeeOut[]> {
  return db.asService(
    async (tx) =>
      (
        await tx.query<FeeOut>(
          `select account_id, release_id, trim_scale(rate)::text as rate, updated_at from internal.distribution_fees
           where tenant_id = $1 order by account_id nulls first, release_id nulls first`,
          [tenantId],
        )
      ).rows,
  );
}

/** Sets the fee of the tenant, an account of it or a release of that account (rate null removes it). */
export async function setFee(
  db: Db,
  tenantId: string,
  scope: { accountId?: string | undefined; releaseId?: string | undefined },
  rate: string | null,
): Promise<void> {
  await db.asService(async (tx) => {
    if (scope.accountId) {
      const ok = (
        await tx.query(
          `select 1 from internal.accounts a where a.id = $1 and a.tenant_id = $2
             and ($3::uuid is null or exists (select 1 from public.releases r where r.id = $3 and r.account_id = a.id))`,
          [scope.accountId, tenantId, scope.releaseId ?? null],
        )
      ).rowCount;
      if (!ok)
        throw new MoneyError(
          "not_found",
          scope.releaseId
            ? `no release ${scope.releaseId} in account ${scope.accountId}`
            : `no account ${scope.accountId}`,
          scope.releaseId ? "release_id" : "account_id",
        );
    }
    if (rate === null) {
      await tx.query(
        `delete from internal.distribution_fees where tenant_id = $1 and account_id is not distinct from $2
           and release_id is not distinct from $3`,
        [tenantId, scope.accountId ?? null, scope.releaseId ?? null],
      );
      return;
    }
    await tx.query(
      `insert into internal.distribution_fees (tenant_id, account_id, release_id, rate) values ($1, $2, $3, $4)
       on conflict (tenant_id, account_id, release_id) do update set rate = excluded.rate, updated_at = now()`,
      [tenantId, scope.accountId ?? null, scope.releaseId ?? null, rate],
    );
  });
}

export interface RateInput {
  period: string;
  from: string;
  to: string;
  rate: string;
  import_id?: string | undefined;
}

/** Sets the rate converting `from` into `to` for a period (or one import of it). */
export async function setExchangeRate(db: Db, tenantId: string, input: RateInput): Promise<void> {
  await db.asService(async (tx) => {
    const approved = (
      await tx.query(
        "select 1 from internal.money_periods where tenant_id = $1 and period = $2 and status = 'approved'",
        [tenantId, `${input.period.slice(0, 7)}-01`],
      )
    ).rowCount;
    if (approved)
      throw new MoneyError(
        "period_approved",
        `${input.period.slice(0, 7)} is approved: its rates are final`,
        "period",
      );
    await tx.query(
      `insert into internal.exchange_rates (tenant_id, period, import_id, from_currency, to_currency, rate)
       values ($1, $2, $3, $4, $5, $6)
       on conflict (tenant_id, period, import_id, from_currency, to_currency)
         do update set rate = excluded.rate, set_at = now()`,
      [tenantId, `${input.period.slice(0, 7)}-01`, input.import_id ?? null, input.from, input.to, input.rate],
    );
  });
}

export interface RecoupableInput {
  account_id: string;
  release_id?: string | undefined;
  kind: "advance" | "expense";
  currency: string;
  amount: string;
  description: string;
  cross_recoup?: boolean | undefined;
}

export interface RecoupableOut extends Omit<RecoupableInput, "release_id" | "cross_recoup"> {
  id: string;
  object: "recoupable";
  release_id: string | null;
  cross_recoup: boolean;
  unrecouped: string;
  created_at: string;
}

const RECOUPABLE_SELECT = `select c.id, 'recoupable' as object, c.account_id, c.release_id, c.kind, c.currency,
    c.amount::text as amount, c.description, c.cross_recoup, c.created_at,
    trim_scale(-coalesce((select sum(e.amount) from internal.ledger_entries e where e.recoupable_id = c.id), 0))::text
      as unrecouped
  from internal.recoupables c`;

/** Records an advance or expense (the ledger: the account owes it, the operator paid it). */
export async function addRecoupable(
  db: Db,
  tenantId: string,
  input: RecoupableInput,
  by: string,
): Promise<RecoupableOut> {
  return db.asService(async (tx) => {
    const ok = (
      await tx.query(
        `select 1 from internal.accounts a where a.id = $1 and a.tenant_id = $2
           and ($3::uuid is null or exists (select 1 from public.releases r where r.id = $3 and r.account_id = a.id))`,
        [input.account_id, tenantId, input.release_id ?? null],
      )
    ).rowCount;
    if (!ok)
      throw new MoneyError(
        "not_found",
        input.release_id
          ? `no release ${input.release_id} in account ${input.account_id}`
          : `no account ${input.account_id}`,
        input.release_id ? "release_id" : "account_id",
      );
    const places = minorUnits(input.currency);
    if ((input.amount.split(".")[1] ?? "").length > places)
      throw new MoneyError(
        "amount_precision",
        `${input.currency} amounts have at most ${places} decimal${places === 1 ? "" : "s"}`,
        "amount",
      );
    const id = (
      await tx.query<{ id: string }>(
        `insert into internal.recoupables (tenant_id, account_id, release_id, kind, currency, amount, description,
           cross_recoup, created_by)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9) returning id`,
        [
          tenantId,
          input.account_id,
          input.release_id ?? null,
          input.kind,
          input.currency,
          input.amount,
          input.description,
          input.cross_recoup ?? false,
          by,
        ],
      )
    ).rows[0]?.id as string;
    await tx.query("select internal.record_recoupable($1)", [id]);
    return (await tx.query<RecoupableOut>(`${RECOUPABLE_SELECT} where c.id = $1`, [id]))
      .rows[0] as RecoupableOut;
  });
}

export async function listRecoupables(
  db: Db,
  tenantId: string,
  accountId?: string,
): Promise<RecoupableOut[]> {
  return db.asService(
    async (tx) =>
      (
        await tx.query<RecoupableOut>(
          `${RECOUPABLE_SELECT} where c.tenant_id = $1 and ($2::uuid is null or c.account_id = $2)
           order by c.created_at desc, c.id`,
          [tenantId, accountId ?? null],
        )
      ).rows,
  );
}

export interface PeriodOut {
  period: string;
  status: "open" | "approved";
  approved_at: string | null;
  approved_by: string | null;
  payees: number;
  statements: number;
}

export async function listPeriods(db: Db, tenantId: string): Promise<PeriodOut[]> {
  return db.asService(
    async (tx) =>
      (
        await tx.query<PeriodOut>(
          `select to_char(m.period, 'YYYY-MM') as period, m.status, m.approved_at, m.approved_by,
             (select count(distinct e.payee_id)::int from internal.ledger_entries e
               where e.tenant_id = m.tenant_id and e.period = m.period and e.payee_id is not null) as payees,
             (select count(*)::int from internal.statements s where s.tenant_id = m.tenant_id and s.period = m.period)
               as statements
           from internal.money_periods m where m.tenant_id = $1 order by m.period desc`,
          [tenantId],
        )
      ).rows,
  );
}

/**
 * The ledger's proof: per currency, the sum of every entry of the tenant (zero, always) and each
 * holder's balance.
 */
export async function ledgerTrialBalance(db: Db, tenantId: string) {
  return db.asService(
    async (tx) =>
      (
        await tx.query<{ currency: string; holder: string; balance: string; entries: number }>(
          `select currency, holder, trim_scale(sum(amount))::text as balance, count(*)::int as entries
           from internal.ledger_entries where tenant_id = $1 group by rollup (currency, holder)
           having currency is not null order by currency, holder nulls first`,
          [tenantId],
        )
      ).rows,
  );
}

export interface SplitVersionInput {
  track_id: string;
  /** YYYY-MM: the first usage month it applies to. */
  effective_from: string;
  store?: string | undefined;
  territory?: string | undefined;
  splits: { name: string; email?: string | undefined; share: string | number }[];
}

/**
 * Adds a split version for a track of the tenant: dated, and optionally for one store or territory
 * (docs/payouts.md, "Splits"). Money already allocated keeps the version it was allocated by.
 */
export async function addSplitVersion(
  db: Db,
  tenantId: string,
  input: SplitVersionInput,
): Promise<{ id: string }> {
  return db.asService(async (tx) => {
    const ok = (
      await tx.query(
        `select 1 from public.tracks t join internal.accounts a on a.id = t.account_id
         where t.id = $1 and a.tenant_id = $2`,
        [input.track_id, tenantId],
      )
    ).rowCount;
    if (!ok) throw new MoneyError("not_found", `no track ${input.track_id}`, "track_id");
    try {
      const r = await tx.query<{ id: string }>(
        "select internal.add_split_version($1, $2, $3, $4, $5)::text as id",
        [
          input.track_id,
          `${input.effective_from.slice(0, 7)}-01`,
          input.store ?? null,
          input.territory ?? null,
          JSON.stringify(input.splits.map((s) => ({ ...s, share: String(s.share) }))),
        ],
      );
      return { id: r.rows[0]?.id as string };
    } catch (error) {
      const e = error as { detail?: string; message: string };
      if (e.detail === "splits_total") throw new MoneyError("splits_total", e.message, "splits");
      throw error;
    }
  });
}
