/**
 * Plans and invoices for white-label tenants (migration 0050; docs/operator.md, "Plans and
 * invoices"): the installation (the issuer) bills each tenant (the customer) a plan's monthly fee
 * and the units it used past the plan's allowance, once a month, on a numbered invoice that never
 * changes after it is issued; payments are recorded against invoices, by hand or from a provider's
 * export, and what is past due without being paid in full is overdue. Used by /admin/v1
 * (src/billing/admin.ts), the CLI (`backline invoices`) and the worker's monthly job alike.
 *
 * Money is decimal strings (src/money/decimal.ts) and `numeric` in the database, never a float.
 * The rounding rule: each line's amount is its quantity times its unit price, rounded half away
 * from zero to the currency's minor unit (cents); the subtotal is the sum of the rounded lines; the
 * tax is the subtotal times the rate, rounded once the same way; the total is subtotal plus tax.
 * So the lines add up exactly to the subtotal, and the CSV's rows to the totals.
 */
import type { Db } from "../db/db.ts";
import type { Tx } from "../db/types.ts";
import { HttpError } from "../http/problem.ts";
import {
  add,
  compare,
  format,
  minorUnits,
  mul,
  parseDecimal,
  roundHalfUp,
  sub,
  sum,
  toDecimal,
} from "../money/decimal.ts";
import { decideTax, type TaxRule } from "./tax.ts";
import { type Usage, usageOf } from "./usage.ts";

export interface Issuer {
  legal_name: string;
  address: string;
  country: string;
  vat_id: string | null;
  email: string | null;
  invoice_prefix: string;
  payment_terms_days: number;
  tax_rates: Record<string, string>;
  bank_details: string | null;
}

export interface Plan {
  id: string;
  name: string;
  currency: string;
  monthly_fee: string;
  included_accounts: number;
  included_releases: number;
  included_tracks: number;
  included_storage_gb: number;
  included_api_calls: number;
  price_per_account: string;
  price_per_release: string;
  price_per_track: string;
  price_per_storage_gb: string;
  price_per_1000_api_calls: string;
  created_at: string;
}

export interface Customer {
  tenant_id: string;
  plan_id: string;
  legal_name: string;
  address: string;
  country: string;
  vat_id: string | null;
  email: string | null;
}

export interface InvoiceLine {
  description: string;
  currency: string;
  /** A whole number of units, as a string. */
  quantity: string;
  unit: string;
  unit_price: string;
  amount: string;
}

export interface Invoice {
  id: string;
  tenant_id: string;
  number: string;
  month: string;
  issued_at: string;
  due_on: string;
  currency: string;
  subtotal: string;
  tax_rate: string;
  tax: string;
  total: string;
  tax_rule: TaxRule;
  tax_note: string;
  issuer: Issuer;
  customer: Omit<Customer, "plan_id">;
  plan: Plan;
  usage: Usage;
  lines: InvoiceLine[];
  paid: string;
  /** What credit notes took off it. */
  credited: string;
  balance: string;
  status: "paid" | "open" | "overdue";
}

export interface Payment {
  id: string;
  invoice_id: string;
  invoice_number: string;
  tenant_id: string;
  amount: string;
  currency: string;
  paid_at: string;
  method: "manual" | "stripe_charges_csv";
  external_ref: string | null;
  note: string | null;
  recorded_by: string;
}

const fail = (status: number, code: string, message: string, param?: string): never => {
  throw new HttpError(status, code, message, param);
};

/** "2026-11" → the first day and the first day of the next month. */
export function monthBounds(month: string): { start: string; end: string } {
  const m = /^(\d{4})-(0[1-9]|1[0-2])$/.exec(month);
  if (!m) return fail(400, "invalid_request", "month is YYYY-MM", "month");
  const y = Number(m[1]);
  const mo = Number(m[2]);
  const next = mo === 12 ? `${y + 1}-01` : `${y}-${String(mo + 1).padStart(2, "0")}`;
  return { start: `${month}-01`, end: `${next}-01` };
}

/** The month before `now`'s, YYYY-MM (UTC): the one a scheduled run invoices. */
export function previousMonth(now: Date = new Date()): string {
  const d = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 1, 1));
  return d.toISOString().slice(0, 7);
}

// ---------------------------------------------------------------------------------------------
// The issuer, plans and each tenant's plan
// ---------------------------------------------------------------------------------------------

const ISSUER_COLUMNS = `legal_name, address, country::text as country, vat_id, email, invoice_prefix,
  payment_terms_days, tax_rates, bank_details`;

export async function issuerOf(tx: Tx): Promise<Issuer | undefined> {
  return (await tx.query<Issuer>(`select ${ISSUER_COLUMNS} from internal.billing_issuer`)).rows[0];
}

export async function getIssuer(db: Db): Promise<Issuer | null> {
  return (await db.asService(issuerOf, { readOnly: true })) ?? null;
}

export async function setIssuer(
  db: Db,
  input: Omit<Issuer, "tax_rates"> & { tax_rates?: Record<string, string> },
): Promise<Issuer> {
  return db.asService(async (tx) => {
    await tx.query(
      `insert into internal.billing_issuer (id, legal_name, address, country, vat_id, email, invoice_prefix,
         payment_terms_days, tax_rates, bank_details)
       values (true, $1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9)
       on conflict (id) do update set legal_name = excluded.legal_name, address = excluded.address,
         country = excluded.country, vat_id = excluded.vat_id, email = excluded.email,
         invoice_prefix = excluded.invoice_prefix, payment_terms_days = excluded.payment_terms_days,
         tax_rates = excluded.tax_rates, bank_details = excluded.bank_details, updated_at = now()`,
      [
        input.legal_name,
        input.address,
        input.country,
        input.vat_id,
        input.email,
        input.invoice_prefix,
        input.payment_terms_days,
        JSON.stringify(input.tax_rates ?? {}),
        input.bank_details,
      ],
    );
    return (await issuerOf(tx)) as Issuer;
  });
}

const PLAN_COLUMNS = `id::text as id, name, currency::text as currency, monthly_fee::text as monthly_fee,
  included_accounts, included_releases, included_tracks, included_storage_gb,
  included_api_calls::int8::text as included_api_calls,
  price_per_account::text as price_per_account, price_per_release::text as price_per_release,
  price_per_track::text as price_per_track, price_per_storage_gb::text as price_per_storage_gb,
  price_per_1000_api_calls::text as price_per_1000_api_calls,
  to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as created_at`;

const planOut = (row: Plan): Plan => ({ ...row, included_api_calls: Number(row.included_api_calls) });

export type PlanInput = Omit<Plan, "id" | "created_at">;

export async function createPlan(db: Db, input: PlanInput): Promise<Plan> {
  if (minorUnits(input.currency) > 2)
    fail(422, "unsupported_currency", "A plan's currency has at most two decimals.", "currency");
  return db.asService(async (tx) => {
    const taken = await tx.query("select 1 from internal.billing_plans where name = $1", [input.name]);
    if (taken.rows.length > 0) fail(409, "plan_exists", `A plan is already called ${input.name}.`, "name");
    const row = (
      await tx.query<Plan>(
        `insert into internal.billing_plans (name, currency, monthly_fee, included_accounts, included_releases,
           included_tracks, included_storage_gb, included_api_calls, price_per_account, price_per_release,
           price_per_track, price_per_storage_gb, price_per_1000_api_calls)
         values ($1, $2, $3::numeric, $4, $5, $6, $7, $8, $9::numeric, $10::numeric, $11::numeric, $12::numeric, $13::numeric)
         returning ${PLAN_COLUMNS}`,
        [
          input.name,
          input.currency,
          input.monthly_fee,
          input.included_accounts,
          input.included_releases,
          input.included_tracks,
          input.included_storage_gb,
          input.included_api_calls,
          input.price_per_account,
          input.price_per_release,
          input.price_per_track,
          input.price_per_storage_gb,
          input.price_per_1000_api_calls,
        ],
      )
    ).rows[0] as Plan;
    return planOut(row);
  });
}

export async function listPlans(db: Db): Promise<Plan[]> {
  return db.asService(
    async (tx) =>
      (await tx.query<Plan>(`select ${PLAN_COLUMNS} from internal.billing_plans order by name`)).rows.map(
        planOut,
      ),
    { readOnly: true },
  );
}

const CUSTOMER_COLUMNS = `tenant_id::text as tenant_id, plan_id::text as plan_id, legal_name, address,
  country::text as country, vat_id, email`;

export interface TenantBilling {
  tenant_id: string;
  customer: Customer | null;
  plan: Plan | null;
}

async function billingOf(tx: Tx, tenantId: string): Promise<TenantBilling> {
  const customer =
    (
      await tx.query<Customer>(
        `select ${CUSTOMER_COLUMNS} from internal.tenant_billing where tenant_id = $1`,
        [tenantId],
      )
    ).rows[0] ?? null;
  const plan = customer
    ? ((
        await tx.query<Plan>(`select ${PLAN_COLUMNS} from internal.billing_plans where id = $1`, [
          customer.plan_id,
        ])
      ).rows[0] ?? null)
    : null;
  return { tenant_id: tenantId, customer, plan: plan ? planOut(plan) : null };
}

export async function getTenantBilling(db: Db, tenantId: string): Promise<TenantBilling> {
  return db.asService((tx) => billingOf(tx, tenantId), { readOnly: true });
}

/** Gives `tenantId` a plan and its legal details (the next invoice uses them; issued ones keep theirs). */
export async function setTenantBilling(
  db: Db,
  tenantId: string,
  input: Omit<Customer, "tenant_id">,
): Promise<TenantBilling> {
  return db.asService(async (tx) => {
    const plan = await tx.query("select 1 from internal.billing_plans where id = $1", [input.plan_id]);
    if (plan.rows.length === 0) fail(404, "not_found", `no plan ${input.plan_id}`, "plan_id");
    await tx.query(
      `insert into internal.tenant_billing (tenant_id, plan_id, legal_name, address, country, vat_id, email)
       values ($1, $2, $3, $4, $5, $6, $7)
       on conflict (tenant_id) do update set plan_id = excluded.plan_id, legal_name = excluded.legal_name,
         address = excluded.address, country = excluded.country, vat_id = excluded.vat_id,
         email = excluded.email, updated_at = now()`,
      [tenantId, input.plan_id, input.legal_name, input.address, input.country, input.vat_id, input.email],
    );
    return billingOf(tx, tenantId);
  });
}

// ---------------------------------------------------------------------------------------------
// Computing and issuing
// ---------------------------------------------------------------------------------------------

const GB = 1_000_000_000n;
const ceilDiv = (a: bigint, b: bigint): bigint => (a + b - 1n) / b;
const over = (used: bigint, included: bigint): bigint => (used > included ? used - included : 0n);

/** `amount × percent / 100`, exactly. */
function percentOf(amount: string, percent: string): string {
  const p = parseDecimal(mul(amount, percent));
  return toDecimal(p.units, p.scale + 2);
}

export interface InvoiceFigures {
  lines: InvoiceLine[];
  subtotal: string;
  tax_rate: string;
  tax: string;
  total: string;
  tax_rule: TaxRule;
  tax_note: string;
}

/** The lines and totals of a month's invoice (the rounding rule: see the module comment). */
export function computeInvoice(
  plan: Plan,
  usage: Usage,
  issuer: Parameters<typeof decideTax>[0],
  customer: Parameters<typeof decideTax>[1],
  monthLabel: string,
): InvoiceFigures {
  const places = minorUnits(plan.currency);
  const money = (v: string) => format(roundHalfUp(v, places), places);
  const lines: InvoiceLine[] = [
    {
      description: `Plan ${plan.name}, ${monthLabel}`,
      currency: plan.currency,
      quantity: "1",
      unit: "month",
      unit_price: plan.monthly_fee,
      amount: money(plan.monthly_fee),
    },
  ];
  const extra = (description: string, quantity: bigint, unit: string, price: string) => {
    if (quantity <= 0n || compare(price, "0") === 0) return;
    lines.push({
      description,
      currency: plan.currency,
      quantity: quantity.toString(),
      unit,
      unit_price: price,
      amount: money(mul(quantity.toString(), price)),
    });
  };
  const storageGb = ceilDiv(BigInt(usage.storage_bytes), GB);
  const extraCalls = over(BigInt(usage.api_calls), BigInt(plan.included_api_calls));
  extra(
    `Accounts beyond the ${plan.included_accounts} included`,
    over(BigInt(usage.accounts), BigInt(plan.included_accounts)),
    "account",
    plan.price_per_account,
  );
  extra(
    `Releases delivered beyond the ${plan.included_releases} included`,
    over(BigInt(usage.releases_delivered), BigInt(plan.included_releases)),
    "release",
    plan.price_per_release,
  );
  extra(
    `Tracks beyond the ${plan.included_tracks} included`,
    over(BigInt(usage.tracks), BigInt(plan.included_tracks)),
    "track",
    plan.price_per_track,
  );
  extra(
    `Storage beyond the ${plan.included_storage_gb} GB included (started GB)`,
    over(storageGb, BigInt(plan.included_storage_gb)),
    "GB",
    plan.price_per_storage_gb,
  );
  extra(
    `API calls beyond the ${plan.included_api_calls} included (started thousands)`,
    ceilDiv(extraCalls, 1000n),
    "1000 calls",
    plan.price_per_1000_api_calls,
  );
  const subtotal = format(sum(lines.map((l) => l.amount)), places);
  const decision = decideTax(issuer, customer);
  const tax = money(percentOf(subtotal, decision.rate));
  return {
    lines,
    subtotal,
    tax_rate: format(decision.rate, 2),
    tax,
    total: format(add(subtotal, tax), places),
    tax_rule: decision.rule,
    tax_note: decision.note,
  };
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
export const monthLabel = (month: string): string =>
  `${MONTHS[Number(month.slice(5, 7)) - 1]} ${month.slice(0, 4)}`;

/** What a month's invoice would say, without issuing it (nothing is written). */
export async function previewInvoice(db: Db, tenantId: string, month: string) {
  monthBounds(month);
  return db.asService(
    async (tx) => {
      const { customer, plan, issuer } = await prerequisites(tx, tenantId);
      const usage = await usageOf(tx, tenantId, month);
      return {
        tenant_id: tenantId,
        month,
        currency: plan.currency,
        usage,
        ...computeInvoice(plan, usage, issuer, customer, monthLabel(month)),
      };
    },
    { readOnly: true },
  );
}

async function prerequisites(tx: Tx, tenantId: string) {
  const issuer = await issuerOf(tx);
  if (!issuer)
    return fail(
      409,
      "issuer_missing",
      "The installation's legal details are not set: PUT /admin/v1/billing/issuer or backline invoices issuer.",
    );
  const { customer, plan } = await billingOf(tx, tenantId);
  if (!customer || !plan)
    return fail(
      409,
      "no_plan",
      "This tenant has no plan: PUT /admin/v1/billing/tenant or backline invoices assign.",
    );
  return { issuer, customer, plan };
}

const INVOICE_COLUMNS = `i.id::text as id, i.tenant_id::text as tenant_id, i.number, to_char(i.month, 'YYYY-MM') as month,
  to_char(i.issued_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as issued_at,
  to_char(i.due_on, 'YYYY-MM-DD') as due_on, i.currency::text as currency, i.subtotal::text as subtotal,
  i.tax_rate::text as tax_rate, i.tax::text as tax, i.total::text as total, i.tax_rule, i.tax_note,
  i.issuer, i.customer, i.plan, i.usage, i.lines,
  coalesce(p.paid, 0)::numeric(14, 2)::text as paid,
  coalesce(c.credited, 0)::numeric(14, 2)::text as credited,
  (i.total - coalesce(p.paid, 0) - coalesce(c.credited, 0))::numeric(14, 2)::text as balance,
  case when i.total - coalesce(p.paid, 0) - coalesce(c.credited, 0) <= 0 then 'paid'
       when i.due_on < (now() at time zone 'UTC')::date then 'overdue' else 'open' end as status`;
const INVOICE_FROM = `internal.invoices i
  left join lateral (select sum(case when w.status = 'refunded' then -w.amount else w.amount end) as paid
    from internal.whitelabel_payments w where w.invoice_id = i.id and w.status in ('paid', 'refunded')) p on true
  left join lateral (select sum(n.total) as credited from internal.credit_notes n where n.invoice_id = i.id) c on true`;

/**
 * Issues `tenantId`'s invoice for `month` (a month that is over): meters the month, computes the
 * lines and tax, and takes the next number from the counter row, locked until the transaction
 * ends, so numbers are sequential and a failed issue hands its number back (no gaps). A month
 * already invoiced is 409 invoice_exists.
 */
export async function issueInvoice(
  db: Db,
  tenantId: string,
  month: string,
  options: { by?: string; now?: Date } = {},
): Promise<Invoice> {
  const { start, end } = monthBounds(month);
  const now = options.now ?? new Date();
  if (new Date(`${end}T00:00:00Z`).getTime() > now.getTime())
    fail(409, "month_not_over", `${month} is not over yet: a month is invoiced once it has ended.`, "month");
  const id = await db.asService(async (tx) => {
    const { issuer, customer, plan } = await prerequisites(tx, tenantId);
    // The counter row first: concurrent issues queue here, and see each other's invoices after it.
    const counter = await tx.query<{ n: string }>(
      "update internal.invoice_counters set last_number = last_number + 1 where series = 'invoice' returning last_number::text as n",
    );
    const seq = counter.rows[0]?.n ?? "1";
    const existing = await tx.query<{ number: string }>(
      "select number from internal.invoices where tenant_id = $1 and month = $2::date",
      [tenantId, start],
    );
    if (existing.rows[0])
      fail(409, "invoice_exists", `${month} is already invoiced: ${existing.rows[0].number}.`, "month");
    const usage = await usageOf(tx, tenantId, month);
    const figures = computeInvoice(plan, usage, issuer, customer, monthLabel(month));
    const number = `${issuer.invoice_prefix}${seq.padStart(6, "0")}`;
    const { plan_id: _plan, ...customerOut } = customer;
    const row = await tx.query<{ id: string }>(
      `insert into internal.invoices (tenant_id, seq, number, month, due_on, currency, subtotal, tax_rate, tax, total,
         tax_rule, tax_note, issuer, customer, plan, usage, lines, issued_by, issued_at)
       values ($1, $2::bigint, $3, $4::date, ($19::timestamptz at time zone 'UTC')::date + $5::int, $6, $7::numeric,
         $8::numeric, $9::numeric, $10::numeric, $11, $12, $13::jsonb, $14::jsonb, $15::jsonb, $16::jsonb, $17::jsonb, $18, $19::timestamptz)
       returning id::text as id`,
      [
        tenantId,
        seq,
        number,
        start,
        issuer.payment_terms_days,
        plan.currency,
        figures.subtotal,
        figures.tax_rate,
        figures.tax,
        figures.total,
        figures.tax_rule,
        figures.tax_note,
        JSON.stringify(issuer),
        JSON.stringify(customerOut),
        JSON.stringify(plan),
        JSON.stringify(usage),
        JSON.stringify(figures.lines),
        options.by ?? "system",
        now.toISOString(),
      ],
    );
    return row.rows[0]?.id as string;
  });
  return (await getInvoice(db, id)) as Invoice;
}

/**
 * Issues last month's invoice (or `month`'s) for every tenant with a plan that has none yet; a
 * tenant that fails is reported and the others go on. The worker's monthly job and
 * `backline invoices issue --all`.
 */
export async function issueDueInvoices(
  db: Db,
  month: string = previousMonth(),
  by = "system",
): Promise<{
  month: string;
  issued: string[];
  failed: { tenant_id: string; code: string; message: string }[];
}> {
  const { start } = monthBounds(month);
  const tenants = await db.asService(
    async (tx) =>
      (
        await tx.query<{ tenant_id: string }>(
          `select b.tenant_id::text as tenant_id from internal.tenant_billing b
            where not exists (select 1 from internal.invoices i where i.tenant_id = b.tenant_id and i.month = $1::date)
            order by b.tenant_id`,
          [start],
        )
      ).rows,
    { readOnly: true },
  );
  const issued: string[] = [];
  const failed: { tenant_id: string; code: string; message: string }[] = [];
  for (const { tenant_id } of tenants) {
    try {
      issued.push((await issueInvoice(db, tenant_id, month, { by })).number);
    } catch (error) {
      if (error instanceof HttpError && error.code === "invoice_exists") continue;
      failed.push({
        tenant_id,
        code: error instanceof HttpError ? error.code : "error",
        message: error instanceof Error ? error.message : String(error),
      });
    }
  }
  return { month, issued, failed };
}

export async function getInvoice(db: Db, id: string, tenantId?: string): Promise<Invoice | undefined> {
  return db.asService(
    async (tx) =>
      (
        await tx.query<Invoice>(
          `select ${INVOICE_COLUMNS} from ${INVOICE_FROM} where i.id = $1 and ($2::uuid is null or i.tenant_id = $2::uuid)`,
          [id, tenantId ?? null],
        )
      ).rows[0],
    { readOnly: true },
  );
}

export async function listInvoices(
  db: Db,
  filter: {
    tenantId?: string | undefined;
    status?: "open" | "overdue" | "paid" | undefined;
    month?: string | undefined;
  },
): Promise<Invoice[]> {
  return db.asService(
    async (tx) =>
      (
        await tx.query<Invoice>(
          `select * from (select ${INVOICE_COLUMNS} from ${INVOICE_FROM}
             where ($1::uuid is null or i.tenant_id = $1::uuid) and ($3::date is null or i.month = $3::date)) x
           where ($2::text is null or x.status = $2::text or ($2::text = 'open' and x.status = 'overdue'))
           order by x.number desc`,
          [
            filter.tenantId ?? null,
            filter.status ?? null,
            filter.month ? monthBounds(filter.month).start : null,
          ],
        )
      ).rows,
    { readOnly: true },
  );
}

// ---------------------------------------------------------------------------------------------
// Payments
// ---------------------------------------------------------------------------------------------

const PAYMENT_COLUMNS = `w.id::text as id, w.invoice_id::text as invoice_id, i.number as invoice_number,
  w.tenant_id::text as tenant_id, w.amount::text as amount, w.currency::text as currency,
  to_char(w.paid_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as paid_at, w.method, w.external_ref,
  w.note, w.recorded_by`;

async function insertPayment(
  tx: Tx,
  invoice: {
    id: string;
    tenant_id: string;
    month: string;
    currency: string;
    balance: string;
    number: string;
  },
  input: {
    amount: string;
    paid_at?: string | undefined;
    external_ref?: string | null | undefined;
    note?: string | null | undefined;
    method: Payment["method"];
    by: string;
  },
): Promise<string | undefined> {
  if (compare(input.amount, invoice.balance) > 0)
    fail(
      422,
      "amount_exceeds_balance",
      `${input.amount} ${invoice.currency} is more than the ${invoice.balance} still due on ${invoice.number}.`,
      "amount",
    );
  const { start, end } = monthBounds(invoice.month);
  const row = await tx.query<{ id: string }>(
    `insert into internal.whitelabel_payments (tenant_id, invoice_id, period_start, period_end, amount, currency, status,
       external_ref, paid_at, method, note, recorded_by)
     values ($1, $2, $3::date, $4::date - 1, $5::numeric, $6, 'paid', $7, coalesce($8::timestamptz, now()), $9, $10, $11)
     on conflict (tenant_id, method, external_ref) where external_ref is not null do nothing
     returning id::text as id`,
    [
      invoice.tenant_id,
      invoice.id,
      start,
      end,
      input.amount,
      invoice.currency,
      input.external_ref ?? null,
      input.paid_at ?? null,
      input.method,
      input.note ?? null,
      input.by,
    ],
  );
  return row.rows[0]?.id;
}

async function lockedInvoice(tx: Tx, id: string, tenantId?: string) {
  // Payments to one invoice are recorded one at a time, so the balance checked stays true.
  await tx.query("select pg_advisory_xact_lock(hashtext('invoice-payment:' || $1::text))", [id]);
  return (
    await tx.query<{
      id: string;
      tenant_id: string;
      month: string;
      currency: string;
      balance: string;
      number: string;
    }>(
      `select i.id::text as id, i.tenant_id::text as tenant_id, to_char(i.month, 'YYYY-MM') as month,
         i.currency::text as currency, i.number,
         (i.total - coalesce((select sum(case when w.status = 'refunded' then -w.amount else w.amount end)
            from internal.whitelabel_payments w where w.invoice_id = i.id and w.status in ('paid', 'refunded')), 0)
          - coalesce((select sum(n.total) from internal.credit_notes n where n.invoice_id = i.id), 0))::text as balance
       from internal.invoices i where i.id = $1 and ($2::uuid is null or i.tenant_id = $2::uuid)`,
      [id, tenantId ?? null],
    )
  ).rows[0];
}

/** Records a payment received for invoice `id` (in the invoice's currency, at most what is still due). */
export async function recordPayment(
  db: Db,
  id: string,
  input: {
    amount: string;
    currency?: string | undefined;
    paid_at?: string | undefined;
    external_ref?: string | undefined;
    note?: string | undefined;
    by: string;
  },
): Promise<Payment> {
  const paymentId = await db.asService(async (tx) => {
    const invoice = await lockedInvoice(tx, id);
    if (!invoice) return fail(404, "not_found", `no invoice ${id}`, "id");
    if (input.currency && input.currency !== invoice.currency)
      fail(
        422,
        "currency_mismatch",
        `${invoice.number} is in ${invoice.currency}, not ${input.currency}.`,
        "currency",
      );
    const created = await insertPayment(tx, invoice, { ...input, method: "manual" });
    if (!created)
      fail(
        409,
        "payment_exists",
        `A payment with external_ref ${input.external_ref} is already recorded.`,
        "external_ref",
      );
    return created as string;
  });
  return (await listPayments(db, { paymentId }))[0] as Payment;
}

export async function listPayments(
  db: Db,
  filter: { tenantId?: string | undefined; invoiceId?: string | undefined; paymentId?: string | undefined },
): Promise<Payment[]> {
  return db.asService(
    async (tx) =>
      (
        await tx.query<Payment>(
          `select ${PAYMENT_COLUMNS} from internal.whitelabel_payments w join internal.invoices i on i.id = w.invoice_id
            where ($1::uuid is null or w.tenant_id = $1::uuid) and ($2::uuid is null or w.invoice_id = $2::uuid)
              and ($3::uuid is null or w.id = $3::uuid)
            order by w.paid_at desc, w.id`,
          [filter.tenantId ?? null, filter.invoiceId ?? null, filter.paymentId ?? null],
        )
      ).rows,
    { readOnly: true },
  );
}

/** RFC 4180 records (quoted fields, doubled quotes, CRLF or LF). */
export function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = "";
  let quoted = false;
  const s = text.replace(/^\uFEFF/, "");
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (quoted) {
      if (c === '"' && s[i + 1] === '"') {
        field += '"';
        i++;
      } else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ",") {
      row.push(field);
      field = "";
    } else if (c === "\n" || c === "\r") {
      if (c === "\r" && s[i + 1] === "\n") i++;
      row.push(field);
      rows.push(row);
      row = [];
      field = "";
    } else field += c;
  }
  if (field !== "" || row.length > 0) {
    row.push(field);
    rows.push(row);
  }
  return rows.filter((r) => !(r.length === 1 && r[0] === ""));
}

export interface PaymentImport {
  imported: Payment[];
  /** Rows already imported (the same charge id). */
  duplicates: number;
  /** Rows not recorded, with why (row numbers count the header as 1). */
  skipped: { row: number; reason: string }[];
}

/**
 * Imports Stripe's charges export (Dashboard → Payments → Export, CSV): each charge with Status
 * "Paid" (or "succeeded") whose description or an `invoice_number (metadata)` column names one of
 * our invoice numbers is recorded against it, net of any amount refunded, with the charge's id as
 * its external_ref (so importing the same file twice records nothing new).
 */
export async function importStripeCharges(db: Db, csv: string, by: string): Promise<PaymentImport> {
  const rows = parseCsv(csv);
  const header = (rows[0] ?? []).map((h) => h.trim().toLowerCase());
  const col = (...names: string[]) => names.map((n) => header.indexOf(n)).find((i) => i >= 0) ?? -1;
  const idCol = col("id");
  const amountCol = col("amount");
  const currencyCol = col("currency");
  const statusCol = col("status");
  const refundedCol = col("amount refunded");
  const createdCol = col("created date (utc)", "created (utc)", "created");
  const descCol = col("description");
  const metaCol = col("invoice_number (metadata)");
  if (idCol < 0 || amountCol < 0 || currencyCol < 0)
    fail(
      422,
      "invalid_export",
      "Not a Stripe charges export: it needs the columns id, Amount and Currency.",
      "csv",
    );
  const imported: string[] = [];
  const skipped: { row: number; reason: string }[] = [];
  let duplicates = 0;
  await db.asService(async (tx) => {
    const numbers = new Map(
      (
        await tx.query<{ id: string; number: string }>("select id::text as id, number from internal.invoices")
      ).rows.map((r) => [r.number, r.id]),
    );
    for (let r = 1; r < rows.length; r++) {
      const fields = rows[r] ?? [];
      const at = r + 1;
      const status = statusCol >= 0 ? (fields[statusCol] ?? "").trim().toLowerCase() : "paid";
      if (status !== "paid" && status !== "succeeded") {
        skipped.push({ row: at, reason: `status ${status || "(empty)"}` });
        continue;
      }
      const text = [fields[metaCol] ?? "", fields[descCol] ?? ""].join(" ");
      const named = [...numbers.keys()].find((n) =>
        new RegExp(`(^|[^A-Za-z0-9])${n.replace(/[^A-Za-z0-9]/g, "\\$&")}($|[^0-9])`).test(text),
      );
      if (!named) {
        skipped.push({ row: at, reason: "names no invoice number" });
        continue;
      }
      const clean = (v: string | undefined) => (v ?? "").trim().replace(/,/g, "");
      const amount = clean(fields[amountCol]);
      const refunded = refundedCol >= 0 ? clean(fields[refundedCol]) || "0" : "0";
      if (!/^\d{1,12}(\.\d{1,2})?$/.test(amount) || !/^\d{1,12}(\.\d{1,2})?$/.test(refunded)) {
        skipped.push({ row: at, reason: `amount ${amount} is not a decimal` });
        continue;
      }
      const net = sub(amount, refunded);
      if (compare(net, "0") <= 0) {
        skipped.push({ row: at, reason: "refunded in full" });
        continue;
      }
      const invoice = await lockedInvoice(tx, numbers.get(named) as string);
      if (!invoice) continue;
      if ((fields[currencyCol] ?? "").trim().toUpperCase() !== invoice.currency) {
        skipped.push({
          row: at,
          reason: `currency ${fields[currencyCol]} is not ${invoice.currency} of ${named}`,
        });
        continue;
      }
      const paidAt = createdCol >= 0 ? (fields[createdCol] ?? "").trim() : "";
      const ref = (fields[idCol] ?? "").trim();
      const dup = await tx.query(
        "select 1 from internal.whitelabel_payments where tenant_id = $1 and method = 'stripe_charges_csv' and external_ref = $2",
        [invoice.tenant_id, ref],
      );
      if (dup.rows.length > 0) {
        duplicates++;
        continue;
      }
      if (compare(net, invoice.balance) > 0) {
        skipped.push({ row: at, reason: `${net} is more than the ${invoice.balance} still due on ${named}` });
        continue;
      }
      const id = await insertPayment(tx, invoice, {
        amount: net,
        paid_at: /^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2})?$/.test(paidAt)
          ? `${paidAt.replace(" ", "T")}Z`
          : undefined,
        external_ref: ref || null,
        note: `Stripe charge ${ref}`,
        method: "stripe_charges_csv",
        by,
      });
      if (id) imported.push(id);
      else duplicates++;
    }
  });
  const all = imported.length > 0 ? await listPayments(db, {}) : [];
  return { imported: all.filter((p) => imported.includes(p.id)), duplicates, skipped };
}

// ---------------------------------------------------------------------------------------------
// Credit notes
// ---------------------------------------------------------------------------------------------

export interface CreditNote {
  id: string;
  tenant_id: string;
  invoice_id: string;
  invoice_number: string;
  number: string;
  issued_at: string;
  currency: string;
  subtotal: string;
  tax_rate: string;
  tax: string;
  total: string;
  reason: string;
  issued_by: string;
}

const CREDIT_COLUMNS = `n.id::text as id, n.tenant_id::text as tenant_id, n.invoice_id::text as invoice_id,
  i.number as invoice_number, n.number,
  to_char(n.issued_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as issued_at, n.currency::text as currency,
  n.subtotal::text as subtotal, n.tax_rate::text as tax_rate, n.tax::text as tax, n.total::text as total, n.reason,
  n.issued_by`;

/**
 * A correction of issued invoice `id`: credits `amount` (net, before tax) at the invoice's tax
 * rate, the tax rounded half away from zero to the cent. The credit note is numbered in its own
 * gapless series (the issuer's prefix with CN, CN-000001 for INV-), never changes, and lowers what
 * is due on the invoice. What is credited in all may not pass the invoice's subtotal (422
 * credit_exceeds_invoice).
 */
export async function issueCreditNote(
  db: Db,
  id: string,
  input: { amount: string; reason: string; by: string },
): Promise<CreditNote> {
  const noteId = await db.asService(async (tx) => {
    const invoice = await lockedInvoice(tx, id);
    if (!invoice) return fail(404, "not_found", `no invoice ${id}`, "id");
    const full = (
      await tx.query<{ subtotal: string; tax_rate: string; credited: string }>(
        `select i.subtotal::text as subtotal, i.tax_rate::text as tax_rate,
           coalesce((select sum(n.subtotal) from internal.credit_notes n where n.invoice_id = i.id), 0)::text as credited
         from internal.invoices i where i.id = $1`,
        [id],
      )
    ).rows[0] as { subtotal: string; tax_rate: string; credited: string };
    const left = sub(full.subtotal, full.credited);
    if (compare(input.amount, left) > 0)
      fail(
        422,
        "credit_exceeds_invoice",
        `${input.amount} ${invoice.currency} is more than the ${format(left, 2)} of ${invoice.number} not yet credited.`,
        "amount",
      );
    const places = minorUnits(invoice.currency);
    const subtotal = format(input.amount, places);
    const tax = format(roundHalfUp(percentOf(subtotal, full.tax_rate), places), places);
    const issuer = await issuerOf(tx);
    const counter = await tx.query<{ n: string }>(
      "update internal.invoice_counters set last_number = last_number + 1 where series = 'credit_note' returning last_number::text as n",
    );
    const prefix = (issuer?.invoice_prefix ?? "INV-").replace(/^[A-Za-z]*/, "CN");
    const number = `${prefix === "CN" ? "CN-" : prefix}${(counter.rows[0]?.n ?? "1").padStart(6, "0")}`;
    const row = await tx.query<{ id: string }>(
      `insert into internal.credit_notes (tenant_id, invoice_id, seq, number, currency, subtotal, tax_rate, tax, total, reason, issued_by)
       values ($1, $2, $3::bigint, $4, $5, $6::numeric, $7::numeric, $8::numeric, $6::numeric + $8::numeric, $9, $10)
       returning id::text as id`,
      [
        invoice.tenant_id,
        id,
        counter.rows[0]?.n ?? "1",
        number,
        invoice.currency,
        subtotal,
        full.tax_rate,
        tax,
        input.reason,
        input.by,
      ],
    );
    return row.rows[0]?.id as string;
  });
  return (await listCreditNotes(db, { id: noteId }))[0] as CreditNote;
}

export async function listCreditNotes(
  db: Db,
  filter: { invoiceId?: string | undefined; id?: string | undefined },
): Promise<CreditNote[]> {
  return db.asService(
    async (tx) =>
      (
        await tx.query<CreditNote>(
          `select ${CREDIT_COLUMNS} from internal.credit_notes n join internal.invoices i on i.id = n.invoice_id
            where ($1::uuid is null or n.invoice_id = $1::uuid) and ($2::uuid is null or n.id = $2::uuid)
            order by n.seq`,
          [filter.invoiceId ?? null, filter.id ?? null],
        )
      ).rows,
    { readOnly: true },
  );
}
