import { z } from "zod";
import { type AnyAdminRoute, adminRoute, IdParams, Uuid } from "../admin/spec.ts";
import type { Db } from "../db/db.ts";
import { Count, Currency, Money } from "../http/formats.ts";
import { HttpError } from "../http/problem.ts";
import { MoneyError } from "./errors.ts";
import {
  addRecoupable,
  addSplitVersion,
  ledgerTrialBalance,
  listFees,
  listPeriods,
  listRecoupables,
  moneySettings,
  setExchangeRate,
  setFee,
  updateMoneySettings,
} from "./operator.ts";
import { erasePayee, listPayees, reviewTaxForm } from "./payees.ts";
import { approveBatch, exportBatch, findBatch, listBatches, listPayouts, settleBatch } from "./payouts.ts";
import { PAYOUT_PROVIDERS } from "./providers.ts";
import { fileHeaders, statementFile } from "./render.ts";
import type { StatementMail } from "./statement-mail.ts";
import { approvePeriod, listStatements } from "./statements.ts";

/**
 * The operator's side of the money model under /admin/v1 (docs/payouts.md; docs/operator.md, "The
 * admin API"): settings, fees, rates, advances and expenses, periods and their approval, payees'
 * tax forms, payout batches (approve, export for the provider, settle) and the ledger's trial
 * balance. The same services the CLI's `backline money` commands call.
 */

const TAG = "Money";
const Month = z
  .string()
  .regex(/^\d{4}-(0[1-9]|1[0-2])$/, "a month, YYYY-MM")
  .meta({ description: "A month, YYYY-MM.", example: "2026-11" });
const Percent = z
  .string()
  .regex(/^\d{1,3}(\.\d{1,4})?$/, "a percentage as a decimal string, up to four decimals")
  .refine((v) => Number(v) <= 100, "at most 100")
  .meta({ description: "Percent, a decimal string with up to four decimals (0 to 100).", example: "15" });
const Amount = Money.refine((v) => !v.startsWith("-") && /[1-9]/.test(v), "more than 0")
  .refine((v) => /^\d{1,15}(\.\d{1,3})?$/.test(v), "at most 15 digits before the point and three after it")
  .meta({
    description:
      "A positive amount, a decimal string with at most the currency's decimals (2 for most, 0 for JPY, 3 for KWD; `422 amount_precision` past them).",
    example: "500.00",
  });
const Loose = (id: string, description: string) => z.looseObject({}).meta({ id, description });

/** A refusal of the money services, as the admin API answers it. */
export async function moneyCall<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    if (error instanceof MoneyError)
      throw new HttpError(error.status, error.code, error.message, error.param);
    throw error;
  }
}

export function moneySpecs(options: { db: Db; mail?: StatementMail | undefined }): AnyAdminRoute[] {
  const { db, mail } = options;
  const by = (tenantId: string) => `admin_api:${tenantId}`;
  return [
    adminRoute({
      method: "GET",
      path: "/money/settings",
      operationId: "getMoneySettings",
      summary: "The tenant's money settings",
      tag: TAG,
      staffRole: "operator",
      response: {
        status: 200,
        description: "The settings.",
        schema: Loose("MoneySettings", "Money settings."),
      },
      handler: ({ tenantId }) => moneySettings(db, tenantId),
    }),
    adminRoute({
      method: "PATCH",
      path: "/money/settings",
      operationId: "updateMoneySettings",
      summary: "Change the default statement currency, the payout threshold or the second-factor rule",
      tag: TAG,
      staffRole: "admin",
      body: z.strictObject({
        default_currency: Currency.optional(),
        payout_threshold: z
          .string()
          .regex(/^\d{1,15}(\.\d{1,2})?$/, "an amount as a decimal string")
          .optional()
          .meta({ description: "The least a payee can ask to be paid, in their currency." }),
        payout_requires_aal2: z.boolean().optional(),
      }),
      response: {
        status: 200,
        description: "The settings.",
        schema: Loose("MoneySettings", "Money settings."),
      },
      handler: ({ tenantId, body }) => updateMoneySettings(db, tenantId, body),
    }),
    adminRoute({
      method: "GET",
      path: "/money/fees",
      operationId: "listDistributionFees",
      summary: "The distributor's fees: the tenant's, and each account's or release's",
      tag: TAG,
      staffRole: "operator",
      response: {
        status: 200,
        description: "The fees.",
        schema: z.object({ data: z.array(Loose("DistributionFee", "A fee.")) }),
      },
      handler: async ({ tenantId }) => ({ data: await listFees(db, tenantId) }),
    }),
    adminRoute({
      method: "POST",
      path: "/money/fees",
      operationId: "setDistributionFee",
      summary: "Set (or with rate null remove) the fee of the tenant, an account or a release",
      description: "Applies to imports allocated from now on; money already allocated keeps its fee.",
      tag: TAG,
      staffRole: "admin",
      body: z.strictObject({
        account_id: Uuid.optional(),
        release_id: Uuid.optional(),
        rate: Percent.nullable(),
      }),
      response: {
        status: 200,
        description: "The fees.",
        schema: z.object({ data: z.array(Loose("DistributionFee", "A fee.")) }),
      },
      errors: [404],
      handler: async ({ tenantId, body }) => {
        if (body.release_id && !body.account_id)
          throw new HttpError(
            400,
            "invalid_request",
            "a release's fee names its account_id too",
            "account_id",
          );
        await moneyCall(() =>
          setFee(db, tenantId, { accountId: body.account_id, releaseId: body.release_id }, body.rate),
        );
        return { data: await listFees(db, tenantId) };
      },
    }),
    adminRoute({
      method: "POST",
      path: "/money/exchange-rates",
      operationId: "setExchangeRate",
      summary: "Set the rate converting one currency into another for a period (or one import)",
      tag: TAG,
      staffRole: "operator",
      body: z.strictObject({
        period: Month,
        from: Currency,
        to: Currency,
        rate: z
          .string()
          .regex(/^\d{1,12}(\.\d{1,12})?$/, "a rate as a decimal string, up to 12 decimals")
          .refine((v) => Number(v) > 0, "more than 0"),
        import_id: Uuid.optional(),
      }),
      response: { status: 200, description: "Set.", schema: z.object({ ok: z.literal(true) }) },
      errors: [409],
      handler: async ({ tenantId, body }) => {
        if (body.from === body.to)
          throw new HttpError(400, "invalid_request", "from and to are the same currency", "to");
        await moneyCall(() => setExchangeRate(db, tenantId, body));
        return { ok: true as const };
      },
    }),
    adminRoute({
      method: "GET",
      path: "/money/recoupables",
      operationId: "listRecoupables",
      summary: "Advances and expenses, with what is still unrecouped",
      tag: TAG,
      staffRole: "operator",
      query: z.strictObject({ account_id: Uuid.optional() }),
      response: {
        status: 200,
        description: "The recoupables.",
        schema: z.object({ data: z.array(Loose("Recoupable", "An advance or expense.")) }),
      },
      handler: async ({ tenantId, query }) => ({
        data: await listRecoupables(db, tenantId, query.account_id),
      }),
    }),
    adminRoute({
      method: "POST",
      path: "/money/recoupables",
      operationId: "addRecoupable",
      summary: "Record an advance or expense against an account or one of its releases",
      tag: TAG,
      staffRole: "operator",
      body: z.strictObject({
        account_id: Uuid,
        release_id: Uuid.optional(),
        kind: z.enum(["advance", "expense"]),
        currency: Currency,
        amount: Amount,
        description: z.string().trim().min(1).max(500),
        cross_recoup: z.boolean().optional(),
      }),
      response: {
        status: 201,
        description: "Recorded.",
        schema: Loose("Recoupable", "An advance or expense."),
      },
      errors: [404],
      handler: ({ tenantId, body }) => moneyCall(() => addRecoupable(db, tenantId, body, by(tenantId))),
    }),
    adminRoute({
      method: "POST",
      path: "/money/split-versions",
      operationId: "addSplitVersion",
      summary: "Add a dated split version of a track, optionally for one store or territory",
      description:
        "Applies to money by the usage period it was earned in, from effective_from on; money already allocated keeps its version.",
      tag: TAG,
      staffRole: "operator",
      body: z.strictObject({
        track_id: Uuid,
        effective_from: Month,
        store: z
          .string()
          .regex(/^[a-z0-9]+(_[a-z0-9]+)*$/, "a store code")
          .optional(),
        territory: z
          .string()
          .regex(/^[A-Z]{2}$/, "an ISO 3166-1 alpha-2 code")
          .optional(),
        splits: z
          .array(
            z.strictObject({
              name: z.string().trim().min(1).max(300),
              email: z.email().optional(),
              share: z.union([z.number(), z.string()]),
            }),
          )
          .min(1)
          .max(50),
      }),
      response: { status: 201, description: "The version's id.", schema: z.object({ id: z.string() }) },
      errors: [404, 422],
      handler: ({ tenantId, body }) => moneyCall(() => addSplitVersion(db, tenantId, body)),
    }),
    adminRoute({
      method: "GET",
      path: "/money/periods",
      operationId: "listMoneyPeriods",
      summary: "Accounting periods: open or approved, with their payees, statements and totals per currency",
      tag: TAG,
      staffRole: "operator",
      response: {
        status: 200,
        description: "The periods.",
        schema: z.object({ data: z.array(Loose("MoneyPeriod", "A period.")) }),
      },
      handler: async ({ tenantId }) => {
        const periods = await listPeriods(db, tenantId);
        // Each period's money per currency, for the console's list: what the stores paid, the
        // distributor's fees, and what the payees earned (allocations and voids), exact.
        const totals = await db.asService(
          async (tx) =>
            (
              await tx.query<{
                period: string;
                currency: string;
                received: string;
                fees: string;
                payees: string;
              }>(
                `select to_char(period, 'YYYY-MM') as period, currency,
                   trim_scale(coalesce(-sum(amount) filter (where holder = 'store'), 0))::text as received,
                   trim_scale(coalesce(sum(amount) filter (where holder = 'fees'), 0))::text as fees,
                   trim_scale(coalesce(sum(amount) filter (where holder = 'payee' and txn_kind in ('allocation', 'void')), 0))::text
                     as payees
                 from internal.ledger_entries where tenant_id = $1 group by period, currency order by period, currency`,
                [tenantId],
              )
            ).rows,
        );
        return {
          data: periods.map((p) => ({
            ...p,
            totals: totals
              .filter((t) => t.period === p.period)
              .map(({ currency, received, fees, payees }) => ({ currency, received, fees, payees })),
          })),
        };
      },
    }),
    adminRoute({
      method: "POST",
      path: "/money/periods/{period}/approve",
      operationId: "approveMoneyPeriod",
      summary: "Approve a period's statements: written once, never changed, sent to the payees",
      tag: TAG,
      staffRole: "admin",
      params: z.object({ period: Month }),
      bodyOptional: true,
      body: z.strictObject({}),
      response: {
        status: 200,
        description: "The statements written.",
        schema: Loose("PeriodApproval", "The approval."),
      },
      errors: [409, 422],
      handler: ({ tenantId, params }) =>
        moneyCall(() => approvePeriod(db, tenantId, params.period, by(tenantId), mail)),
    }),
    adminRoute({
      method: "GET",
      path: "/money/statements",
      operationId: "listStatementsAdmin",
      summary: "Approved statements of a period or an account",
      tag: TAG,
      staffRole: "operator",
      query: z.strictObject({ period: Month.optional(), account_id: Uuid.optional() }),
      response: {
        status: 200,
        description: "The statements.",
        schema: z.object({ data: z.array(Loose("StatementSummary", "A statement.")) }),
      },
      handler: async ({ tenantId, query }) => ({
        data: await db.asService((tx) =>
          listStatements(tx, { tenantId, period: query.period, accountId: query.account_id }),
        ),
      }),
    }),
    adminRoute({
      method: "GET",
      path: "/money/statements/{id}",
      operationId: "getStatementAdmin",
      summary: "One approved statement: JSON, or ?format=csv or pdf",
      tag: TAG,
      staffRole: "operator",
      params: IdParams,
      query: z.strictObject({
        format: z
          .enum(["json", "csv", "pdf"])
          .default("json")
          .describe("The statement as JSON, as CSV or as a PDF document."),
      }),
      response: {
        status: 200,
        description: "The statement.",
        schema: Loose("Statement", "A statement."),
        exports: ["text/csv", "application/pdf"],
      },
      errors: [404],
      handler: async ({ tenantId, params, query, reply }) => {
        const doc = await db.asService(
          async (tx) =>
            (
              await tx.query<{ document: unknown }>(
                "select document from internal.statements where id = $1 and tenant_id = $2",
                [params.id, tenantId],
              )
            ).rows[0]?.document,
        );
        if (!doc) throw new HttpError(404, "not_found", `no statement ${params.id}`, "id");
        if (query.format === "json") return doc;
        const file = await statementFile(db, tenantId, doc as never, query.format);
        return reply.headers(fileHeaders(file)).status(200).send(file.body);
      },
    }),
    adminRoute({
      method: "GET",
      path: "/money/payees",
      operationId: "listPayeesAdmin",
      summary: "Payees, with their tax form's status",
      tag: TAG,
      staffRole: "operator",
      query: z.strictObject({ account_id: Uuid.optional() }),
      response: {
        status: 200,
        description: "The payees.",
        schema: z.object({ data: z.array(Loose("PayeeAdmin", "A payee.")) }),
      },
      handler: async ({ tenantId, query }) => ({
        data: await db.asService((tx) => listPayees(tx, { tenantId, accountId: query.account_id })),
      }),
    }),
    adminRoute({
      method: "POST",
      path: "/money/payees/{id}/tax-review",
      operationId: "reviewTaxForm",
      summary: "Verify or reject a payee's tax form, with the withholding rate that applies",
      tag: TAG,
      staffRole: "admin",
      params: IdParams,
      body: z.strictObject({
        status: z.enum(["verified", "rejected"]),
        withholding_rate: Percent.optional(),
      }),
      response: { status: 200, description: "The payee.", schema: Loose("PayeeAdmin", "A payee.") },
      errors: [404, 422],
      handler: ({ tenantId, params, body }) => moneyCall(() => reviewTaxForm(db, tenantId, params.id, body)),
    }),
    adminRoute({
      method: "POST",
      path: "/money/payees/{id}/erase",
      operationId: "erasePayee",
      summary: "Erase a payee's personal data; the ledger keeps the pseudonymous id",
      tag: TAG,
      staffRole: "admin",
      params: IdParams,
      bodyOptional: true,
      body: z.strictObject({}),
      response: { status: 200, description: "Erased.", schema: z.object({ erased: z.boolean() }) },
      errors: [404],
      handler: async ({ tenantId, params }) => {
        if (!(await erasePayee(db, tenantId, params.id)))
          throw new HttpError(404, "not_found", `no payee ${params.id}`, "id");
        return { erased: true };
      },
    }),
    adminRoute({
      method: "GET",
      path: "/money/payouts",
      operationId: "listPayoutsAdmin",
      summary: "Payout requests and payments, with the provider and the payee's name",
      tag: TAG,
      staffRole: "operator",
      query: z.strictObject({
        status: z
          .enum(["requested", "approved", "paid", "failed"])
          .optional()
          .describe("Only payouts in this state."),
        batch_id: Uuid.optional(),
      }),
      response: {
        status: 200,
        description: "The payouts.",
        schema: z.object({ data: z.array(Loose("Payout", "A payout.")) }),
      },
      handler: async ({ tenantId, query }) => {
        const payouts = await listPayouts(db, tenantId, { status: query.status, batchId: query.batch_id });
        // The provider each is paid through (the method recorded with the request) and whom it pays,
        // so a list can be grouped by provider and read by name.
        const extra = await db.asService(
          async (tx) =>
            (
              await tx.query<{
                id: string;
                provider: string | null;
                payee_name: string | null;
                payee_email: string | null;
              }>(
                `select o.id, o.method ->> 'provider' as provider, p.name as payee_name, p.email as payee_email
                 from internal.payouts o join internal.payees p on p.id = o.payee_id
                 where o.tenant_id = $1 and o.id = any ($2::uuid[])`,
                [tenantId, payouts.map((o) => o.id)],
              )
            ).rows,
        );
        const found = new Map(extra.map((e) => [e.id, e]));
        return {
          data: payouts.map((o) => {
            const e = found.get(o.id);
            return {
              ...o,
              provider: e?.provider ?? null,
              payee_name: e?.payee_name ?? null,
              payee_email: e?.payee_email ?? null,
            };
          }),
        };
      },
    }),
    adminRoute({
      method: "GET",
      path: "/money/payout-batches",
      operationId: "listPayoutBatches",
      summary: "Payout batches",
      tag: TAG,
      staffRole: "operator",
      response: {
        status: 200,
        description: "The batches.",
        schema: z.object({ data: z.array(Loose("PayoutBatch", "A batch.")) }),
      },
      handler: async ({ tenantId }) => ({ data: await listBatches(db, tenantId) }),
    }),
    adminRoute({
      method: "POST",
      path: "/money/payout-batches",
      operationId: "approvePayoutBatch",
      summary: "Approve the open payout requests of one provider (or those named) as a batch",
      tag: TAG,
      staffRole: "admin",
      body: z.strictObject({
        provider: z.enum(PAYOUT_PROVIDERS),
        currency: Currency.optional().meta({
          description:
            "The batch's currency (a provider's file has one); default: the oldest open request's.",
        }),
        payout_ids: z.array(Uuid).min(1).max(10000).optional(),
      }),
      response: { status: 201, description: "The batch.", schema: Loose("PayoutBatch", "A batch.") },
      errors: [404, 409, 422],
      handler: ({ tenantId, body }) =>
        moneyCall(() =>
          approveBatch(db, tenantId, body.provider, by(tenantId), body.payout_ids, body.currency),
        ),
    }),
    adminRoute({
      method: "GET",
      path: "/money/payout-batches/{id}",
      operationId: "getPayoutBatch",
      summary: "A payout batch",
      tag: TAG,
      staffRole: "operator",
      params: IdParams,
      response: { status: 200, description: "The batch.", schema: Loose("PayoutBatch", "A batch.") },
      errors: [404],
      handler: ({ tenantId, params }) => moneyCall(() => findBatch(db, tenantId, params.id)),
    }),
    adminRoute({
      method: "GET",
      path: "/money/payout-batches/{id}/export",
      operationId: "exportPayoutBatch",
      summary: "The batch as the provider's bulk-upload file (CSV)",
      description: "docs/payout-providers.md lists each column and where its value comes from.",
      tag: TAG,
      staffRole: "admin",
      params: IdParams,
      response: { status: 200, description: "The file.", schema: z.string(), exports: ["text/csv"] },
      errors: [404],
      handler: async ({ tenantId, params, reply }) => {
        const { file } = await moneyCall(() => exportBatch(db, tenantId, params.id));
        reply
          .header("content-type", file.contentType)
          .header("content-disposition", `attachment; filename="${file.fileName}"`)
          .header("backline-skipped-lines", String(file.skipped.length))
          // Which lines the file leaves out, and why (a Wise line without the bank details its currency needs).
          .header("backline-skipped", encodeURIComponent(JSON.stringify(file.skipped)));
        return reply.status(200).send(file.body);
      },
    }),
    adminRoute({
      method: "POST",
      path: "/money/payout-batches/{id}/settle",
      operationId: "settlePayoutBatch",
      summary: "Mark a batch paid, naming the lines that failed",
      tag: TAG,
      staffRole: "admin",
      params: IdParams,
      body: z.strictObject({
        failed: z
          .array(z.strictObject({ payout_id: Uuid, reason: z.string().trim().min(1).max(1000) }))
          .max(10000)
          .default([]),
        reference: z.string().max(200).optional(),
      }),
      response: { status: 200, description: "The batch.", schema: Loose("PayoutBatch", "A batch.") },
      errors: [404, 409, 422],
      handler: ({ tenantId, params, body }) =>
        moneyCall(() => settleBatch(db, tenantId, params.id, body.failed, body.reference)),
    }),
    adminRoute({
      method: "GET",
      path: "/money/ledger",
      operationId: "ledgerTrialBalance",
      summary: "The ledger's trial balance: per currency, zero in total, and each holder's balance",
      tag: TAG,
      staffRole: "operator",
      response: {
        status: 200,
        description: "The trial balance.",
        schema: z.object({
          data: z.array(
            z.object({
              currency: Currency,
              holder: z.string().nullable(),
              balance: Money,
              entries: Count,
            }),
          ),
        }),
      },
      handler: async ({ tenantId }) => ({ data: await ledgerTrialBalance(db, tenantId) }),
    }),
  ];
}
