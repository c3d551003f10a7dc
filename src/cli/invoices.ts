import { readFile, writeFile } from "node:fs/promises";
import type { Command } from "commander";
import { InvalidArgumentError } from "commander";
import { type Cli, choice, integer, notFound, refusal, table, UUID } from "./context.ts";

/** The services behind these commands, loaded when one of them runs. */
const services = async () => ({
  ...(await import("../http/problem.ts")),
  ...(await import("../billing/invoices.ts")),
  ...(await import("../billing/invoice-files.ts")),
});

const pattern = (re: RegExp, what: string) => (value: string) => {
  if (!re.test(value)) throw new InvalidArgumentError(`expected ${what}`);
  return value;
};
const month = pattern(/^\d{4}-(0[1-9]|1[0-2])$/, "a month, YYYY-MM");
const country = pattern(/^[A-Z]{2}$/, "a two-letter country code such as DE");
const currency = pattern(/^[A-Z]{3}$/, "an ISO 4217 code such as EUR");
const vatId = pattern(/^[A-Z]{2}[A-Z0-9]{2,18}$/, "a VAT id such as DE123456789");
const fee = pattern(/^\d{1,12}(\.\d{1,2})?$/, "an amount such as 99.00");
const price = pattern(/^\d{1,10}(\.\d{1,4})?$/, "a price such as 0.25 (up to four decimals)");
const uuid = pattern(UUID, "an invoice id");

/** `backline invoices`: plans and invoices for white-label tenants (docs/operator.md, "Plans and invoices"). */
export function register(program: Command, cli: Cli): void {
  const invoices = program
    .command("invoices")
    .description("plans and invoices for white-label tenants (docs/operator.md, Plans and invoices)");
  const run = (
    fn: (
      s: Awaited<ReturnType<typeof services>>,
      db: Parameters<Parameters<Cli["withDb"]>[0]>[0],
    ) => Promise<void>,
  ) =>
    cli.withDb(async (db) => {
      const s = await services();
      await fn(s, db).catch(refusal(s.HttpError));
    });

  invoices
    .command("issuer")
    .description("show or set the installation's legal details, printed on every invoice")
    .option("--name <legal name>", "the legal name")
    .option("--address <address>", "the postal address, one line")
    .option("--country <code>", "ISO country code", country)
    .option("--vat-id <id>", "the VAT id", vatId)
    .option("--email <address>", "the billing address")
    .option("--prefix <prefix>", "the invoice number's prefix (INV-)")
    .option("--terms <days>", "days to pay (14)", integer(0, 365))
    .option("--bank <details>", "how to pay (bank details)")
    .action(
      async (o: {
        name?: string;
        address?: string;
        country?: string;
        vatId?: string;
        email?: string;
        prefix?: string;
        terms?: number;
        bank?: string;
      }) =>
        run(async (s, db) => {
          const current = await s.getIssuer(db);
          const changed = Object.values(o).some((v) => v !== undefined);
          if (changed) {
            const name = o.name ?? current?.legal_name;
            const address = o.address ?? current?.address;
            const land = o.country ?? current?.country;
            if (!name || !address || !land)
              throw new s.HttpError(
                400,
                "invalid_request",
                "The first time, give --name, --address and --country.",
              );
            const out = await s.setIssuer(db, {
              legal_name: name,
              address,
              country: land,
              vat_id: o.vatId ?? current?.vat_id ?? null,
              email: o.email ?? current?.email ?? null,
              invoice_prefix: o.prefix ?? current?.invoice_prefix ?? "INV-",
              payment_terms_days: o.terms ?? current?.payment_terms_days ?? 14,
              tax_rates: current?.tax_rates ?? {},
              bank_details: o.bank ?? current?.bank_details ?? null,
            });
            cli.output(`${out.legal_name}, ${out.country}${out.vat_id ? `, VAT ${out.vat_id}` : ""}`, out);
            return;
          }
          if (!current) throw notFound("issuer", "(not set: give --name, --address and --country)");
          cli.output(
            `${current.legal_name}, ${current.address}, ${current.country}${current.vat_id ? `, VAT ${current.vat_id}` : ""}; numbers ${current.invoice_prefix}000001…; ${current.payment_terms_days} days to pay`,
            current,
          );
        }),
    );

  invoices
    .command("plans")
    .description("list the plans")
    .action(async () =>
      run(async (s, db) => {
        const plans = await s.listPlans(db);
        cli.output(table(plans as never, ["id", "name", "currency", "monthly_fee"]), plans);
      }),
    );

  invoices
    .command("plan-create")
    .description("make a plan: a monthly fee, what it includes, and the price of each unit past that")
    .requiredOption("--name <name>", "the plan's name")
    .requiredOption("--currency <code>", "its currency", currency)
    .requiredOption("--fee <amount>", "the monthly fee", fee)
    .option("--accounts <n>", "accounts included", integer(0, 2_000_000_000), 0)
    .option("--releases <n>", "releases delivered included", integer(0, 2_000_000_000), 0)
    .option("--tracks <n>", "tracks included", integer(0, 2_000_000_000), 0)
    .option("--storage-gb <n>", "GB of storage included", integer(0, 2_000_000_000), 0)
    .option("--api-calls <n>", "API calls included", integer(0, 2_000_000_000), 0)
    .option("--per-account <price>", "price of each account past them", price, "0")
    .option("--per-release <price>", "price of each release delivered past them", price, "0")
    .option("--per-track <price>", "price of each track past them", price, "0")
    .option("--per-gb <price>", "price of each started GB past them", price, "0")
    .option("--per-1000-calls <price>", "price of each started thousand API calls past them", price, "0")
    .action(
      async (o: {
        name: string;
        currency: string;
        fee: string;
        accounts: number;
        releases: number;
        tracks: number;
        storageGb: number;
        apiCalls: number;
        perAccount: string;
        perRelease: string;
        perTrack: string;
        perGb: string;
        per1000Calls: string;
      }) =>
        run(async (s, db) => {
          const plan = await s.createPlan(db, {
            name: o.name,
            currency: o.currency,
            monthly_fee: o.fee,
            included_accounts: o.accounts,
            included_releases: o.releases,
            included_tracks: o.tracks,
            included_storage_gb: o.storageGb,
            included_api_calls: o.apiCalls,
            price_per_account: o.perAccount,
            price_per_release: o.perRelease,
            price_per_track: o.perTrack,
            price_per_storage_gb: o.perGb,
            price_per_1000_api_calls: o.per1000Calls,
          });
          cli.output(`plan ${plan.name} ${plan.id}`, plan);
        }),
    );

  invoices
    .command("assign")
    .description("give a tenant a plan and its legal details")
    .requiredOption("--tenant <tenant>", "the tenant (id or slug)")
    .requiredOption("--plan <plan>", "the plan (id or name)")
    .requiredOption("--name <legal name>", "the tenant's legal name")
    .requiredOption("--address <address>", "its postal address, one line")
    .requiredOption("--country <code>", "its ISO country code", country)
    .option("--vat-id <id>", "its VAT id", vatId)
    .option("--email <address>", "where its invoices go")
    .action(
      async (o: {
        tenant: string;
        plan: string;
        name: string;
        address: string;
        country: string;
        vatId?: string;
        email?: string;
      }) =>
        cli.withDb(async (db) => {
          const s = await services();
          const tenant = await cli.requireTenant(db, o.tenant);
          const plans = await s.listPlans(db);
          const plan = plans.find((p) => p.id === o.plan || p.name === o.plan);
          if (!plan) throw notFound("plan", o.plan);
          const out = await s
            .setTenantBilling(db, tenant.id, {
              plan_id: plan.id,
              legal_name: o.name,
              address: o.address,
              country: o.country,
              vat_id: o.vatId ?? null,
              email: o.email ?? null,
            })
            .catch(refusal(s.HttpError));
          cli.output(`${tenant.slug}: plan ${plan.name}`, out);
        }),
    );

  invoices
    .command("usage")
    .description("what a tenant used in a month, and the invoice it would get (nothing is issued)")
    .requiredOption("--tenant <tenant>", "the tenant (id or slug)")
    .requiredOption("--month <YYYY-MM>", "the month", month)
    .action(async (o: { tenant: string; month: string }) =>
      cli.withDb(async (db) => {
        const s = await services();
        const tenant = await cli.requireTenant(db, o.tenant);
        const out = await s.previewInvoice(db, tenant.id, o.month).catch(refusal(s.HttpError));
        const u = out.usage;
        cli.output(
          [
            `${o.month}: ${u.accounts} accounts, ${u.releases_delivered} releases delivered, ${u.tracks} tracks, ${u.storage_bytes} bytes stored, ${u.api_calls} API calls`,
            table(out.lines as never, ["description", "quantity", "unit_price", "amount"]),
            `subtotal ${out.subtotal}, ${out.tax_rule} ${out.tax_rate}% ${out.tax}, total ${out.total} ${out.currency}`,
          ].join("\n"),
          out,
        );
      }),
    );

  invoices
    .command("issue")
    .description("issue a tenant's invoice for a month that is over (or every tenant's with --all)")
    .option("--tenant <tenant>", "the tenant (id or slug)")
    .option("--all", "every tenant with a plan that has no invoice for the month")
    .option("--month <YYYY-MM>", "the month (with --all: last month by default)", month)
    .action(async (o: { tenant?: string; all?: boolean; month?: string }) =>
      cli.withDb(async (db) => {
        const s = await services();
        if (o.all) {
          const out = await s.issueDueInvoices(db, o.month ?? s.previousMonth(), "cli:invoices issue");
          cli.output(
            `${out.month}: issued ${out.issued.join(", ") || "none"}${out.failed.map((f) => `\n${f.tenant_id}: ${f.code} ${f.message}`).join("")}`,
            out,
          );
          return;
        }
        if (!o.tenant || !o.month) throw new InvalidArgumentError("give --tenant and --month, or --all");
        const tenant = await cli.requireTenant(db, o.tenant);
        const out = await s
          .issueInvoice(db, tenant.id, o.month, { by: "cli:invoices issue" })
          .catch(refusal(s.HttpError));
        cli.output(`${out.number}: ${out.total} ${out.currency}, due ${out.due_on}`, out);
      }),
    );

  invoices
    .command("list")
    .description("invoices, newest first (overdue: past due and not paid in full)")
    .option("--tenant <tenant>", "one tenant's (id or slug)")
    .option("--status <status>", "open, overdue or paid", choice(["open", "overdue", "paid"] as const))
    .action(async (o: { tenant?: string; status?: "open" | "overdue" | "paid" }) =>
      cli.withDb(async (db) => {
        const s = await services();
        const tenantId = o.tenant ? (await cli.requireTenant(db, o.tenant)).id : undefined;
        const rows = await s.listInvoices(db, { tenantId, status: o.status });
        cli.output(
          table(rows.map((r) => ({ ...r, customer: r.customer.legal_name })) as never, [
            "id",
            "number",
            "month",
            "customer",
            "total",
            "currency",
            "due_on",
            "balance",
            "status",
          ]),
          rows,
        );
      }),
    );

  invoices
    .command("show")
    .description("an invoice; --pdf or --csv write it to a file")
    .argument("<id>", "the invoice's id", uuid)
    .option("--pdf <file>", "write the PDF here")
    .option("--csv <file>", "write the CSV here")
    .action(async (id: string, o: { pdf?: string; csv?: string }) =>
      cli.withDb(async (db) => {
        const s = await services();
        const invoice = await s.getInvoice(db, id);
        if (!invoice) throw notFound("invoice", id);
        if (o.pdf) await writeFile(cli.path(o.pdf), await s.invoicePdf(invoice));
        if (o.csv) await writeFile(cli.path(o.csv), s.invoiceCsv(invoice));
        cli.output(
          `${invoice.number} ${invoice.month} ${invoice.customer.legal_name}: ${invoice.total} ${invoice.currency} (${invoice.status}, ${invoice.balance} due by ${invoice.due_on})`,
          invoice,
        );
      }),
    );

  invoices
    .command("pay")
    .description("record a payment received for an invoice")
    .argument("<id>", "the invoice's id", uuid)
    .requiredOption("--amount <amount>", "the amount, in the invoice's currency", fee)
    .option("--ref <reference>", "the bank's or provider's reference (recorded once)")
    .option("--paid-at <time>", "when it was paid (ISO 8601; now)")
    .option("--note <text>", "a note")
    .action(async (id: string, o: { amount: string; ref?: string; paidAt?: string; note?: string }) =>
      run(async (s, db) => {
        const out = await s.recordPayment(db, id, {
          amount: o.amount,
          external_ref: o.ref,
          paid_at: o.paidAt,
          note: o.note,
          by: "cli:invoices pay",
        });
        cli.output(`${out.invoice_number}: ${out.amount} ${out.currency} recorded`, out);
      }),
    );

  invoices
    .command("credit")
    .description("correct an issued invoice with a credit note (a net amount, at the invoice's tax rate)")
    .argument("<id>", "the invoice's id", uuid)
    .requiredOption("--amount <amount>", "the net amount credited", fee)
    .requiredOption("--reason <text>", "why")
    .option("--pdf <file>", "write the credit note's PDF here")
    .action(async (id: string, o: { amount: string; reason: string; pdf?: string }) =>
      run(async (s, db) => {
        const note = await s.issueCreditNote(db, id, {
          amount: o.amount,
          reason: o.reason,
          by: "cli:invoices credit",
        });
        if (o.pdf) {
          const invoice = await s.getInvoice(db, id);
          if (invoice)
            await writeFile(
              cli.path(o.pdf),
              await s.invoicePdf(s.creditNoteDocument(invoice, note), {
                creditNote: { corrects: invoice.number },
              }),
            );
        }
        cli.output(`${note.number} credits ${note.total} ${note.currency} on ${note.invoice_number}`, note);
      }),
    );

  invoices
    .command("import-payments")
    .description("record the payments in a provider's export (Stripe's charges CSV)")
    .argument("<file>", "the export")
    .option(
      "--format <format>",
      "the export's format",
      choice(["stripe_charges_csv"] as const),
      "stripe_charges_csv",
    )
    .action(async (file: string) =>
      run(async (s, db) => {
        const out = await s.importStripeCharges(
          db,
          await readFile(cli.path(file), "utf8"),
          "cli:invoices import-payments",
        );
        cli.output(
          `${out.imported.length} recorded, ${out.duplicates} already recorded, ${out.skipped.length} skipped${out.skipped.map((k) => `\nrow ${k.row}: ${k.reason}`).join("")}`,
          out,
        );
      }),
    );
}
