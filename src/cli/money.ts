import { writeFile } from "node:fs/promises";
import type { Command } from "commander";
import { InvalidArgumentError } from "commander";
import { type Cli, choice, notFound, refusal, table, UsageError, UUID } from "./context.ts";

/** The services behind these commands, loaded when one of them runs. */
const services = async () => ({
  ...(await import("../mail/mailer.ts")),
  ...(await import("../money/errors.ts")),
  ...(await import("../money/operator.ts")),
  ...(await import("../money/payees.ts")),
  ...(await import("../money/payouts.ts")),
  ...(await import("../money/statements.ts")),
  ...(await import("../money/statement-csv.ts")),
  ...(await import("../money/statement-pdf.ts")),
});

const PROVIDERS = ["paypal", "wise"] as const;

const pattern = (re: RegExp, what: string) => (value: string) => {
  if (!re.test(value)) throw new InvalidArgumentError(`expected ${what}`);
  return value;
};
const month = pattern(/^\d{4}-(0[1-9]|1[0-2])$/, "a month, YYYY-MM");
const currency = pattern(/^[A-Z]{3}$/, "an ISO 4217 code such as EUR");
const percent = (value: string) => {
  if (value === "none") return value;
  if (!/^\d{1,3}(\.\d{1,4})?$/.test(value) || Number(value) > 100)
    throw new InvalidArgumentError("expected a percentage 0 to 100 with up to four decimals, or none");
  return value;
};
const amount = pattern(/^\d{1,15}(\.\d{1,2})?$/, "an amount such as 500.00");
const rate = pattern(/^\d{1,12}(\.\d{1,12})?$/, "a rate such as 1.0825");
const uuid = (what: string) => pattern(UUID, `a ${what} id`);

/** `backline money`: payees, the ledger, statements and payouts (docs/payouts.md). */
export function register(program: Command, cli: Cli): void {
  const money = program
    .command("money")
    .description("splits, the ledger, statements and payouts (docs/payouts.md)");
  const tenantOption = (c: Command) => c.requiredOption("--tenant <tenant>", "the tenant (id or slug)");
  const run = (
    fn: (
      s: Awaited<ReturnType<typeof services>>,
      db: Parameters<Parameters<Cli["withDb"]>[0]>[0],
      tenantId: string,
      config: Parameters<Parameters<Cli["withDb"]>[0]>[1],
    ) => Promise<void>,
    tenant: string,
  ) =>
    cli.withDb(async (db, config) => {
      const s = await services();
      const t = await cli.requireTenant(db, tenant);
      await fn(s, db, t.id, config).catch(refusal(s.MoneyError));
    });

  tenantOption(money.command("settings").description("show or change the tenant's money settings"))
    .option("--currency <code>", "the default statement currency", currency)
    .option("--threshold <amount>", "the least a payee can ask to be paid", amount)
    .option("--aal2 <yes|no>", "whether asking for a payout needs a second factor", choice(["yes", "no"]))
    .action(async (o: { tenant: string; currency?: string; threshold?: string; aal2?: string }) =>
      run(async (s, db, tenantId) => {
        const changed = o.currency || o.threshold || o.aal2;
        const out = changed
          ? await s.updateMoneySettings(db, tenantId, {
              ...(o.currency ? { default_currency: o.currency } : {}),
              ...(o.threshold ? { payout_threshold: o.threshold } : {}),
              ...(o.aal2 ? { payout_requires_aal2: o.aal2 === "yes" } : {}),
            })
          : await s.moneySettings(db, tenantId);
        cli.output(
          `currency ${out.default_currency}; payout threshold ${out.payout_threshold}; second factor for payouts: ${out.payout_requires_aal2 ? "yes" : "no"}`,
          out,
        );
      }, o.tenant),
    );

  tenantOption(money.command("fee").description("set the distributor's fee (percent of the store's net)"))
    .option("--account <id>", "only this account", uuid("account"))
    .option("--release <id>", "only this release (with --account)", uuid("release"))
    .requiredOption("--rate <percent>", "the fee in percent, or none to remove it", percent)
    .action(async (o: { tenant: string; account?: string; release?: string; rate: string }) => {
      if (o.release && !o.account) throw new UsageError("--release needs --account");
      await run(async (s, db, tenantId) => {
        await s.setFee(
          db,
          tenantId,
          { accountId: o.account, releaseId: o.release },
          o.rate === "none" ? null : o.rate,
        );
        const fees = await s.listFees(db, tenantId);
        cli.output(table(fees as never, ["account_id", "release_id", "rate"]), { data: fees });
      }, o.tenant);
    });

  tenantOption(money.command("rate").description("set an exchange rate for a period's statements"))
    .requiredOption("--period <YYYY-MM>", "the accounting period", month)
    .requiredOption("--from <code>", "the currency earned", currency)
    .requiredOption("--to <code>", "the payee's currency", currency)
    .requiredOption("--rate <rate>", "how much of --to one unit of --from is", rate)
    .option("--import <id>", "only for this royalty import", uuid("import"))
    .action(
      async (o: {
        tenant: string;
        period: string;
        from: string;
        to: string;
        rate: string;
        import?: string;
      }) => {
        if (o.from === o.to) throw new UsageError("--from and --to are the same currency");
        await run(async (s, db, tenantId) => {
          await s.setExchangeRate(db, tenantId, {
            period: o.period,
            from: o.from,
            to: o.to,
            rate: o.rate,
            import_id: o.import,
          });
          cli.output(`1 ${o.from} = ${o.rate} ${o.to} for ${o.period}`, { ok: true });
        }, o.tenant);
      },
    );

  tenantOption(
    money.command("recoupable").description("record an advance or expense to recoup before payees are paid"),
  )
    .requiredOption("--account <id>", "the account", uuid("account"))
    .option("--release <id>", "only from this release's earnings", uuid("release"))
    .requiredOption("--kind <kind>", "advance or expense", choice(["advance", "expense"]))
    .requiredOption("--currency <code>", "its currency", currency)
    .requiredOption("--amount <amount>", "how much", amount)
    .requiredOption("--description <text>", "what it was")
    .option("--cross", "a release's advance recouped from the account's other releases too")
    .action(
      async (o: {
        tenant: string;
        account: string;
        release?: string;
        kind: "advance" | "expense";
        currency: string;
        amount: string;
        description: string;
        cross?: boolean;
      }) =>
        run(async (s, db, tenantId) => {
          const r = await s.addRecoupable(
            db,
            tenantId,
            {
              account_id: o.account,
              release_id: o.release,
              kind: o.kind,
              currency: o.currency,
              amount: o.amount,
              description: o.description,
              cross_recoup: o.cross === true,
            },
            "cli",
          );
          cli.output(`Recorded ${r.kind} ${r.id}: ${r.amount} ${r.currency} (${r.unrecouped} to recoup)`, r);
        }, o.tenant),
    );

  tenantOption(money.command("periods").description("accounting periods: open or approved")).action(
    async (o: { tenant: string }) =>
      run(async (s, db, tenantId) => {
        const rows = await s.listPeriods(db, tenantId);
        cli.output(table(rows as never, ["period", "status", "payees", "statements", "approved_at"]), {
          data: rows,
        });
      }, o.tenant),
  );

  tenantOption(money.command("approve").description("approve a period: each payee's statement, written once"))
    .requiredOption("--period <YYYY-MM>", "the period", month)
    .action(async (o: { tenant: string; period: string }) =>
      run(async (s, db, tenantId, config) => {
        // Each statement is mailed to its payee (or kept in the local mailbox without SMTP_URL).
        const mailer = new s.Mailer(db, { smtpUrl: config.mail.smtpUrl, from: config.mail.from });
        const r = await s
          .approvePeriod(db, tenantId, o.period, "cli", { mailer, publicUrl: config.publicUrl })
          .finally(() => mailer.close());
        cli.output(
          `Approved ${r.period}: ${r.statements.length} statement${r.statements.length === 1 ? "" : "s"}\n${table(r.statements as never, ["id", "payee_id", "currency", "closing_balance"])}`,
          r,
        );
      }, o.tenant),
    );

  tenantOption(
    money.command("statement").description("a payee's statement for a period (draft until approved)"),
  )
    .requiredOption("--payee <id>", "the payee", uuid("payee"))
    .requiredOption("--period <YYYY-MM>", "the period", month)
    .option("--format <format>", "json, csv or pdf", choice(["json", "csv", "pdf"]), "json")
    .option("--out <file>", "write it to this file (pdf needs one)")
    .action(async (o: { tenant: string; payee: string; period: string; format: string; out?: string }) => {
      if (o.format === "pdf" && !o.out) throw new UsageError("--format pdf needs --out <file>");
      await run(async (s, db, tenantId) => {
        const doc = await db.asService(async (tx) => {
          const mine = (
            await tx.query("select 1 from internal.payees where id = $1 and tenant_id = $2", [
              o.payee,
              tenantId,
            ])
          ).rowCount;
          return mine ? s.statementFor(tx, o.payee, o.period) : undefined;
        });
        if (!doc) throw notFound("statement of payee", `${o.payee} for ${o.period}`);
        const body =
          o.format === "pdf"
            ? await s.statementPdf(doc, { name: doc.tenant_name })
            : o.format === "csv"
              ? s.statementCsv(doc)
              : `${JSON.stringify(doc, null, 2)}\n`;
        if (o.out) {
          await writeFile(cli.path(o.out), body);
          cli.output(`Wrote the ${doc.status} statement of ${doc.period} to ${o.out}`, {
            file: cli.path(o.out),
          });
        } else cli.io.stdout(String(body));
      }, o.tenant);
    });

  tenantOption(money.command("payees").description("payees, with their tax form's status"))
    .option("--account <id>", "only this account's", uuid("account"))
    .action(async (o: { tenant: string; account?: string }) =>
      run(async (s, db, tenantId) => {
        const list = await db.asService((tx) => s.listPayees(tx, { tenantId, accountId: o.account }));
        cli.output(
          table(
            list.map((p) => ({ ...p, tax: `${p.tax.form ?? "-"} ${p.tax.status}` })),
            ["id", "account_id", "kind", "name", "email", "currency", "tax"],
          ),
          { data: list },
        );
      }, o.tenant),
    );

  tenantOption(money.command("tax-review").description("verify or reject a payee's tax form"))
    .requiredOption("--payee <id>", "the payee", uuid("payee"))
    .requiredOption("--status <status>", "verified or rejected", choice(["verified", "rejected"]))
    .option(
      "--withholding <percent>",
      "the rate withheld from payouts (default 0 for W-9, 30 for W-8)",
      percent,
    )
    .action(
      async (o: { tenant: string; payee: string; status: "verified" | "rejected"; withholding?: string }) =>
        run(async (s, db, tenantId) => {
          const p = await s.reviewTaxForm(db, tenantId, o.payee, {
            status: o.status,
            withholding_rate: o.withholding,
          });
          cli.output(
            `${p.name ?? p.id}: ${p.tax.form} ${p.tax.status}, withholding ${p.tax.withholding_rate}%`,
            p,
          );
        }, o.tenant),
    );

  tenantOption(money.command("payouts").description("payout requests and payments"))
    .option(
      "--status <status>",
      "requested, approved, paid or failed",
      choice(["requested", "approved", "paid", "failed"]),
    )
    .action(async (o: { tenant: string; status?: string }) =>
      run(async (s, db, tenantId) => {
        const rows = await s.listPayouts(db, tenantId, { status: o.status });
        cli.output(
          table(rows as never, [
            "id",
            "payee_id",
            "status",
            "currency",
            "amount",
            "withholding",
            "net_amount",
          ]),
          {
            data: rows,
          },
        );
      }, o.tenant),
    );

  const batch = money
    .command("batch")
    .description("payout batches: approve, export for the provider, settle");
  tenantOption(batch.command("approve").description("approve the open requests of one provider as a batch"))
    .requiredOption("--provider <name>", PROVIDERS.join(" or "), choice(PROVIDERS))
    .option("--currency <code>", "the batch's currency (default: the oldest open request's)", currency)
    .action(async (o: { tenant: string; provider: (typeof PROVIDERS)[number]; currency?: string }) =>
      run(async (s, db, tenantId) => {
        const b = await s.approveBatch(db, tenantId, o.provider, "cli", undefined, o.currency);
        cli.output(
          `Batch ${b.id}: ${b.payouts} payout${b.payouts === 1 ? "" : "s"} through ${b.provider}; ${b.currencies.map((c) => `${c.net_amount} ${c.currency}`).join(", ")}`,
          b,
        );
      }, o.tenant),
    );
  tenantOption(batch.command("export").description("write the batch as the provider's bulk-upload CSV"))
    .requiredOption("--batch <id>", "the batch", uuid("batch"))
    .requiredOption("--out <file>", "the file to write")
    .action(async (o: { tenant: string; batch: string; out: string }) =>
      run(async (s, db, tenantId) => {
        const { file } = await s.exportBatch(db, tenantId, o.batch);
        await writeFile(cli.path(o.out), file.body);
        const skipped = file.skipped.map((x) => `  skipped ${x.payout_id}: ${x.reason}`);
        cli.output([`Wrote ${file.fileName} to ${o.out}`, ...skipped].join("\n"), {
          file: cli.path(o.out),
          skipped: file.skipped,
        });
      }, o.tenant),
    );
  tenantOption(batch.command("settle").description("mark a batch paid; name the lines that failed"))
    .requiredOption("--batch <id>", "the batch", uuid("batch"))
    .option("--failed <payout:reason...>", "a payout that failed, and why")
    .option("--reference <text>", "the provider's reference for the batch")
    .action(async (o: { tenant: string; batch: string; failed?: string[]; reference?: string }) => {
      const failed = (o.failed ?? []).map((f) => {
        const [payout_id, ...reason] = f.split(":");
        if (!payout_id || !UUID.test(payout_id) || reason.join(":").trim() === "")
          throw new UsageError(`--failed ${f}: expected <payout id>:<reason>`);
        return { payout_id, reason: reason.join(":").trim() };
      });
      await run(async (s, db, tenantId) => {
        const b = await s.settleBatch(db, tenantId, o.batch, failed, o.reference);
        cli.output(`Batch ${b.id} is ${b.status}`, b);
      }, o.tenant);
    });

  tenantOption(
    money
      .command("ledger")
      .description("the ledger's trial balance: per currency, each holder, zero in total"),
  ).action(async (o: { tenant: string }) =>
    run(async (s, db, tenantId) => {
      const rows = await s.ledgerTrialBalance(db, tenantId);
      cli.output(
        table(
          rows.map((r) => ({ ...r, holder: r.holder ?? "(total)" })),
          ["currency", "holder", "balance", "entries"],
        ),
        { data: rows },
      );
    }, o.tenant),
  );
}
