import type { FastifyRequest } from "fastify";
import { z } from "zod";
import { type AnyAdminRoute, adminRoute, IdParams, Uuid } from "../admin/spec.ts";
import { openAuditScope } from "../db/audit-context.ts";
import type { Db } from "../db/db.ts";
import { Count, Currency, Money, Timestamp, TimestampInput } from "../http/formats.ts";
import { HttpError } from "../http/problem.ts";
import { creditNoteDocument, invoiceCsv, invoicePdf } from "./invoice-files.ts";
import {
  createPlan,
  getInvoice,
  getIssuer,
  getTenantBilling,
  importStripeCharges,
  issueCreditNote,
  issueDueInvoices,
  issueInvoice,
  listCreditNotes,
  listInvoices,
  listPayments,
  listPlans,
  previewInvoice,
  recordPayment,
  setIssuer,
  setTenantBilling,
} from "./invoices.ts";

/**
 * Plans and invoices under /admin/v1 (docs/operator.md, "Plans and invoices"). Plans, the
 * installation's legal details, a tenant's plan, issuing and payments are platform staff's
 * (staffRole "platform": the database's require_staff checks it again in each transaction); a
 * tenant's admin (or its service-role key) reads its own plan, usage, invoices and payments, and
 * only its own: every read is filtered by the tenant acted on, so another tenant's invoice is
 * 404 not_found, exactly as a missing one.
 */
const TAG = "Invoices";

const Month = z
  .string()
  .regex(/^\d{4}-(0[1-9]|1[0-2])$/, "a month, YYYY-MM")
  .meta({ description: "A month, YYYY-MM.", example: "2026-11" });
const Country = z
  .string()
  .regex(/^[A-Z]{2}$/, "an ISO 3166-1 alpha-2 country code in capitals")
  .meta({ description: "ISO 3166-1 alpha-2 country code.", example: "DE" });
const VatId = z
  .string()
  .regex(/^[A-Z]{2}[A-Z0-9]{2,18}$/, "a VAT id: two letters and 2 to 18 letters or digits, no spaces")
  .meta({ description: "VAT identification number, no spaces.", example: "DE123456789" });
const Email = z.email().max(320);
const Fee = Money.refine(
  (v) => /^\d{1,12}(\.\d{1,2})?$/.test(v),
  "an amount such as 99.00, at most two decimals",
).meta({
  description: "An amount, a decimal string with at most two decimals.",
  example: "99.00",
});
const Rate = z
  .string()
  .regex(/^\d{1,3}\.\d{2}$/)
  .meta({ description: "The tax rate in percent, two decimals.", example: "19.00" });
const UnitPrice = z
  .string()
  .regex(/^\d{1,10}(\.\d{1,4})?$/, "a price such as 0.25, up to four decimals")
  .meta({ description: "A unit price, a decimal string with up to four decimals.", example: "0.25" });
const Units = z.number().int().min(0).max(2_000_000_000);
const Percent = z
  .string()
  .regex(/^\d{1,2}(\.\d{1,2})?$/, "a percentage such as 19 or 25.5")
  .meta({ description: "Percent, a decimal string.", example: "19" });

const IssuerSchema = z
  .object({
    legal_name: z.string(),
    address: z.string(),
    country: z.string(),
    vat_id: z.string().nullable(),
    email: z.string().nullable(),
    invoice_prefix: z.string(),
    payment_terms_days: Count,
    tax_rates: z.record(z.string(), z.string()),
    bank_details: z.string().nullable(),
  })
  .meta({ id: "BillingIssuer", description: "The installation's legal details, printed on its invoices." });

const PlanSchema = z
  .object({
    id: Uuid,
    name: z.string(),
    currency: Currency,
    monthly_fee: Money,
    included_accounts: Count,
    included_releases: Count,
    included_tracks: Count,
    included_storage_gb: Count,
    included_api_calls: Count,
    price_per_account: Money,
    price_per_release: Money,
    price_per_track: Money,
    price_per_storage_gb: Money,
    price_per_1000_api_calls: Money,
    created_at: Timestamp,
  })
  .meta({
    id: "BillingPlan",
    description: "A plan: a monthly fee, its allowances and the price of each unit past them.",
  });

const CustomerSchema = z
  .object({
    tenant_id: Uuid,
    plan_id: Uuid,
    legal_name: z.string(),
    address: z.string(),
    country: z.string(),
    vat_id: z.string().nullable(),
    email: z.string().nullable(),
  })
  .meta({ id: "BillingCustomer", description: "A tenant's legal details as its invoices name it." });

const TenantBillingSchema = z
  .object({ tenant_id: Uuid, customer: CustomerSchema.nullable(), plan: PlanSchema.nullable() })
  .meta({
    id: "TenantBilling",
    description: "A tenant's plan and legal details (null until platform staff set them).",
  });

const UsageSchema = z
  .object({
    month: z.string(),
    accounts: Count,
    releases_delivered: Count,
    tracks: Count,
    storage_bytes: Count.meta({ description: "Bytes." }),
    api_calls: Count,
  })
  .meta({
    id: "TenantUsage",
    description: 'What a tenant used in a month (docs/operator.md, "What is metered").',
  });

const LineSchema = z.object({
  description: z.string(),
  currency: Currency,
  quantity: z.string(),
  unit: z.string(),
  unit_price: Money,
  amount: Money,
});

const TaxRuleSchema = z
  .enum(["domestic", "eu_reverse_charge", "eu_consumer", "outside_eu", "not_applicable"])
  .meta({ description: 'Which tax rule applied (docs/operator.md, "Tax").' });

const PreviewSchema = z
  .object({
    tenant_id: Uuid,
    month: z.string(),
    currency: Currency,
    usage: UsageSchema,
    lines: z.array(LineSchema),
    subtotal: Money,
    tax_rate: Rate,
    tax: Money,
    total: Money,
    tax_rule: TaxRuleSchema,
    tax_note: z.string(),
  })
  .meta({ id: "InvoicePreview", description: "What a month's invoice would say; nothing is issued." });

const InvoiceSchema = z
  .object({
    id: Uuid,
    tenant_id: Uuid,
    number: z.string(),
    month: z.string(),
    issued_at: Timestamp,
    due_on: z.string().meta({ description: "YYYY-MM-DD." }),
    currency: Currency,
    subtotal: Money,
    tax_rate: Rate,
    tax: Money,
    total: Money,
    tax_rule: TaxRuleSchema,
    tax_note: z.string(),
    issuer: z.looseObject({}),
    customer: z.looseObject({}),
    plan: z.looseObject({}),
    usage: UsageSchema,
    lines: z.array(LineSchema),
    paid: Money,
    credited: Money.meta({ description: "What credit notes took off it." }),
    balance: Money,
    status: z.enum(["open", "overdue", "paid"]),
  })
  .meta({
    id: "Invoice",
    description: "An issued invoice: it never changes; paid, balance and status follow its payments.",
  });

const PaymentSchema = z
  .object({
    id: Uuid,
    invoice_id: Uuid,
    invoice_number: z.string(),
    tenant_id: Uuid,
    amount: Money,
    currency: Currency,
    paid_at: Timestamp,
    method: z.enum(["manual", "stripe_charges_csv"]),
    external_ref: z.string().nullable(),
    note: z.string().nullable(),
    recorded_by: z.string(),
  })
  .meta({ id: "InvoicePayment", description: "A payment received for an invoice." });

const CreditNoteSchema = z
  .object({
    id: Uuid,
    tenant_id: Uuid,
    invoice_id: Uuid,
    invoice_number: z.string(),
    number: z.string(),
    issued_at: Timestamp,
    currency: Currency,
    subtotal: Money,
    tax_rate: Rate,
    tax: Money,
    total: Money,
    reason: z.string(),
    issued_by: z.string(),
  })
  .meta({
    id: "CreditNote",
    description: "A correction of an issued invoice: what it credits, never changed.",
  });

export function billingSpecs(options: {
  db: Db;
  isPlatformAdmin: (request: FastifyRequest) => boolean;
}): AnyAdminRoute[] {
  const { db, isPlatformAdmin } = options;
  const actor = (request: FastifyRequest) => {
    const who = openAuditScope(request).actor;
    return who ? `${who.type}:${who.id}` : "admin_api";
  };
  /** The invoice as the caller may see it: any tenant's for platform admins, else their tenant's. */
  const visibleInvoice = (id: string, tenantId: string, request: FastifyRequest) =>
    getInvoice(db, id, isPlatformAdmin(request) ? undefined : tenantId);
  /** The same, or 404 naming the id. */
  const invoiceOr404 = async (id: string, tenantId: string, request: FastifyRequest) => {
    const invoice = await visibleInvoice(id, tenantId, request);
    if (!invoice) throw new HttpError(404, "not_found", `no invoice ${id}`, "id");
    return invoice;
  };
  return [
    adminRoute({
      method: "GET",
      path: "/billing/issuer",
      operationId: "getBillingIssuer",
      summary: "The installation's legal details (platform staff)",
      tag: TAG,
      staffRole: "platform",
      response: { status: 200, description: "The issuer.", schema: IssuerSchema },
      errors: [404],
      handler: async () => {
        const issuer = await getIssuer(db);
        if (!issuer)
          throw new HttpError(404, "not_found", "The installation's legal details are not set yet.");
        return issuer;
      },
    }),
    adminRoute({
      method: "POST",
      path: "/billing/issuer",
      operationId: "setBillingIssuer",
      summary: "Set the installation's legal details (platform staff)",
      description:
        "Printed on every invoice issued from now on; issued invoices keep the details they were issued with.",
      tag: TAG,
      staffRole: "platform",
      body: z.strictObject({
        legal_name: z.string().trim().min(1).max(200),
        address: z.string().trim().min(1).max(1000),
        country: Country,
        vat_id: VatId.nullable().default(null),
        email: Email.nullable().default(null),
        invoice_prefix: z
          .string()
          .regex(/^[A-Za-z0-9/-]{0,12}$/, "up to 12 letters, digits, - or /")
          .default("INV-"),
        payment_terms_days: z.number().int().min(0).max(365).default(14),
        tax_rates: z
          .record(Country, Percent)
          .default({})
          .meta({ description: "Standard rates by country that override the built-in EU table." }),
        bank_details: z.string().max(1000).nullable().default(null),
      }),
      response: { status: 200, description: "The issuer.", schema: IssuerSchema },
      handler: ({ body }) => setIssuer(db, body),
    }),
    adminRoute({
      method: "GET",
      path: "/billing/plans",
      operationId: "listBillingPlans",
      summary: "Plans (platform staff)",
      tag: TAG,
      staffRole: "platform",
      response: { status: 200, description: "The plans.", schema: z.object({ data: z.array(PlanSchema) }) },
      handler: async () => ({ data: await listPlans(db) }),
    }),
    adminRoute({
      method: "POST",
      path: "/billing/plans",
      operationId: "createBillingPlan",
      summary: "Create a plan (platform staff)",
      description:
        "Plans are not changed once made: make a new one and give it to the tenants. Currencies with three decimals are refused (422 unsupported_currency).",
      tag: TAG,
      staffRole: "platform",
      body: z.strictObject({
        name: z.string().trim().min(1).max(100),
        currency: Currency,
        monthly_fee: Fee,
        included_accounts: Units.default(0),
        included_releases: Units.default(0),
        included_tracks: Units.default(0),
        included_storage_gb: Units.default(0),
        included_api_calls: Units.default(0),
        price_per_account: UnitPrice.default("0"),
        price_per_release: UnitPrice.default("0"),
        price_per_track: UnitPrice.default("0"),
        price_per_storage_gb: UnitPrice.default("0"),
        price_per_1000_api_calls: UnitPrice.default("0"),
      }),
      response: { status: 201, description: "The plan.", schema: PlanSchema },
      errors: [409, 422],
      handler: ({ body }) => createPlan(db, body),
    }),
    adminRoute({
      method: "GET",
      path: "/billing/tenant",
      operationId: "getTenantBilling",
      summary: "The tenant's plan and legal details",
      tag: TAG,
      staffRole: "admin",
      response: { status: 200, description: "The tenant's plan.", schema: TenantBillingSchema },
      handler: ({ tenantId }) => getTenantBilling(db, tenantId),
    }),
    adminRoute({
      method: "POST",
      path: "/billing/tenant",
      operationId: "setTenantBilling",
      summary: "Give the tenant (Backline-Tenant) a plan and its legal details (platform staff)",
      description: "The next invoice uses them; issued invoices keep theirs.",
      tag: TAG,
      staffRole: "platform",
      body: z.strictObject({
        plan_id: Uuid,
        legal_name: z.string().trim().min(1).max(200),
        address: z.string().trim().min(1).max(1000),
        country: Country,
        vat_id: VatId.nullable().default(null),
        email: Email.nullable().default(null),
      }),
      response: { status: 200, description: "The tenant's plan.", schema: TenantBillingSchema },
      errors: [404],
      handler: ({ tenantId, body }) => setTenantBilling(db, tenantId, body),
    }),
    adminRoute({
      method: "GET",
      path: "/billing/usage",
      operationId: "getTenantUsage",
      summary: "What the tenant used in a month, and the invoice it would get",
      tag: TAG,
      staffRole: "admin",
      query: z.strictObject({ month: Month }),
      response: { status: 200, description: "The usage and the invoice's figures.", schema: PreviewSchema },
      errors: [409],
      handler: ({ tenantId, query }) => previewInvoice(db, tenantId, query.month),
    }),
    adminRoute({
      method: "GET",
      path: "/invoices",
      operationId: "listInvoices",
      summary: "The tenant's invoices (all tenants' with all=true, platform staff)",
      description:
        "Newest number first. status=overdue: past their due date and not paid in full; status=open includes them.",
      tag: TAG,
      staffRole: "admin",
      query: z.strictObject({
        all: z
          .enum(["true", "false"])
          .default("false")
          .meta({ description: "Every tenant's invoices (platform staff only)." }),
        status: z.enum(["open", "overdue", "paid"]).optional().meta({
          description: "open (overdue ones included), overdue (past due, not paid in full) or paid.",
        }),
        month: Month.optional(),
      }),
      response: {
        status: 200,
        description: "The invoices.",
        schema: z.object({ data: z.array(InvoiceSchema) }),
      },
      handler: async ({ tenantId, query, request }) => {
        if (query.all === "true" && !isPlatformAdmin(request))
          throw new HttpError(
            403,
            "insufficient_role",
            "Every tenant's invoices are for platform staff with the admin role.",
          );
        return {
          data: await listInvoices(db, {
            tenantId: query.all === "true" ? undefined : tenantId,
            status: query.status,
            month: query.month,
          }),
        };
      },
    }),
    adminRoute({
      method: "POST",
      path: "/invoices",
      operationId: "issueInvoice",
      summary: "Issue the tenant's (Backline-Tenant) invoice for a month that is over (platform staff)",
      description:
        "Meters the month, prices it by the tenant's plan, applies the tax rule and takes the next invoice number (sequential, without gaps). " +
        "409 invoice_exists when the month is invoiced, month_not_over, no_plan, issuer_missing.",
      tag: TAG,
      staffRole: "platform",
      body: z.strictObject({ month: Month }),
      response: { status: 201, description: "The invoice.", schema: InvoiceSchema },
      errors: [409],
      handler: ({ tenantId, body, request }) =>
        issueInvoice(db, tenantId, body.month, { by: actor(request) }),
    }),
    adminRoute({
      method: "POST",
      path: "/invoices/run",
      operationId: "issueDueInvoices",
      summary: "Issue a month's invoices for every tenant with a plan (platform staff)",
      description:
        "What the worker's monthly job does (default: last month). Tenants already invoiced are left alone.",
      tag: TAG,
      staffRole: "platform",
      body: z.strictObject({ month: Month.optional() }),
      bodyOptional: true,
      response: {
        status: 200,
        description: "What was issued and what failed.",
        schema: z.object({
          month: z.string(),
          issued: z.array(z.string()),
          failed: z.array(z.object({ tenant_id: Uuid, code: z.string(), message: z.string() })),
        }),
      },
      handler: ({ body, request }) => issueDueInvoices(db, body.month, actor(request)),
    }),
    adminRoute({
      method: "GET",
      path: "/invoices/{id}",
      operationId: "getInvoice",
      summary: "An invoice: JSON, or ?format=pdf or csv",
      tag: TAG,
      staffRole: "admin",
      params: IdParams,
      query: z.strictObject({
        format: z
          .enum(["json", "csv", "pdf"])
          .default("json")
          .describe("The invoice as JSON, CSV or a PDF document."),
      }),
      response: {
        status: 200,
        description: "The invoice.",
        schema: InvoiceSchema,
        exports: ["text/csv", "application/pdf"],
      },
      errors: [404],
      handler: async ({ tenantId, params, query, request, reply }) => {
        const invoice = await invoiceOr404(params.id, tenantId, request);
        if (query.format === "json") return invoice;
        const body = query.format === "csv" ? invoiceCsv(invoice) : await invoicePdf(invoice);
        return reply
          .headers({
            "content-type": query.format === "csv" ? "text/csv; charset=utf-8" : "application/pdf",
            "content-disposition": `attachment; filename="invoice-${invoice.number.replace(/[^A-Za-z0-9-]/g, "-")}.${query.format}"`,
          })
          .status(200)
          .send(body);
      },
    }),
    adminRoute({
      method: "GET",
      path: "/invoices/{id}/payments",
      operationId: "listInvoicePayments",
      summary: "The payments recorded for an invoice",
      tag: TAG,
      staffRole: "admin",
      params: IdParams,
      response: {
        status: 200,
        description: "The payments.",
        schema: z.object({ data: z.array(PaymentSchema) }),
      },
      errors: [404],
      handler: async ({ tenantId, params, request }) => {
        const invoice = await invoiceOr404(params.id, tenantId, request);
        return { data: await listPayments(db, { invoiceId: invoice.id }) };
      },
    }),
    adminRoute({
      method: "POST",
      path: "/invoices/{id}/payments",
      operationId: "recordInvoicePayment",
      summary: "Record a payment received for an invoice (platform staff)",
      description:
        "In the invoice's currency, at most what is still due (422 amount_exceeds_balance). external_ref (a bank or provider reference) is recorded once per tenant (409 payment_exists).",
      tag: TAG,
      staffRole: "platform",
      params: IdParams,
      body: z.strictObject({
        amount: Fee.refine((v) => /[1-9]/.test(v), "more than 0"),
        currency: Currency.optional().meta({
          description: "The invoice's currency (checked when given: 422 currency_mismatch).",
        }),
        paid_at: TimestampInput.optional(),
        external_ref: z.string().trim().min(1).max(200).optional(),
        note: z.string().max(500).optional(),
      }),
      response: { status: 201, description: "The payment.", schema: PaymentSchema },
      errors: [404, 409, 422],
      handler: ({ params, body, request }) => recordPayment(db, params.id, { ...body, by: actor(request) }),
    }),
    adminRoute({
      method: "GET",
      path: "/invoices/{id}/credit-notes",
      operationId: "listCreditNotes",
      summary: "The credit notes of an invoice",
      tag: TAG,
      staffRole: "admin",
      params: IdParams,
      response: {
        status: 200,
        description: "The credit notes.",
        schema: z.object({ data: z.array(CreditNoteSchema) }),
      },
      errors: [404],
      handler: async ({ tenantId, params, request }) => {
        const invoice = await invoiceOr404(params.id, tenantId, request);
        return { data: await listCreditNotes(db, { invoiceId: invoice.id }) };
      },
    }),
    adminRoute({
      method: "GET",
      path: "/invoices/{id}/credit-notes/{note_id}",
      operationId: "getCreditNote",
      summary: "A credit note: JSON, or ?format=pdf or csv",
      tag: TAG,
      staffRole: "admin",
      params: z.object({ id: Uuid, note_id: Uuid }),
      query: z.strictObject({
        format: z
          .enum(["json", "csv", "pdf"])
          .default("json")
          .describe("The credit note as JSON, CSV or a PDF document."),
      }),
      response: {
        status: 200,
        description: "The credit note.",
        schema: CreditNoteSchema,
        exports: ["text/csv", "application/pdf"],
      },
      errors: [404],
      handler: async ({ tenantId, params, query, request, reply }) => {
        const invoice = await visibleInvoice(params.id, tenantId, request);
        const note = invoice
          ? (await listCreditNotes(db, { invoiceId: invoice.id, id: params.note_id }))[0]
          : undefined;
        if (!invoice || !note)
          throw new HttpError(404, "not_found", `no credit note ${params.note_id}`, "note_id");
        if (query.format === "json") return note;
        const doc = creditNoteDocument(invoice, note);
        const body =
          query.format === "csv"
            ? invoiceCsv(doc)
            : await invoicePdf(doc, { creditNote: { corrects: invoice.number } });
        return reply
          .headers({
            "content-type": query.format === "csv" ? "text/csv; charset=utf-8" : "application/pdf",
            "content-disposition": `attachment; filename="credit-note-${note.number.replace(/[^A-Za-z0-9-]/g, "-")}.${query.format}"`,
          })
          .status(200)
          .send(body);
      },
    }),
    adminRoute({
      method: "POST",
      path: "/invoices/{id}/credit-notes",
      operationId: "issueCreditNote",
      summary: "Correct an issued invoice with a credit note (platform staff)",
      description:
        "Credits a net amount at the invoice's tax rate (the tax rounded half away from zero to the cent), numbered in its own gapless series (CN-000001). " +
        "What is credited in all may not pass the invoice's subtotal (422 credit_exceeds_invoice). It lowers what is due on the invoice.",
      tag: TAG,
      staffRole: "platform",
      params: IdParams,
      body: z.strictObject({
        amount: Fee.refine((v) => /[1-9]/.test(v), "more than 0"),
        currency: Currency.optional().meta({ description: "The invoice's currency (checked when given)." }),
        reason: z.string().trim().min(1).max(500),
      }),
      response: { status: 201, description: "The credit note.", schema: CreditNoteSchema },
      errors: [404, 422],
      handler: async ({ params, body, request }) => {
        const invoice = await getInvoice(db, params.id);
        if (!invoice) throw new HttpError(404, "not_found", `no invoice ${params.id}`, "id");
        if (body.currency && body.currency !== invoice.currency)
          throw new HttpError(
            422,
            "currency_mismatch",
            `${invoice.number} is in ${invoice.currency}, not ${body.currency}.`,
            "currency",
          );
        return issueCreditNote(db, params.id, {
          amount: body.amount,
          reason: body.reason,
          by: actor(request),
        });
      },
    }),
    adminRoute({
      method: "POST",
      path: "/invoice-payments/import",
      operationId: "importInvoicePayments",
      summary: "Import a provider's export of payments received (platform staff)",
      description:
        "format stripe_charges_csv: Stripe's charges export (CSV). Each paid charge naming an invoice number (in its description or an " +
        "invoice_number metadata column) is recorded against that invoice, net of refunds; a charge already imported is counted in duplicates.",
      tag: TAG,
      staffRole: "platform",
      body: z.strictObject({
        format: z.enum(["stripe_charges_csv"]),
        csv: z
          .string()
          .min(1)
          .max(1_000_000)
          .meta({ description: "The export's text (the request body is at most 1 MiB)." }),
      }),
      response: {
        status: 200,
        description: "What was recorded and what was not.",
        schema: z.object({
          imported: z.array(PaymentSchema),
          duplicates: Count,
          skipped: z.array(z.object({ row: Count, reason: z.string() })),
        }),
      },
      errors: [422],
      handler: ({ body, request }) => importStripeCharges(db, body.csv, actor(request)),
    }),
  ];
}
