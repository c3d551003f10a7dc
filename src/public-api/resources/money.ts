import { createHash } from "node:crypto";
import type { FastifyRequest } from "fastify";
import { z } from "zod";
import type { Tx } from "../../db/types.ts";
import { Currency, Money, Timestamp, timestamp } from "../../http/formats.ts";
import { MoneyError } from "../../money/errors.ts";
import { balances, fileTaxForm, findPayee, listPayees, setPayoutMethod } from "../../money/payees.ts";
import { type PayoutRow, requestPayout } from "../../money/payouts.ts";
import { PAYOUT_METHOD_SCHEMA } from "../../money/providers.ts";
import { fileHeaders, statementFile } from "../../money/render.ts";
import { listStatements, statementFor } from "../../money/statements.ts";
import type { StatementDocument } from "../../money/types.ts";
import { ApiError, notFound } from "../errors.ts";
import { notModified } from "../etag.ts";
import { type Context, Id, listOf, OffsetPagination, page, route } from "../route.ts";

/**
 * Money (docs/payouts.md): payees, balances, statements and payouts.
 *
 * For an account (payouts:read; a member needs the owner or admin role): its payees, their
 * balances, the approved statements and the payouts. For a person (/me, their own access token
 * and no Backline-Account): the payees they are, across every account that pays them — their
 * balances and statements, filing a tax form, saying where to be paid, and asking to be paid.
 * Asking is a person's act, never a key's (and at aal2 where the tenant requires it).
 */

const Month = z
  .string()
  .regex(/^\d{4}-(0[1-9]|1[0-2])$/, "a month, YYYY-MM")
  .meta({ description: "A month, YYYY-MM.", example: "2026-11" });

const Payee = z
  .object({
    id: Id,
    object: z.literal("payee"),
    account_id: Id.meta({ description: "The account that pays this payee." }),
    kind: z.enum(["account", "person"]).meta({
      description:
        "account: the account itself (shares without an e-mail, tracks without splits); person: named by e-mail in a split.",
    }),
    name: z.string().nullable(),
    email: z.string().nullable(),
    claimed: z.boolean().meta({
      description: "Whether a user has claimed it (signed in with its address and asked for a payout).",
    }),
    currency: Currency.meta({ description: "The currency of the payee's statements and payouts." }),
    tax: z.object({
      form: z.enum(["W-9", "W-8BEN", "W-8BEN-E"]).nullable(),
      status: z.enum(["missing", "pending", "verified", "rejected"]),
      country: z.string().nullable(),
      tax_id_last4: z
        .string()
        .nullable()
        .meta({ description: "The rest of the tax id is kept sealed, never shown." }),
      withholding_rate: z.string().meta({ description: "Percent withheld from payouts." }),
    }),
    payout_method: z.record(z.string(), z.unknown()).nullable(),
    created_at: Timestamp,
  })
  .meta({ id: "Payee" });

const Balance = z
  .object({
    object: z.literal("balance"),
    payee_id: Id,
    account_id: Id,
    currency: Currency,
    balance: Money.meta({
      description: "The sum of the payee's ledger entries in this currency, at full precision.",
    }),
    available: Money.meta({
      description:
        "What a payout request would ask for: the balance rounded down to the currency's minor unit (0 when negative).",
    }),
    pending_payouts: Money.meta({ description: "Requested or approved payouts not paid yet." }),
  })
  .meta({ id: "Balance" });

const StatementSummary = z
  .object({
    id: Id,
    object: z.literal("statement"),
    account_id: Id,
    payee_id: Id,
    period: Month,
    currency: Currency,
    status: z.enum(["draft", "approved"]),
    approved_at: Timestamp.nullable(),
    opening_balance: Money,
    earnings_total: Money,
    payments_total: Money,
    adjustments_total: Money,
    closing_balance: Money,
  })
  .meta({ id: "StatementSummary" });

const Earning = z.object({
  release_id: Id.nullable(),
  release_title: z.string().nullable(),
  track_id: Id.nullable(),
  track_title: z.string().nullable(),
  isrc: z.string().nullable(),
  store: z.string().nullable(),
  territory: z.string().nullable(),
  currency: Currency.meta({ description: "The statement's currency, which the row's figures are in." }),
  original_currency: Currency,
  rate: z
    .string()
    .nullable()
    .meta({ description: "The rate it was converted at; null in the statement's own currency." }),
  earned: Money.meta({ description: "The payee's share of the store's net." }),
  fees: Money.meta({ description: "The distributor's fee on that share." }),
  recouped: Money.meta({ description: "What of it recouped advances and expenses." }),
  net: Money.meta({ description: "What reached the balance: earned − fees − recouped." }),
});

const Statement = z
  .object({
    id: Id,
    object: z.literal("statement"),
    tenant_name: z.string(),
    account_id: Id,
    account_name: z.string(),
    payee: z.object({ id: Id, name: z.string(), email: z.string().nullable() }),
    period: Month,
    currency: Currency,
    status: z.enum(["draft", "approved"]),
    approved_at: Timestamp.nullable(),
    opening_balance: Money,
    earnings: z.array(Earning),
    totals: z.object({ currency: Currency, earned: Money, fees: Money, recouped: Money, net: Money }),
    payments: z.array(
      z.object({
        payout_id: Id,
        status: z.enum(["requested", "paid", "failed"]),
        currency: Currency,
        amount: Money,
        withholding: Money,
        at: Timestamp,
      }),
    ),
    payments_total: Money,
    adjustments_total: Money.meta({
      description:
        "Corrections of earlier periods (voided imports) and the rounding carried from the last statement.",
    }),
    closing_balance: Money,
    recoupables: z.array(
      z.object({
        id: Id,
        kind: z.enum(["advance", "expense"]),
        description: z.string(),
        release_id: Id.nullable(),
        currency: Currency,
        amount: Money,
        unrecouped: Money,
      }),
    ),
    charges: z
      .array(
        z.object({
          kind: z.literal("add_on"),
          order_id: Id,
          add_on: z.string().meta({ description: "The add-on's code." }),
          name: z.string(),
          release_id: Id,
          release_title: z.string().nullable(),
          currency: Currency,
          amount: Money,
          at: Timestamp,
        }),
      )
      .optional()
      .meta({
        description:
          "The account's own statement: add-ons bought in the period (GET /add-ons), each an expense in recoupables " +
          "too. Absent when there were none.",
      }),
    rates: z.array(z.object({ from: Currency, to: Currency, rate: z.string() })),
  })
  .meta({
    id: "Statement",
    description:
      'Stated figures are rounded to the currency\'s minor unit by the largest-remainder rule (docs/payouts.md, "Rounding"): they add up exactly to the closing balance.',
  });

const Payout = z
  .object({
    id: Id,
    object: z.literal("payout"),
    payee_id: Id,
    account_id: Id,
    status: z.enum(["requested", "approved", "paid", "failed"]),
    currency: Currency,
    amount: Money.meta({ description: "What left the balance." }),
    withholding: Money.meta({ description: "Withheld for tax at the payee's rate." }),
    net_amount: Money.meta({ description: "What the provider sends: amount − withholding." }),
    batch_id: Id.nullable(),
    requested_at: Timestamp,
    settled_at: Timestamp.nullable(),
    failure_reason: z.string().nullable(),
  })
  .meta({ id: "Payout" });

const payoutOut = (p: PayoutRow) => ({
  ...p,
  requested_at: timestamp(p.requested_at),
  settled_at: timestamp(p.settled_at),
});

const payeeOut = (p: Awaited<ReturnType<typeof findPayee>> & object) => ({
  ...p,
  created_at: timestamp(p.created_at),
});

const StatementQuery = OffsetPagination.extend({
  period: Month.optional().meta({ description: "Only this period." }),
  payee_id: Id.optional().meta({ description: "Only this payee's." }),
}).strict();

const listed = <T>(rows: T[], q: { limit: number; offset?: number | undefined }) => {
  const offset = q.offset ?? 0;
  return page(rows.slice(offset, offset + q.limit), q, {
    total: rows.length,
    has_more: offset + q.limit < rows.length,
  });
};

/**
 * An approved statement as it was stored (its JSON text, answered as it is: the document of a
 * large payee runs to hundreds of kilobytes, and parsing it only to serialize it again cost more
 * than the query), and whose payee it is. Under the caller's row security: another account's
 * statement is not found.
 */
async function statementById(tx: Tx, id: string): Promise<{ json: string; payeeId: string }> {
  const row = (
    await tx.query<{ json: string; payee_id: string }>(
      "select document::text as json, payee_id from internal.statements where id = $1",
      [id],
    )
  ).rows[0];
  if (!row) throw notFound("statement", id);
  return { json: row.json, payeeId: row.payee_id };
}

async function readStatement(
  ctx: Context<{ id: string }, unknown, unknown>,
  mine: boolean,
): Promise<{ json: string; payeeId: string }> {
  return ctx.read(async (tx) => {
    const d = await statementById(tx, ctx.params.id);
    if (mine) {
      const ok = (await tx.query("select 1 where $1::uuid = any (auth.my_payee_ids())", [d.payeeId]))
        .rowCount;
      if (!ok) throw notFound("statement", ctx.params.id);
    }
    return d;
  });
}

/**
 * An approved statement never changes (the database refuses it), so its strong ETag is its id
 * and a digest of its text, and a client that holds it gets 304 without the body.
 */
function statementAnswer(request: FastifyRequest, statementId: string, json: string) {
  const ETag = `"${statementId}-${createHash("sha256").update(json).digest("base64url").slice(0, 16)}"`;
  if (notModified(request, ETag)) return { status: 304, body: undefined, headers: { ETag } };
  return { body: json, headers: { ETag } };
}

/** A statement's JSON, and its CSV and PDF as files, for an account's routes or a person's. */
function statementRoutes(prefix: "" | "/me", common: typeof account | typeof person) {
  const mine = prefix === "/me";
  const who = mine ? "One of your statements" : "A statement of the account";
  const id = (s: string) => (mine ? `getMyStatement${s}` : `getStatement${s}`);
  const file = (format: "csv" | "pdf") =>
    route({
      ...common,
      method: "GET",
      path: `${prefix}/statements/{id}/${format}`,
      operationId: id(format === "csv" ? "Csv" : "Pdf"),
      summary: `${who} as ${format === "csv" ? "CSV" : "a PDF in the distributor's branding"}`,
      params: withId,
      response: {
        status: 200,
        description:
          format === "csv"
            ? "The statement as CSV (one row per earning, then the summary rows)."
            : "The statement as a PDF.",
        mediaType: format === "csv" ? "text/csv" : "application/pdf",
        headers: ["Content-Disposition"],
      },
      handler: async (ctx) => {
        const doc = JSON.parse((await readStatement(ctx, mine)).json) as StatementDocument;
        const f = await statementFile(ctx.services.db, ctx.caller.tenantId, doc, format);
        return { body: f.body, headers: fileHeaders(f) };
      },
    });
  return [
    route({
      ...common,
      method: "GET",
      path: `${prefix}/statements/{id}`,
      operationId: id(""),
      summary: who,
      params: withId,
      response: { status: 200, description: "The statement.", schema: Statement },
      etag: true,
      handler: async (ctx) =>
        statementAnswer(ctx.request, ctx.params.id, (await readStatement(ctx, mine)).json),
    }),
    file("csv"),
    file("pdf"),
  ];
}

/** A person's own payee, or 404 (another person's payee is not found, as a missing one is). */
async function myPayee(ctx: Context<{ id: string }, unknown, unknown>) {
  const p = await ctx.read(async (tx) => {
    const ok = (await tx.query("select 1 where $1::uuid = any (auth.my_payee_ids())", [ctx.params.id]))
      .rowCount;
    return ok ? findPayee(tx, ctx.params.id) : undefined;
  });
  if (!p) throw notFound("payee", ctx.params.id);
  return p;
}

const DraftStatement = Statement.extend({
  id: z.literal("").meta({ description: "A draft has no id yet: its period's approval gives it one." }),
  status: z.literal("draft"),
  approved_at: Timestamp.nullable().meta({ description: "null: a draft is not approved yet." }),
}).meta({
  id: "DraftStatement",
  description:
    "The statement of the payee's open period as the ledger has it now: it changes with each import, request or void until the operator approves the period (then it is listed with the approved ones, with an id).",
});

/**
 * The draft statement of a payee the person is: the earliest period with their entries that no
 * approved statement covers, computed from the ledger now (src/money/statements.ts statementFor).
 * Whose payee it is is decided first, under the person's own row security; the draft then reads
 * the account's and tenant's names, which a payee who is not a member cannot read.
 */
async function myDraft(ctx: Context<{ id: string }, unknown, unknown>) {
  const p = await myPayee(ctx);
  const doc = await ctx.services.db.asService(
    async (tx) => {
      const period = (
        await tx.query<{ p: string | null }>(
          `select to_char(min(e.period), 'YYYY-MM') as p from internal.ledger_entries e
           where e.payee_id = $1
             and not exists (select 1 from internal.statements s where s.payee_id = e.payee_id and s.period = e.period)
             and not exists (select 1 from internal.money_periods m
               where m.tenant_id = e.tenant_id and m.period = e.period and m.status = 'approved')`,
          [p.id],
        )
      ).rows[0]?.p;
      return period ? statementFor(tx, p.id, period) : undefined;
    },
    { readOnly: true },
  );
  if (doc?.status !== "draft") throw notFound("draft statement of payee", p.id);
  return doc;
}

/** A person's draft statement of a payee they are: JSON, CSV and PDF (as the approved ones). */
function draftStatementRoutes() {
  const file = (format: "csv" | "pdf") =>
    route({
      ...person,
      method: "GET",
      path: `/me/payees/{id}/draft-statement/${format}`,
      operationId: format === "csv" ? "getMyDraftStatementCsv" : "getMyDraftStatementPdf",
      summary: `Your draft statement of a payee you are, as ${format === "csv" ? "CSV" : "a PDF"}`,
      params: withId,
      response: {
        status: 200,
        description:
          format === "csv"
            ? "The draft as CSV (one row per earning, then the summary rows)."
            : "The draft as a PDF, marked draft.",
        mediaType: format === "csv" ? "text/csv" : "application/pdf",
        headers: ["Content-Disposition"],
      },
      errors: [404],
      handler: async (ctx) => {
        const doc = await myDraft(ctx);
        const f = await statementFile(ctx.services.db, ctx.caller.tenantId, doc, format);
        return { body: f.body, headers: fileHeaders(f) };
      },
    });
  return [
    route({
      ...person,
      method: "GET",
      path: "/me/payees/{id}/draft-statement",
      operationId: "getMyDraftStatement",
      summary: "Your draft statement of a payee you are: the open period, as the ledger has it now",
      description:
        "The earliest period with the payee's entries that is not approved yet. 404 when every entry is in an approved statement.",
      params: withId,
      response: { status: 200, description: "The draft statement.", schema: DraftStatement },
      errors: [404],
      handler: async (ctx) => ({ body: await myDraft(ctx) }),
    }),
    file("csv"),
    file("pdf"),
  ];
}

function moneyFailure(error: unknown): never {
  if (error instanceof MoneyError) {
    throw new ApiError(error.status, error.code, error.message, error.param ? { param: error.param } : {});
  }
  throw error;
}

const account = { tag: "Money", scope: "payouts:read" } as const;
const person = { tag: "Money", scope: "payouts:read", person: true } as const;
const withId = z.object({ id: Id }).strict();

export const moneyRoutes = [
  route({
    ...account,
    method: "GET",
    path: "/payees",
    operationId: "listPayees",
    summary: "The account's payees",
    description: "Everyone the account pays: itself, and each person its tracks' splits name by e-mail.",
    query: OffsetPagination,
    response: { status: 200, description: "The payees.", schema: listOf(Payee, "PayeeList") },
    handler: async (ctx) => ({
      body: listed(
        (await ctx.read((tx) => listPayees(tx, { accountId: ctx.caller.accountId as string }))).map(payeeOut),
        ctx.query,
      ),
    }),
  }),
  route({
    ...account,
    method: "GET",
    path: "/payees/{id}",
    operationId: "getPayee",
    summary: "A payee of the account",
    params: withId,
    response: { status: 200, description: "The payee.", schema: Payee },
    handler: async (ctx) => {
      const p = await ctx.read((tx) => findPayee(tx, ctx.params.id));
      if (!p || p.account_id !== ctx.caller.accountId) throw notFound("payee", ctx.params.id);
      return { body: payeeOut(p) };
    },
  }),
  route({
    ...account,
    method: "GET",
    path: "/balances",
    operationId: "listBalances",
    summary: "Each payee's balance, per currency",
    query: OffsetPagination.extend({ payee_id: Id.optional() }).strict(),
    response: { status: 200, description: "The balances.", schema: listOf(Balance, "BalanceList") },
    handler: async (ctx) => ({
      body: listed(
        await ctx.read((tx) =>
          balances(tx, { accountId: ctx.caller.accountId, payeeId: ctx.query.payee_id }),
        ),
        ctx.query,
      ),
    }),
  }),
  route({
    ...account,
    method: "GET",
    path: "/statements",
    operationId: "listStatements",
    summary: "The account's approved statements, newest period first",
    query: StatementQuery,
    response: {
      status: 200,
      description: "The statements.",
      schema: listOf(StatementSummary, "StatementList"),
    },
    handler: async (ctx) => ({
      body: listed(
        await ctx.read((tx) =>
          listStatements(tx, {
            accountId: ctx.caller.accountId,
            period: ctx.query.period,
            payeeId: ctx.query.payee_id,
          }),
        ),
        ctx.query,
      ),
    }),
  }),
  ...statementRoutes("", account),
  route({
    ...account,
    method: "GET",
    path: "/payouts",
    operationId: "listPayouts",
    summary: "The account's payouts, newest first",
    query: OffsetPagination.extend({ payee_id: Id.optional() }).strict(),
    response: { status: 200, description: "The payouts.", schema: listOf(Payout, "PayoutList") },
    handler: async (ctx) => ({
      body: listed(
        (
          await ctx.read((tx) =>
            payoutsOf(tx, { accountId: ctx.caller.accountId, payeeId: ctx.query.payee_id }),
          )
        ).map(payoutOut),
        ctx.query,
      ),
    }),
  }),

  route({
    ...person,
    method: "GET",
    path: "/me/payees",
    operationId: "listMyPayees",
    summary: "The payees you are, in every account that pays you",
    description:
      "You are a payee where a split names your proven e-mail address (one you used a mailed link or code for), or you claimed it.",
    query: OffsetPagination,
    response: { status: 200, description: "Your payees.", schema: listOf(Payee, "MyPayeeList") },
    handler: async (ctx) => ({
      body: listed((await ctx.read((tx) => listPayees(tx, { mine: true }))).map(payeeOut), ctx.query),
    }),
  }),
  route({
    ...person,
    method: "GET",
    path: "/me/balances",
    operationId: "listMyBalances",
    summary: "Your balances, per account and currency",
    query: OffsetPagination,
    response: { status: 200, description: "Your balances.", schema: listOf(Balance, "MyBalanceList") },
    handler: async (ctx) => ({
      body: listed(await ctx.read((tx) => balances(tx, { mine: true })), ctx.query),
    }),
  }),
  route({
    ...person,
    method: "GET",
    path: "/me/statements",
    operationId: "listMyStatements",
    summary: "Your approved statements, newest period first",
    query: StatementQuery,
    response: {
      status: 200,
      description: "Your statements.",
      schema: listOf(StatementSummary, "MyStatementList"),
    },
    handler: async (ctx) => ({
      body: listed(
        await ctx.read((tx) =>
          listStatements(tx, { mine: true, period: ctx.query.period, payeeId: ctx.query.payee_id }),
        ),
        ctx.query,
      ),
    }),
  }),
  ...statementRoutes("/me", person),
  ...draftStatementRoutes(),
  route({
    ...person,
    method: "GET",
    path: "/me/payouts",
    operationId: "listMyPayouts",
    summary: "Your payout requests and payments",
    query: OffsetPagination,
    response: { status: 200, description: "Your payouts.", schema: listOf(Payout, "MyPayoutList") },
    handler: async (ctx) => ({
      body: listed((await ctx.read((tx) => payoutsOf(tx, { mine: true }))).map(payoutOut), ctx.query),
    }),
  }),
  route({
    ...person,
    method: "POST",
    path: "/me/payees/{id}/tax-form",
    operationId: "fileTaxForm",
    summary: "File your tax form (W-9, W-8BEN or W-8BEN-E) for a payee you are",
    description:
      "The tax id is sealed at rest; only its last four characters are ever shown. The form waits for the operator's review (tax.status pending) before payouts.",
    idempotent: false,
    params: withId,
    body: z
      .object({
        form: z.enum(["W-9", "W-8BEN", "W-8BEN-E"]),
        name: z.string().trim().min(1).max(300).meta({ description: "The name on the form." }),
        country: z.string().regex(/^[A-Z]{2}$/, "an ISO 3166-1 alpha-2 country code"),
        tax_id: z
          .string()
          .trim()
          .min(4)
          .max(40)
          .regex(/^[0-9A-Za-z .\-/]+$/, "letters, digits, spaces, dots, hyphens and slashes")
          .meta({ description: "SSN/EIN/ITIN for a W-9, the foreign tax id for a W-8." }),
      })
      .strict()
      .meta({ id: "TaxFormInput" }),
    response: { status: 200, description: "The payee.", schema: Payee },
    errors: [404],
    handler: async (ctx) => {
      await myPayee(ctx);
      await fileTaxForm(ctx.services.db, ctx.services.secrets, ctx.params.id, ctx.body);
      return {
        body: payeeOut(
          (await ctx.read((tx) => findPayee(tx, ctx.params.id))) as NonNullable<
            Awaited<ReturnType<typeof findPayee>>
          >,
        ),
      };
    },
  }),
  route({
    ...person,
    method: "POST",
    path: "/me/payees/{id}/payout-method",
    operationId: "setPayoutMethod",
    summary: "Say where a payee you are is paid (PayPal or Wise)",
    params: withId,
    body: z.object({ method: PAYOUT_METHOD_SCHEMA }).strict().meta({ id: "PayoutMethodInput" }),
    response: { status: 200, description: "The payee.", schema: Payee },
    errors: [404],
    handler: async (ctx) => {
      await myPayee(ctx);
      await setPayoutMethod(ctx.services.db, ctx.params.id, ctx.body.method as never);
      return {
        body: payeeOut(
          (await ctx.read((tx) => findPayee(tx, ctx.params.id))) as NonNullable<
            Awaited<ReturnType<typeof findPayee>>
          >,
        ),
      };
    },
  }),
  route({
    ...person,
    method: "POST",
    path: "/me/payees/{id}/payouts",
    operationId: "requestPayout",
    summary: "Ask to be paid a payee's available balance",
    description:
      "The available balance in the payee's currency, rounded down to its minor unit (the rest stays). Needs a verified tax form, a payout method, at least the tenant's threshold, no other open request, and a second factor (aal2) where the tenant requires it.",
    params: withId,
    bodyOptional: true,
    body: z
      .object({})
      .strict()
      .meta({ id: "PayoutRequestInput", description: "Nothing to say: the available balance is asked for." }),
    response: { status: 201, description: "The payout request.", schema: Payout },
    errors: [404, 409, 422],
    handler: async (ctx) => {
      const p = await myPayee(ctx);
      const payout = await ctx.write((tx) => requestPayout(tx, p.id)).catch(moneyFailure);
      return { status: 201, body: payoutOut(payout) };
    },
  }),
];

async function payoutsOf(
  tx: Tx,
  filter: { accountId?: string | undefined; payeeId?: string | undefined; mine?: boolean },
) {
  return (
    await tx.query<{ o: PayoutRow }>(
      `select internal.payout_object(o.id) as o from internal.payouts o
       where ($1::uuid is null or o.account_id = $1) and ($2::uuid is null or o.payee_id = $2)
         and (not $3 or o.payee_id = any (auth.my_payee_ids()))
       order by o.requested_at desc, o.id limit 1000`,
      [filter.accountId ?? null, filter.payeeId ?? null, filter.mine ?? false],
    )
  ).rows.map((r) => r.o);
}
