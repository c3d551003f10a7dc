import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import type { Db } from "../src/db/db.ts";
import type { Claims, Tx } from "../src/db/types.ts";
import { Mailer } from "../src/mail/mailer.ts";
import { MoneyError } from "../src/money/errors.ts";
import { addRecoupable, setExchangeRate, setFee, updateMoneySettings } from "../src/money/operator.ts";
import { balances, fileTaxForm, reviewTaxForm, setPayoutMethod } from "../src/money/payees.ts";
import { approveBatch, exportBatch, requestPayout, settleBatch } from "../src/money/payouts.ts";
import { approvePeriod, statementFor } from "../src/money/statements.ts";
import { importRoyalties } from "../src/royalties/import.ts";
import { voidImport } from "../src/royalties/void.ts";
import { SecretBox } from "../src/secrets/box.ts";
import type { Account, Tenant } from "../src/tenancy/tenants.ts";
import { WebhookDispatcher } from "../src/webhooks/dispatcher.ts";
import { WEBHOOK_EVENTS } from "../src/webhooks/events.ts";
import { newSigningSecret } from "../src/webhooks/secrets.ts";
import { describeEachEngine } from "./support/db.ts";
import { reportFile, seedDeliveredRelease } from "./support/royalties.ts";
import { seedAccount, seedTenant, userClaims } from "./support/seed.ts";
import { type Route, WebhookReceiver } from "./support/webhook-receiver.ts";

/**
 * The whole money loop of docs/payouts.md's worked example, on each engine: an imported report's
 * lines reach each payee's balance by the splits (after the distributor's fee and the recoupment
 * of an expense), the period's statements are approved (EUR converted at the rate set), a payee
 * who signed up with the address a split named requests a payout, the operator approves and
 * exports a batch and settles it with one line failed, and a void reverses the allocation in the
 * next period — the ledger balancing to zero in every currency after each step. The figures are
 * the ones docs/payouts.md prints.
 */

const REPORT = [
  "reporting_period,sale_period,store,territory,upc,isrc,usage_type,units,gross,fees,net,currency",
  "2026-11,2026-10,spotify,US,012345000010,QZABC2600001,stream,1000,5.00,1.50,3.50,USD",
  "2026-11,2026-10,apple_music,GB,012345000010,QZABC2600001,download,3,2.97,0.89,2.08,USD",
  "2026-11,2026-10,spotify,US,012345000010,QZABC2600002,stream,500,2.00,0.60,1.40,USD",
  "2026-11,2026-10,deezer,FR,012345000010,QZABC2600001,stream,100,0.33,0.1,0.123456789012,EUR",
  "",
].join("\n");

describeEachEngine("money: from a royalty import to a payout", (t) => {
  let db: Db;
  let tenant: Tenant;
  let account: Account;
  let owner: { id: string; email: string; tenant_id: string };
  let ana: { id: string; email: string; tenant_id: string };
  let importId: string;
  const box = new SecretBox(Buffer.alloc(32, 7));
  let receiver: WebhookReceiver;
  let hook: Route;
  after(async () => {
    await receiver?.close();
  });
  const period = () =>
    t().db.asService(
      async (tx) =>
        (await tx.query<{ p: string }>("select to_char(now(), 'YYYY-MM') as p")).rows[0]?.p as string,
    );

  const asUser = <T>(user: { id: string; tenant_id: string }, fn: (tx: Tx) => Promise<T>, aal = "aal2") =>
    db.withRequestContext({ ...userClaims(user as never), aal } as Claims, fn);
  const rows = <T extends Record<string, unknown>>(sql: string, params: unknown[] = []) =>
    db.asService(async (tx) => (await tx.query<T>(sql, params)).rows);
  const payeeOf = async (email: string | null) =>
    (
      await rows<{ id: string }>(
        "select id from internal.payees where account_id = $1 and email is not distinct from $2",
        [account.id, email],
      )
    )[0]?.id as string;
  const balanceOf = async (payeeId: string) =>
    Object.fromEntries(
      (
        await rows<{ currency: string; b: string }>(
          "select currency, trim_scale(sum(amount))::text as b from internal.ledger_entries where payee_id = $1 group by currency",
          [payeeId],
        )
      ).map((r) => [r.currency, r.b]),
    );
  const assertBalanced = async () => {
    const off = await rows(
      "select txn_id, currency, sum(amount) from internal.ledger_entries where tenant_id = $1 group by txn_id, currency having sum(amount) <> 0",
      [tenant.id],
    );
    assert.deepEqual(off, []);
  };

  before(async () => {
    db = t().db;
    tenant = await seedTenant(db);
    account = await seedAccount(db, tenant, "Lantern Records");
    owner = await db.asService(
      async (tx) =>
        (
          await tx.query<{ id: string; email: string; tenant_id: string }>(
            "insert into internal.users (tenant_id, email, email_confirmed_at, email_proven_at) values ($1, 'june@lantern.test', now(), now()) returning id, email, tenant_id",
            [tenant.id],
          )
        ).rows[0] as { id: string; email: string; tenant_id: string },
    );
    await db.asService((tx) =>
      tx.query(
        "insert into internal.memberships (tenant_id, user_id, account_id, role) values ($1, $2, $3, 'owner')",
        [tenant.id, owner.id, account.id],
      ),
    );
    const release = await seedDeliveredRelease(
      db,
      account.id,
      { title: "Night Drive", upc: "012345000010" },
      [
        { title: "Night Drive", isrc: "QZABC2600001", duration: 200, track_number: 1 },
        { title: "Neon", isrc: "QZABC2600002", duration: 180, track_number: 2 },
      ],
    );
    // The first track's splits, as both APIs write them (one share given as an exact decimal string).
    await db.asService((tx) =>
      tx.query("update public.tracks set splits = $2 where id = $1", [
        release.tracks[0]?.id,
        JSON.stringify([
          { name: "June Park", email: "June@Lantern.test", share: 60 },
          { name: "Ana Lima", email: "ana@example.org", share: "40.00" },
        ]),
      ]),
    );
    // The account's endpoint for the money events, delivered by a real dispatcher to a receiver
    // that verifies each request with the standardwebhooks package.
    receiver = await WebhookReceiver.start();
    hook = receiver.route("money");
    const secret = newSigningSecret();
    hook.secrets.push(secret);
    await db.asService((tx) =>
      tx.query(
        "insert into internal.webhook_endpoints (account_id, url, events, secret_ciphertext) values ($1, $2, $3, $4)",
        [
          account.id,
          hook.url,
          ["statement.ready", "payout.requested", "payout.paid", "payout.failed"],
          box.encrypt(secret),
        ],
      ),
    );
    await setFee(db, tenant.id, {}, "10");
    await addRecoupable(
      db,
      tenant.id,
      {
        account_id: account.id,
        release_id: release.id,
        kind: "expense",
        currency: "USD",
        amount: "1.00",
        description: "Mastering",
      },
      "test",
    );
    const r = await importRoyalties(db, {
      tenantId: tenant.id,
      format: "backline",
      file: reportFile(REPORT),
    });
    assert.equal(r.status, "completed");
    importId = r.report.id;
  });

  test("the import reaches each payee by the splits, after the fee and the expense, to the last digit", async () => {
    const june = await payeeOf("june@lantern.test");
    const anaPayee = await payeeOf("ana@example.org");
    const self = (
      await rows<{ id: string }>(
        "select id from internal.payees where account_id = $1 and kind = 'account'",
        [account.id],
      )
    )[0]?.id as string;
    // apple_music GB 2.08 − fee 0.208 − expense 1.00 = 0.872 (60/40); spotify 3.50 − 0.35 = 3.15; deezer EUR.
    assert.deepEqual(await balanceOf(june), { USD: "2.4132", EUR: "0.06666666606648" });
    assert.deepEqual(await balanceOf(anaPayee), { USD: "1.6088", EUR: "0.04444444404432" });
    // Neon has no splits: the account's own payee.
    assert.deepEqual(await balanceOf(self), { USD: "1.26" });
    const holders = await rows<{ holder: string; currency: string; b: string }>(
      `select holder, currency, trim_scale(sum(amount))::text as b from internal.ledger_entries
       where tenant_id = $1 and holder <> 'payee' group by holder, currency order by currency, holder`,
      [tenant.id],
    );
    assert.deepEqual(holders, [
      { holder: "fees", currency: "EUR", b: "0.0123456789012" },
      { holder: "store", currency: "EUR", b: "-0.123456789012" },
      { holder: "cash", currency: "USD", b: "1" },
      { holder: "fees", currency: "USD", b: "0.698" },
      { holder: "recoupable", currency: "USD", b: "0" },
      { holder: "store", currency: "USD", b: "-6.98" },
    ]);
    await assertBalanced();
    // Allocating again posts nothing.
    const again = await rows<{ n: string }>("select internal.allocate_import($1)::text as n", [importId]);
    assert.equal(again[0]?.n, "0");
  });

  test("the ledger refuses changes and unbalanced transactions", async () => {
    await assert.rejects(
      rows("update internal.ledger_entries set amount = amount + 1 where tenant_id = $1", [tenant.id]),
      /append-only/,
    );
    await assert.rejects(
      rows("delete from internal.ledger_entries where tenant_id = $1", [tenant.id]),
      /append-only/,
    );
    await assert.rejects(
      rows(
        `insert into internal.ledger_entries (tenant_id, txn_id, txn_kind, holder, currency, amount, period)
         values ($1, gen_random_uuid(), 'allocation', 'fees', 'USD', 1, '2026-01-01')`,
        [tenant.id],
      ),
      /does not balance/,
    );
  });

  test("approving the period converts EUR at the rate set and states each payee's figures by the one rule", async () => {
    const p = await period();
    await assert.rejects(
      approvePeriod(db, tenant.id, p, "test"),
      (e: unknown) => e instanceof MoneyError && e.code === "rate_missing",
    );
    await setExchangeRate(db, tenant.id, { period: p, from: "EUR", to: "USD", rate: "1.1" });
    const mailer = new Mailer(db, { smtpUrl: undefined, from: "Backline <no-reply@backline.local>" });
    const report = await approvePeriod(db, tenant.id, p, "test", {
      mailer,
      publicUrl: "https://backline.example",
    });
    const june = await payeeOf("june@lantern.test");
    const anaPayee = await payeeOf("ana@example.org");
    const byPayee = Object.fromEntries(report.statements.map((s) => [s.payee_id, s.closing_balance]));
    assert.equal(byPayee[june], "2.49");
    assert.equal(byPayee[anaPayee], "1.66");
    const doc = await db.asService((tx) => statementFor(tx, anaPayee, p));
    assert.ok(doc);
    assert.equal(doc.status, "approved");
    // Each payee with an address gets their statement by mail, with its figures and a link to it
    // in the tenant's portal; the statement records that it was mailed.
    const mails = await rows<{ to_address: string; subject: string; text_body: string }>(
      "select to_address, subject, text_body from internal.mail_outbox where tenant_id = $1 and kind = 'statement.ready' order by to_address",
      [tenant.id],
    );
    assert.deepEqual(
      mails.map((m) => m.to_address),
      ["ana@example.org", "june@lantern.test"],
    );
    const [toAna] = mails;
    assert.match(
      toAna?.subject ?? "",
      /^Your royalty statement for [A-Z][a-z]+ 20[0-9]{2} from Lantern Records$/,
    );
    assert.match(toAna?.text_body ?? "", /^Closing balance: 1\.66 USD$/m);
    assert.ok(
      toAna?.text_body.includes(
        `https://backline.example/portal/t/${tenant.slug}/money/statements/${doc.id}`,
      ),
      toAna?.text_body,
    );
    const emailed = await rows<{ emailed: boolean }>(
      "select emailed_at is not null as emailed from internal.statements where id = $1",
      [doc.id],
    );
    assert.equal(emailed[0]?.emailed, true);
    assert.deepEqual(
      doc.earnings.map((e) => [e.store, e.original_currency, e.rate, e.earned, e.fees, e.recouped, e.net]),
      [
        ["apple_music", "USD", null, "0.83", "0.08", "0.40", "0.35"],
        ["deezer", "EUR", "1.1", "0.06", "0.01", "0.00", "0.05"],
        ["spotify", "USD", null, "1.40", "0.14", "0.00", "1.26"],
      ],
    );
    assert.equal(doc.opening_balance, "0.00");
    assert.equal(doc.totals.net, "1.66");
    assert.equal(doc.closing_balance, "1.66");
    // Approved: the database refuses to change it, and a second approval is refused.
    await assert.rejects(
      rows("update internal.statements set closing_balance = 0 where payee_id = $1", [anaPayee]),
      /never changes/,
    );
    await assert.rejects(
      approvePeriod(db, tenant.id, p, "test"),
      (e: unknown) => e instanceof MoneyError && e.code === "period_approved",
    );
    await assertBalanced();
    // Converted: every payee balance is in USD now.
    assert.deepEqual(await balanceOf(anaPayee), { USD: "1.657688888448752", EUR: "0" });
  });

  test("the person a split named signs up, files a tax form and is paid; a failed line returns its money", async () => {
    const refusal = async (fn: () => Promise<unknown>, code: string) =>
      assert.rejects(fn(), (e: unknown) => e instanceof MoneyError && e.code === code);
    ana = await db.asService(
      async (tx) =>
        (
          await tx.query<{ id: string; email: string; tenant_id: string }>(
            "insert into internal.users (tenant_id, email, email_confirmed_at) values ($1, 'ana@example.org', now()) returning id, email, tenant_id",
            [tenant.id],
          )
        ).rows[0] as { id: string; email: string; tenant_id: string },
    );
    const anaPayee = await payeeOf("ana@example.org");
    const june = await payeeOf("june@lantern.test");
    // Confirmed without proof (a tenant that does not ask for e-mail confirmation confirms every
    // sign-up at once): whoever signed up with the address has not shown they read its mail, so
    // the money held for it is not theirs to see or ask for.
    assert.deepEqual(await asUser(ana, (tx) => balances(tx, { mine: true })), []);
    await refusal(() => asUser(ana, (tx) => requestPayout(tx, anaPayee)), "not_found");
    // She follows the link mailed to the address: now it is hers.
    await rows("update internal.users set email_proven_at = now() where id = $1", [ana.id]);
    // She sees her own balance only (not June's, not the account's).
    const seen = await asUser(ana, (tx) => balances(tx, { mine: false }));
    assert.deepEqual(
      seen.map((b) => [b.payee_id, b.currency, b.available]),
      [
        [anaPayee, "EUR", "0.00"],
        [anaPayee, "USD", "1.65"],
      ],
    );
    await updateMoneySettings(db, tenant.id, { payout_threshold: "1.00" });
    await refusal(() => asUser(ana, (tx) => requestPayout(tx, anaPayee)), "tax_form_required");
    await fileTaxForm(db, box, anaPayee, {
      form: "W-8BEN",
      name: "Ana Lima",
      country: "BR",
      tax_id: "123.456.789-09",
    });
    await reviewTaxForm(db, tenant.id, anaPayee, { status: "verified", withholding_rate: "15" });
    await refusal(() => asUser(ana, (tx) => requestPayout(tx, anaPayee)), "payout_method_required");
    await setPayoutMethod(db, anaPayee, { provider: "paypal", receiver: "ana@example.org" });
    await refusal(() => asUser(ana, (tx) => requestPayout(tx, anaPayee), "aal1"), "aal2_required");
    // Somebody else's payee is not found.
    await refusal(() => asUser(ana, (tx) => requestPayout(tx, june)), "not_found");
    const payout = await asUser(ana, (tx) => requestPayout(tx, anaPayee));
    assert.deepEqual(
      [payout.amount, payout.withholding, payout.net_amount, payout.status],
      ["1.65", "0.25", "1.40", "requested"],
    );
    await refusal(() => asUser(ana, (tx) => requestPayout(tx, anaPayee)), "payout_open");
    // The tax id is sealed at rest.
    const sealed = await rows<{ tax_id_sealed: string; tax_id_last4: string }>(
      "select tax_id_sealed, tax_id_last4 from internal.payees where id = $1",
      [anaPayee],
    );
    assert.equal(sealed[0]?.tax_id_last4, "8909");
    assert.ok(!sealed[0]?.tax_id_sealed.includes("456"));
    assert.equal(box.decrypt(sealed[0]?.tax_id_sealed as string), "123.456.789-09");

    // June too (W-9, no withholding), so the batch has two lines.
    await fileTaxForm(db, box, june, {
      form: "W-9",
      name: "June Park",
      country: "US",
      tax_id: "123-45-6789",
    });
    await reviewTaxForm(db, tenant.id, june, { status: "verified" });
    await setPayoutMethod(db, june, { provider: "paypal", receiver: "june@lantern.test" });
    const junePayout = await asUser(owner, (tx) => requestPayout(tx, june));
    assert.equal(junePayout.amount, "2.48");

    const batch = await approveBatch(db, tenant.id, "paypal", "test");
    assert.equal(batch.payouts, 2);
    const { file } = await exportBatch(db, tenant.id, batch.id);
    assert.match(file.body, /ana@example\.org,1\.40,USD/);
    assert.match(file.body, /june@lantern\.test,2\.48,USD/);
    const settled = await settleBatch(db, tenant.id, batch.id, [
      { payout_id: junePayout.id, reason: "receiver unconfirmed" },
    ]);
    assert.equal(settled.status, "partially_paid");
    assert.deepEqual(await balanceOf(anaPayee), { USD: "0.007688888448752", EUR: "0" });
    // June's failed payout returned to her balance, exactly.
    assert.deepEqual(await balanceOf(june), { USD: "2.486533332673128", EUR: "0" });
    const holders = Object.fromEntries(
      (
        await rows<{ holder: string; b: string }>(
          `select holder, trim_scale(sum(amount))::text as b from internal.ledger_entries
           where tenant_id = $1 and currency = 'USD' and holder in ('cash', 'tax_withheld', 'payouts_pending') group by holder`,
          [tenant.id],
        )
      ).map((r) => [r.holder, r.b]),
    );
    assert.deepEqual(holders, { cash: "2.4", tax_withheld: "0.25", payouts_pending: "0" });
    // Each payee hears of their payout in the portal.
    const told = await rows<{ user_id: string; kind: string; title: string; body: string }>(
      "select user_id, kind, title, body from public.notifications where kind like 'payout.%' and account_id = $1 order by kind",
      [account.id],
    );
    assert.deepEqual(told, [
      {
        user_id: owner.id,
        kind: "payout.failed",
        title: "Your payout of 2.48 USD could not be sent",
        body: "receiver unconfirmed. The amount is back in your balance.",
      },
      {
        user_id: ana.id,
        kind: "payout.paid",
        title: "Your payout of 1.40 USD was sent",
        body: "Lantern Records paid it through PayPal.",
      },
    ]);
    const events = await rows<{ type: string }>(
      "select type from internal.events where account_id = $1 and type like 'payout.%' or type = 'statement.ready' order by created_at, type",
      [account.id],
    );
    assert.ok(events.some((e) => e.type === "payout.paid"));
    assert.ok(events.some((e) => e.type === "payout.failed"));
    assert.ok(events.some((e) => e.type === "statement.ready"));
    await assertBalanced();

    // The account's endpoint receives each money event, signed, in the shape the OpenAPI document
    // gives it (the webhooks section, from src/webhooks/events.ts).
    const dispatcher = new WebhookDispatcher({ db, secrets: box, allowPrivate: true });
    const want = ["statement.ready", "payout.requested", "payout.paid", "payout.failed"];
    const deadline = Date.now() + 15_000;
    const delivered = () => new Set(hook.received.map((r) => (JSON.parse(r.body) as { type: string }).type));
    while (!want.every((type) => delivered().has(type)) && Date.now() < deadline) {
      if ((await dispatcher.runDue()) === 0) await new Promise((r) => setTimeout(r, 50));
    }
    await dispatcher.stop();
    assert.deepEqual([...delivered()].sort(), [...want].sort());
    for (const received of hook.received) {
      assert.deepEqual(received.verifiedBy, [true], "signed with the endpoint's secret");
      const body = JSON.parse(received.body) as { type: string; data: { object: Record<string, unknown> } };
      const schema = WEBHOOK_EVENTS.find((e) => e.type === body.type)?.schema;
      assert.ok(schema?.safeParse(body).success, `${body.type} as documented: ${received.body}`);
    }
    const paid = hook.received
      .map((r) => JSON.parse(r.body) as { type: string; data: { object: Record<string, unknown> } })
      .find((b) => b.type === "payout.paid")?.data.object;
    assert.deepEqual([paid?.amount, paid?.withholding, paid?.net_amount], ["1.65", "0.25", "1.40"]);
  });

  test("a void reverses the allocation in the next period; the approved statement stays as it was", async () => {
    const anaPayee = await payeeOf("ana@example.org");
    const p = await period();
    const before = await db.asService((tx) => statementFor(tx, anaPayee, p));
    await voidImport(db, importId, { reason: "wrong file", via: "cli" });
    const periods = await rows<{ period: string }>(
      "select distinct to_char(period, 'YYYY-MM') as period from internal.ledger_entries where import_id = $1 and txn_kind = 'void'",
      [importId],
    );
    assert.equal(periods.length, 1);
    assert.notEqual(periods[0]?.period, p);
    assert.deepEqual(await balanceOf(anaPayee), { USD: "-1.601111111551248", EUR: "-0.04444444404432" });
    assert.deepEqual(await db.asService((tx) => statementFor(tx, anaPayee, p)), before);
    await assertBalanced();
  });
});
