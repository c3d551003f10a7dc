import { z } from "zod";
import { type AnyAdminRoute, adminRoute, IdParams, iso, Uuid } from "../admin/spec.ts";
import type { Db } from "../db/db.ts";
import type { Tx } from "../db/types.ts";
import { Currency, Money, Timestamp } from "../http/formats.ts";
import { HttpError } from "../http/problem.ts";
import { add, format, minorUnits, roundHalfUp, shareOf, sum } from "../money/decimal.ts";

/**
 * Partners of the installation (docs/operator.md, "Partners"): referral and reseller partners who
 * brought tenants to the installation and are credited a share (`revenue_share`, percent) of what
 * those tenants pay the installation (their invoices) or earn (their distributor fees). Platform staff with the admin role only (partners belong
 * to the installation, as stores do):
 *
 *   GET    /admin/v1/partners                         every partner
 *   POST   /admin/v1/partners                         add one
 *   GET    /admin/v1/partners/{id}                    one, with its tenants
 *   PATCH  /admin/v1/partners/{id}                    change it
 *   DELETE /admin/v1/partners/{id}                    remove one with no tenants (409 otherwise)
 *   POST   /admin/v1/partners/{id}/tenants            attach a tenant it referred (from a month on)
 *   DELETE /admin/v1/partners/{id}/tenants/{tenant}   detach it
 *   GET    /admin/v1/partners/{id}/statement?month=   what the partner is owed for a month
 *
 * The statement's base (`basis`) is, for each attached tenant from its `since` month on, either
 * `invoices` (the default): what the installation invoiced the tenant for the month, net of tax
 * and of the credit notes against that invoice (internal.invoices, migration 0050); or
 * `distributor_fees`: the tenant's distributor fees of the month in the money ledger
 * (docs/payouts.md: the `fees` entries of that accounting period, voids included, sandbox
 * accounts left out). The share is base × revenue_share / 100,
 * exact (src/money/decimal.ts), stated rounded half away from zero to the currency's minor unit,
 * per tenant and currency; the totals are the sums of the stated lines.
 */

const TAG = "Partners";
const KINDS = ["reseller", "aggregator", "publisher", "store", "other"] as const;
const MONTH = /^\d{4}-(0[1-9]|1[0-2])$/;
const BASES = ["invoices", "distributor_fees"] as const;
export type PartnerBasis = (typeof BASES)[number];

const Share = z
  .string()
  .regex(/^\d{1,3}(\.\d{1,2})?$/, "a percentage as a decimal string with at most 2 decimals")
  .refine((s) => Number(s) <= 100, "at most 100")
  .meta({
    description: "The partner's share in percent (0 to 100, at most 2 decimals), as a string.",
    example: "12.5",
  });

const PartnerFields = {
  name: z.string().trim().min(1).max(200),
  kind: z
    .enum(KINDS)
    .meta({ description: "What the partner is; `reseller` for a referral or reseller partner." }),
  contact_email: z.email().max(320).nullable().meta({ description: "Where the partner's statements go." }),
  revenue_share: Share,
};

const NewPartner = z
  .strictObject({
    name: PartnerFields.name,
    kind: PartnerFields.kind.default("reseller"),
    contact_email: PartnerFields.contact_email.default(null),
    revenue_share: PartnerFields.revenue_share,
  })
  .meta({ id: "NewPartner" });

const PartnerPatch = z
  .strictObject({
    name: PartnerFields.name.optional(),
    kind: PartnerFields.kind.optional(),
    contact_email: PartnerFields.contact_email.optional(),
    revenue_share: PartnerFields.revenue_share.optional(),
  })
  .refine((b) => Object.keys(b).length > 0, { message: "name at least one field to change" })
  .meta({ id: "PartnerPatch" });

const PartnerTenant = z
  .object({
    tenant_id: Uuid,
    slug: z.string(),
    name: z.string(),
    since: z.string().meta({ description: "The first month credited (YYYY-MM)." }),
  })
  .meta({ id: "PartnerTenant" });

const Partner = z
  .object({
    id: Uuid,
    object: z.literal("partner"),
    name: z.string(),
    kind: z.enum(KINDS),
    contact_email: z.string().nullable(),
    revenue_share: Share,
    tenants: z.array(PartnerTenant),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: "Partner" });

const StatementLine = z
  .object({
    tenant_id: Uuid,
    slug: z.string(),
    currency: Currency,
    base: Money.meta({
      description:
        "What the share is of, exact: the month's invoice net of tax and credit notes, or its distributor fees.",
    }),
    share: Money.meta({ description: "base × revenue_share / 100, rounded to the currency's minor unit." }),
  })
  .meta({ id: "PartnerStatementLine" });

const Statement = z
  .object({
    object: z.literal("partner_statement"),
    partner_id: Uuid,
    month: z.string().meta({ description: "YYYY-MM." }),
    revenue_share: Share,
    basis: z.enum(BASES).meta({
      description:
        "What the share is of: `invoices` (what the installation invoiced each tenant for the month, net of tax and credit notes) or `distributor_fees` (each tenant's distributor fees in the money ledger).",
    }),
    lines: z.array(StatementLine),
    totals: z.array(z.object({ currency: Currency, base: Money, share: Money })),
  })
  .meta({ id: "PartnerStatement" });

interface PartnerRow {
  id: string;
  name: string;
  kind: (typeof KINDS)[number];
  contact_email: string | null;
  revenue_share: string;
  created_at: Date;
  updated_at: Date;
  tenants: { tenant_id: string; slug: string; name: string; since: string }[];
}

const SELECT = `select p.id, p.name, p.kind, p.contact_email, coalesce(p.revenue_share, 0)::text as revenue_share,
    p.created_at, p.updated_at,
    coalesce((select json_agg(json_build_object('tenant_id', t.id, 'slug', t.slug, 'name', t.name,
        'since', to_char(pt.since, 'YYYY-MM')) order by t.slug)
      from internal.partner_tenants pt join internal.tenants t on t.id = pt.tenant_id
      where pt.partner_id = p.id), '[]'::json) as tenants
  from internal.partners p`;

/** "12.50" → "12.5": as the API writes a share. */
const canonical = (s: string) => add(s, "0");

function out(row: PartnerRow) {
  return {
    id: row.id,
    object: "partner" as const,
    name: row.name,
    kind: row.kind,
    contact_email: row.contact_email,
    revenue_share: canonical(row.revenue_share),
    tenants: row.tenants,
    created_at: iso(row.created_at) as string,
    updated_at: iso(row.updated_at) as string,
  };
}

async function partnerById(tx: Tx, id: string): Promise<PartnerRow> {
  const row = (await tx.query<PartnerRow>(`${SELECT} where p.id = $1 and p.tenant_id is null`, [id])).rows[0];
  if (!row) throw new HttpError(404, "not_found", `no partner ${id}`, "id");
  return row;
}

/** A partner's statement for a month (YYYY-MM). */
export async function partnerStatement(tx: Tx, partnerId: string, month: string, basis: PartnerBasis) {
  const partner = await partnerById(tx, partnerId);
  const rate = canonical(partner.revenue_share);
  const sql =
    basis === "invoices"
      ? `select t.id as tenant_id, t.slug, i.currency,
           (i.subtotal - coalesce((select sum(c.subtotal) from internal.credit_notes c where c.invoice_id = i.id), 0))::text
             as base
         from internal.partner_tenants pt
         join internal.tenants t on t.id = pt.tenant_id
         join internal.invoices i on i.tenant_id = pt.tenant_id and i.month = $2::date
         where pt.partner_id = $1 and pt.since <= $2::date
         order by t.slug, i.currency`
      : `select t.id as tenant_id, t.slug, l.currency, sum(l.amount)::text as base
       from internal.partner_tenants pt
       join internal.tenants t on t.id = pt.tenant_id
       join internal.ledger_entries l on l.tenant_id = pt.tenant_id and l.holder = 'fees' and l.period = $2::date
       join internal.accounts a on a.id = l.account_id and not a.is_sandbox
       where pt.partner_id = $1 and pt.since <= $2::date
       group by t.id, t.slug, l.currency
       order by t.slug, l.currency`;
  const rows = (
    await tx.query<{ tenant_id: string; slug: string; currency: string; base: string }>(sql, [
      partnerId,
      `${month}-01`,
    ])
  ).rows;
  const lines = rows.map((r) => {
    const places = minorUnits(r.currency);
    return {
      tenant_id: r.tenant_id,
      slug: r.slug,
      currency: r.currency,
      base: canonical(r.base),
      share: format(roundHalfUp(shareOf(r.base, rate), places), places),
    };
  });
  const currencies = [...new Set(lines.map((l) => l.currency))].sort();
  const totals = currencies.map((currency) => {
    const mine = lines.filter((l) => l.currency === currency);
    const places = minorUnits(currency);
    return {
      currency,
      base: sum(mine.map((l) => l.base)),
      share: format(sum(mine.map((l) => l.share)), places),
    };
  });
  return {
    object: "partner_statement" as const,
    partner_id: partner.id,
    month,
    revenue_share: rate,
    basis,
    lines,
    totals,
  };
}

const TenantParams = z.object({ id: Uuid, tenant: Uuid });

export function partnerSpecs(options: { db: Db }): AnyAdminRoute[] {
  const { db } = options;
  return [
    adminRoute({
      method: "GET",
      path: "/partners",
      operationId: "listPartners",
      summary: "The installation's partners",
      description: "Every partner, by name, with the tenants each referred.",
      tag: TAG,
      staffRole: "platform",
      response: {
        status: 200,
        description: "The partners.",
        schema: z.object({ data: z.array(Partner) }).meta({ id: "PartnerList" }),
      },
      handler: async () => {
        const rows = await db.asService(
          async (tx) =>
            (await tx.query<PartnerRow>(`${SELECT} where p.tenant_id is null order by p.name, p.id`)).rows,
          { readOnly: true },
        );
        return { data: rows.map(out) };
      },
    }),
    adminRoute({
      method: "POST",
      path: "/partners",
      operationId: "createPartner",
      summary: "Add a partner",
      tag: TAG,
      staffRole: "platform",
      body: NewPartner,
      response: { status: 201, description: "The partner.", schema: Partner },
      handler: async ({ body, reply }) => {
        const row = await db.asService(async (tx) => {
          const id = (
            await tx.query<{ id: string }>(
              `insert into internal.partners (name, kind, contact_email, revenue_share)
               values ($1, $2, $3, $4::numeric) returning id`,
              [body.name, body.kind, body.contact_email?.toLowerCase() ?? null, body.revenue_share],
            )
          ).rows[0]?.id as string;
          return partnerById(tx, id);
        });
        reply.status(201);
        return out(row);
      },
    }),
    adminRoute({
      method: "GET",
      path: "/partners/{id}",
      operationId: "getPartner",
      summary: "A partner, with the tenants it referred",
      tag: TAG,
      staffRole: "platform",
      params: IdParams,
      response: { status: 200, description: "The partner.", schema: Partner },
      errors: [404],
      handler: async ({ params }) =>
        out(await db.asService((tx) => partnerById(tx, params.id), { readOnly: true })),
    }),
    adminRoute({
      method: "PATCH",
      path: "/partners/{id}",
      operationId: "updatePartner",
      summary: "Change a partner",
      description:
        "A new revenue_share applies to every statement computed after the change, past months' too.",
      tag: TAG,
      staffRole: "platform",
      params: IdParams,
      body: PartnerPatch,
      response: { status: 200, description: "The partner.", schema: Partner },
      errors: [404],
      handler: async ({ params, body }) =>
        out(
          await db.asService(async (tx) => {
            await partnerById(tx, params.id);
            await tx.query(
              `update internal.partners set name = coalesce($2, name), kind = coalesce($3, kind),
                 contact_email = case when $4::boolean then $5 else contact_email end,
                 revenue_share = coalesce($6::numeric, revenue_share)
               where id = $1`,
              [
                params.id,
                body.name ?? null,
                body.kind ?? null,
                body.contact_email !== undefined,
                body.contact_email?.toLowerCase() ?? null,
                body.revenue_share ?? null,
              ],
            );
            return partnerById(tx, params.id);
          }),
        ),
    }),
    adminRoute({
      method: "DELETE",
      path: "/partners/{id}",
      operationId: "deletePartner",
      summary: "Remove a partner that has no tenants",
      tag: TAG,
      staffRole: "platform",
      params: IdParams,
      response: {
        status: 200,
        description: "Removed.",
        schema: z
          .object({ id: Uuid, object: z.literal("partner"), deleted: z.literal(true) })
          .meta({ id: "DeletedPartner" }),
      },
      errors: [404, 409],
      handler: async ({ params }) => {
        await db.asService(async (tx) => {
          const partner = await partnerById(tx, params.id);
          if (partner.tenants.length > 0) {
            throw new HttpError(
              409,
              "partner_has_tenants",
              `partner ${params.id} still has ${partner.tenants.length} tenant(s): detach them first`,
              "id",
            );
          }
          await tx.query("delete from internal.partners where id = $1", [params.id]);
        });
        return { id: params.id, object: "partner" as const, deleted: true as const };
      },
    }),
    adminRoute({
      method: "POST",
      path: "/partners/{id}/tenants",
      operationId: "attachPartnerTenant",
      summary: "Attach a tenant the partner referred",
      description:
        "From `since` (YYYY-MM, default this month) on, the tenant counts in the partner's statements. " +
        "A tenant has one partner at a time: one attached to another is 409 tenant_has_partner.",
      tag: TAG,
      staffRole: "platform",
      params: IdParams,
      body: z.strictObject({
        tenant: z.string().min(1).max(100).meta({ description: "The tenant's id or slug." }),
        since: z.string().regex(MONTH, "a month as YYYY-MM").optional(),
      }),
      response: { status: 200, description: "The partner.", schema: Partner },
      errors: [404, 409],
      handler: async ({ params, body }) =>
        out(
          await db.asService(async (tx) => {
            await partnerById(tx, params.id);
            const tenant = (
              await tx.query<{ id: string }>(
                "select id from internal.tenants where id::text = $1 or slug = $1",
                [body.tenant.toLowerCase()],
              )
            ).rows[0];
            if (!tenant) throw new HttpError(404, "not_found", `no tenant ${body.tenant}`, "tenant");
            const taken = (
              await tx.query<{ partner_id: string }>(
                "select partner_id from internal.partner_tenants where tenant_id = $1",
                [tenant.id],
              )
            ).rows[0];
            if (taken && taken.partner_id !== params.id) {
              throw new HttpError(
                409,
                "tenant_has_partner",
                `tenant ${body.tenant} is attached to partner ${taken.partner_id}: detach it there first`,
                "tenant",
              );
            }
            await tx.query(
              `insert into internal.partner_tenants (tenant_id, partner_id, since)
               values ($1, $2, coalesce($3::date, date_trunc('month', now())::date))
               on conflict (tenant_id) do update set since = excluded.since`,
              [tenant.id, params.id, body.since ? `${body.since}-01` : null],
            );
            return partnerById(tx, params.id);
          }),
        ),
    }),
    adminRoute({
      method: "DELETE",
      path: "/partners/{id}/tenants/{tenant}",
      operationId: "detachPartnerTenant",
      summary: "Detach a tenant from its partner",
      description: "Its fees no longer count in the partner's statements, past months' included.",
      tag: TAG,
      staffRole: "platform",
      params: TenantParams,
      response: { status: 200, description: "The partner.", schema: Partner },
      errors: [404],
      handler: async ({ params }) =>
        out(
          await db.asService(async (tx) => {
            await partnerById(tx, params.id);
            const r = await tx.query(
              "delete from internal.partner_tenants where partner_id = $1 and tenant_id = $2",
              [params.id, params.tenant],
            );
            if (r.rowCount === 0)
              throw new HttpError(
                404,
                "not_found",
                `tenant ${params.tenant} is not this partner's`,
                "tenant",
              );
            return partnerById(tx, params.id);
          }),
        ),
    }),
    adminRoute({
      method: "GET",
      path: "/partners/{id}/statement",
      operationId: "partnerStatement",
      summary: "What a partner is owed for a month",
      description:
        "Per attached tenant and currency: the base (exact) and the partner's share of it (base × revenue_share / 100, " +
        "rounded half away from zero to the currency's minor unit); the totals add up the lines. `basis=invoices` (the " +
        "default): what the installation invoiced the tenant for the month, net of tax and of credit notes against that " +
        "invoice; `basis=distributor_fees`: the tenant's distributor fees of the month in the money ledger, sandbox " +
        "accounts left out. Months before a tenant's `since` do not count.",
      tag: TAG,
      staffRole: "platform",
      params: IdParams,
      query: z.strictObject({
        month: z.string().regex(MONTH, "a month as YYYY-MM").meta({ description: "The month (YYYY-MM)." }),
        basis: z
          .enum(BASES)
          .default("invoices")
          .meta({ description: "What the share is of: `invoices` (default) or `distributor_fees`." }),
      }),
      response: { status: 200, description: "The statement.", schema: Statement },
      errors: [404],
      handler: async ({ params, query }) =>
        db.asService((tx) => partnerStatement(tx, params.id, query.month, query.basis), { readOnly: true }),
    }),
  ];
}
