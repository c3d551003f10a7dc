import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import type { Db } from "../src/db/db.ts";
import { asDbError } from "../src/db/errors.ts";
import type { Claims, Tx } from "../src/db/types.ts";
import { add, compare, mul, roundHalfUp, sub, sum } from "../src/money/decimal.ts";
import { MoneyError } from "../src/money/errors.ts";
import {
  addRecoupable,
  addSplitVersion,
  setExchangeRate,
  setFee,
  updateMoneySettings,
} from "../src/money/operator.ts";
import { fileTaxForm, reviewTaxForm, setPayoutMethod } from "../src/money/payees.ts";
import { approveBatch, exportBatch, requestPayout, settleBatch } from "../src/money/payouts.ts";
import { approvePeriod, statementFor } from "../src/money/statements.ts";
import { importRoyalties } from "../src/royalties/import.ts";
import { voidImport } from "../src/royalties/void.ts";
import { SecretBox } from "../src/secrets/box.ts";
import type { Account, Tenant } from "../src/tenancy/tenants.ts";
import { describeEachEngine } from "./support/db.ts";
import { reportFile, seedDeliveredRelease } from "./support/royalties.ts";
import { type SeedUser, seedAccount, seedTenant, userClaims } from "./support/seed.ts";

/**
 * The money model's invariants (docs/payouts.md) as properties: random sequences of what happens to
 * a tenant's money — royalty imports (amounts with up to 12 decimals, several currencies, tracks and
 * usage months), voids, split changes (tracks.splits writes with decimal-string shares, drafts that
 * do not total 100, and the operator's versions dated from earlier months or for one store),
 * distributor fees, advances and expenses (some cross-recouped), payout requests by payees who
 * signed up, batches settled with some lines failed, and the period's approval (with the exchange
 * rates it needs) — each run against a fresh tenant, with these checked after every step:
 *
 *   1. every ledger transaction sums to zero in each currency (so every ledger does);
 *   2. nobody is paid more than they earned: a payout request never takes a balance below zero,
 *      and the payouts table agrees with the ledger (requested, pending, paid, withheld, returned);
 *   3. the payee shares of every allocated sum add up exactly to the sum's net after the fee and
 *      the recoupment, each share exactly remaining × share / 100 of the version used, the fee
 *      exactly net × the rate in force, the split version the one docs/payouts.md's rule picks for
 *      the sum's usage month, store and territory, and a recoupable never recouped below zero or
 *      above its amount (and, after an import, left unrecouped only where no sum it reaches had
 *      money left);
 *   4. replaying an allocation (or a void) posts nothing;
 *   5. an approved statement never changes (read again after every later step), states the exact
 *      balance rounded, and the database refuses any UPDATE or DELETE of statements and ledger
 *      entries.
 *
 * fast-check prints the seed and the shrunk sequence of a failing run (replay it with
 * MONEY_PROPERTY_SEED and MONEY_PROPERTY_PATH); MONEY_PROPERTY_RUNS sets the number of runs.
 */

const NUM_RUNS = Number(process.env.MONEY_PROPERTY_RUNS ?? 25);

const CURRENCIES = ["USD", "EUR", "JPY"] as const;
const STORES = ["spotify", "apple_music", "deezer"] as const;
const TERRITORIES = ["US", "GB", "FR"] as const;
const PEOPLE = ["ana@props.test", "june@props.test", "kim@props.test"] as const;
/** The people who have signed up (a confirmed user) when a run starts; the others may later. */
const SIGNED_UP_AT_START = 2;
/** The least a payee may ask for (money_settings.payout_threshold). */
const THRESHOLD = "0.10";
const ISRCS = ["QZPRP2600001", "QZPRP2600002", "QZPRP2600003", "QZPRP2600004"] as const;

// ---------------------------------------------------------------------------------------------
// The operations
// ---------------------------------------------------------------------------------------------

interface LineSpec {
  track: number;
  store: number;
  territory: number;
  /** 0 = the current month, 1 = the month before, 2 = two before. */
  monthsAgo: number;
  net: string;
  currency: number;
}

interface SplitSpec {
  /** null: the account's own share. */
  person: number | null;
  /** Upper-case the address (payees are matched case-insensitively). */
  shout: boolean;
  share: string;
  asNumber: boolean;
}

type Op =
  | { kind: "import"; lines: LineSpec[] }
  | { kind: "void"; pick: number }
  | { kind: "splits"; track: number; splits: SplitSpec[]; payable: boolean }
  | { kind: "datedSplits"; track: number; monthsAgo: number; store: number | null; splits: SplitSpec[] }
  | {
      kind: "fee";
      scope: "tenant" | "account" | "release";
      account: number;
      release: number;
      rate: string | null;
    }
  | {
      kind: "recoupable";
      account: number;
      release: number | null;
      recoupKind: "advance" | "expense";
      currency: "USD" | "EUR";
      amount: string;
      cross: boolean;
    }
  | { kind: "payout"; person: number; account: number; withholding: string }
  | { kind: "signup"; person: number }
  | { kind: "batch"; fail: boolean[] }
  | { kind: "approve"; rates: { EUR: string; JPY: string }; withoutRates: boolean };

/** A decimal with up to 12 decimals (the import's precision), mostly positive. */
const amountArb = fc
  .tuple(
    fc.integer({ min: 0, max: 9 }),
    // Sometimes large: a whole part of six digits and twelve decimals is more than a double holds.
    fc.oneof(
      { weight: 5, arbitrary: fc.integer({ min: 0, max: 60 }) },
      { weight: 1, arbitrary: fc.integer({ min: 0, max: 999_999 }) },
    ),
    fc.string({ unit: fc.constantFrom(..."0123456789"), minLength: 0, maxLength: 12 }),
  )
  .map(([signDie, whole, frac]) => `${signDie === 0 ? "-" : ""}${whole}${frac ? `.${frac}` : ""}`);

const lineArb: fc.Arbitrary<LineSpec> = fc.record({
  track: fc.integer({ min: 0, max: ISRCS.length - 1 }),
  store: fc.integer({ min: 0, max: STORES.length - 1 }),
  territory: fc.integer({ min: 0, max: TERRITORIES.length - 1 }),
  monthsAgo: fc.integer({ min: 0, max: 2 }),
  net: amountArb,
  currency: fc.oneof(
    { weight: 3, arbitrary: fc.constant(0) },
    { weight: 2, arbitrary: fc.integer({ min: 1, max: CURRENCIES.length - 1 }) },
  ),
});

/** Shares in ten-thousandths of a percent: k positive parts of 1,000,000 (exactly 100%). */
const sharesArb = (k: number) =>
  fc.uniqueArray(fc.integer({ min: 1, max: 999_999 }), { minLength: k - 1, maxLength: k - 1 }).map((cuts) => {
    const points = [0, ...cuts.sort((a, b) => a - b), 1_000_000];
    return points.slice(1).map((p, i) => p - (points[i] as number));
  });

const percent = (tenThousandths: number) => {
  const whole = Math.floor(tenThousandths / 10_000);
  const frac = String(tenThousandths % 10_000)
    .padStart(4, "0")
    .replace(/0+$/, "");
  return frac ? `${whole}.${frac}` : String(whole);
};

const splitsArb: fc.Arbitrary<{ splits: SplitSpec[]; payable: boolean }> = fc
  .integer({ min: 0, max: 3 })
  .chain((k) =>
    k === 0
      ? fc.constant({ splits: [] as SplitSpec[], payable: true })
      : fc
          .tuple(
            sharesArb(k),
            fc.array(
              fc.record({
                person: fc.option(fc.integer({ min: 0, max: PEOPLE.length - 1 }), { freq: 4 }),
                shout: fc.boolean(),
                asNumber: fc.boolean(),
                pad: fc.boolean(),
              }),
              { minLength: k, maxLength: k },
            ),
            // A draft: one share off by a ten-thousandth, so the total is not 100.
            fc.oneof({ weight: 5, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.constant(1) }),
          )
          .map(([shares, who, off]) => ({
            payable: off === 0,
            splits: shares.map((s, i) => {
              const w = who[i] as { person: number | null; shout: boolean; asNumber: boolean; pad: boolean };
              const value = i === 0 ? s - off : s;
              // "40.00" as a decimal string with trailing zeros, or the number's shortest form.
              const text = percent(value);
              const padded = w.pad && !w.asNumber && !text.includes(".") ? `${text}.00` : text;
              return { person: w.person, shout: w.shout, asNumber: w.asNumber, share: padded };
            }),
          }))
          .filter((s) => s.splits.every((x) => compare(x.share, "0") > 0)),
  );

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant("import" as const),
      lines: fc.array(lineArb, { minLength: 1, maxLength: 4 }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("void" as const), pick: fc.nat() }) },
  {
    weight: 3,
    arbitrary: fc
      .tuple(fc.integer({ min: 0, max: ISRCS.length - 1 }), splitsArb)
      .map(([track, s]) => ({ kind: "splits" as const, track, ...s })),
  },
  {
    // The operator's version: dated from an earlier month, perhaps for one store only.
    weight: 2,
    arbitrary: fc
      .tuple(
        fc.integer({ min: 0, max: ISRCS.length - 1 }),
        fc.integer({ min: 0, max: 2 }),
        fc.option(fc.integer({ min: 0, max: STORES.length - 1 }), { freq: 2 }),
        splitsArb.filter((x) => x.payable && x.splits.length > 0),
      )
      .map(([track, monthsAgo, store, x]) => ({
        kind: "datedSplits" as const,
        track,
        monthsAgo,
        store,
        splits: x.splits,
      })),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("fee" as const),
      scope: fc.constantFrom("tenant" as const, "account" as const, "release" as const),
      account: fc.integer({ min: 0, max: 1 }),
      release: fc.nat(),
      rate: fc.option(
        fc
          .tuple(fc.integer({ min: 0, max: 40 }), fc.integer({ min: 0, max: 9999 }))
          .map(([w, f]) => percent(w * 10_000 + f)),
        { freq: 6 },
      ),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("recoupable" as const),
      account: fc.integer({ min: 0, max: 1 }),
      release: fc.option(fc.nat(), { freq: 2 }),
      recoupKind: fc.constantFrom("advance" as const, "expense" as const),
      currency: fc.constantFrom("USD" as const, "EUR" as const),
      amount: fc.integer({ min: 1, max: 4000 }).map((c) => (c / 100).toFixed(2)),
      cross: fc.boolean(),
    }),
  },
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant("payout" as const),
      person: fc.oneof(
        { weight: 4, arbitrary: fc.integer({ min: 0, max: SIGNED_UP_AT_START - 1 }) },
        { weight: 1, arbitrary: fc.integer({ min: SIGNED_UP_AT_START, max: PEOPLE.length - 1 }) },
      ),
      account: fc.oneof({ weight: 3, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.constant(1) }),
      withholding: fc.constantFrom("0", "15", "30", "12.5"),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("signup" as const),
      person: fc.integer({ min: SIGNED_UP_AT_START, max: PEOPLE.length - 1 }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("batch" as const),
      fail: fc.array(fc.boolean(), { maxLength: 6 }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("approve" as const),
      rates: fc.record({
        EUR: fc.integer({ min: 80_000, max: 130_000 }).map((n) => (n / 100_000).toString()),
        JPY: fc.integer({ min: 1, max: 99_999 }).map((n) => `0.00${String(n).padStart(5, "0")}`),
      }),
      withoutRates: fc.boolean(),
    }),
  },
);

/**
 * How a run starts: splits on some tracks (so that payees exist to be paid), perhaps a fee, and an
 * import (so that there is money); then the random operations.
 */
const startArb: fc.Arbitrary<Op[]> = fc
  .tuple(
    fc.array(fc.option(splitsArb, { freq: 4 }), { minLength: ISRCS.length, maxLength: ISRCS.length }),
    fc.option(
      fc
        .tuple(fc.integer({ min: 0, max: 30 }), fc.integer({ min: 0, max: 9999 }))
        .map(([w, f]) => percent(w * 10_000 + f)),
      { freq: 3 },
    ),
    fc.array(lineArb, { minLength: 1, maxLength: 5 }),
  )
  .map(([splits, fee, lines]) => [
    ...splits.flatMap((s, track): Op[] => (s ? [{ kind: "splits", track, ...s }] : [])),
    ...(fee === null ? [] : [{ kind: "fee", scope: "tenant", account: 0, release: 0, rate: fee } as Op]),
    { kind: "import", lines },
  ]);

/** Runs that once failed (fast-check's shrunk counterexamples), run first every time. */
const EXAMPLES: [Op[], Op[]][] = [
  // A 12-decimal EUR net at a 4-decimal fee, split 0.0001 / 99.9999: the allocation's shares were
  // divided by 100 (rounded to 16 digits by numeric division), and the import failed unbalanced.
  [
    [
      {
        kind: "splits",
        track: 1,
        payable: true,
        splits: [
          { person: null, shout: false, asNumber: false, share: "0.0001" },
          { person: 0, shout: false, asNumber: false, share: "99.9999" },
        ],
      },
    ],
    [
      { kind: "fee", scope: "tenant", account: 0, release: 0, rate: "2.0001" },
      {
        kind: "import",
        lines: [{ track: 1, store: 0, territory: 0, monthsAgo: 0, net: "-50.900000001", currency: 1 }],
      },
    ],
  ],
  // A balance of more significant digits than a double holds, asked for whole: the request must be
  // the balance rounded down (99999.99), never rounded up past it.
  [
    [
      {
        kind: "splits",
        track: 0,
        payable: true,
        splits: [{ person: 0, shout: true, asNumber: true, share: "100" }],
      },
    ],
    [
      {
        kind: "import",
        lines: [{ track: 0, store: 1, territory: 1, monthsAgo: 1, net: "99999.999999999999", currency: 0 }],
      },
      { kind: "payout", person: 0, account: 0, withholding: "15" },
      { kind: "batch", fail: [false] },
    ],
  ],
];

// ---------------------------------------------------------------------------------------------
// One run's world
// ---------------------------------------------------------------------------------------------

interface Track {
  id: string;
  isrc: string;
  releaseId: string;
  account: Account;
  /** The splits last written as JSON (what tracks.splits holds), and the versions the model expects. */
  splits: string;
  versions: number;
}

interface World {
  tenant: Tenant;
  accounts: Account[];
  releases: { id: string; account: Account }[];
  tracks: Track[];
  users: Map<string, SeedUser>;
  imports: { id: string; voided: boolean }[];
  /** The fee rates the model expects, by "", account id, or account id/release id. */
  fees: Map<string, string>;
  /** Payees whose tax form (verified, with this withholding rate) and payout method are on file. */
  ready: Map<string, string>;
  /** Approved statements as first read: id -> the row, and the document statementFor answers. */
  approved: Map<string, { row: string; document: string }>;
  months: string[];
  currentPeriod: string;
  nextPeriod: string;
  seq: number;
}

/** The check digit of a GTIN (UPC-A's 12th digit). */
function gtin(body: string): string {
  let total = 0;
  for (let i = 0; i < body.length; i++) {
    total += Number(body[body.length - 1 - i]) * (i % 2 === 0 ? 3 : 1);
  }
  return `${body}${(10 - (total % 10)) % 10}`;
}

describeEachEngine("money: the ledger's invariants hold whatever happens (properties)", (t) => {
  const box = new SecretBox(Buffer.alloc(32, 9));

  const rows = <T extends Record<string, unknown>>(sql: string, params: unknown[] = []) =>
    t().db.asService(async (tx) => (await tx.query<T>(sql, params)).rows);

  async function seedWorld(db: Db): Promise<World> {
    const tenant = await seedTenant(db);
    await updateMoneySettings(db, tenant.id, { payout_threshold: THRESHOLD });
    const accounts = [await seedAccount(db, tenant, "Label A"), await seedAccount(db, tenant, "Label B")];
    const [a, b] = accounts as [Account, Account];
    const r1 = await seedDeliveredRelease(db, a.id, { title: "One", upc: gtin("01234567001") }, [
      { title: "One A", isrc: ISRCS[0], duration: 200, track_number: 1 },
      { title: "One B", isrc: ISRCS[1], duration: 200, track_number: 2 },
    ]);
    const r2 = await seedDeliveredRelease(db, a.id, { title: "Two", upc: gtin("01234567002") }, [
      { title: "Two A", isrc: ISRCS[2], duration: 200, track_number: 1 },
    ]);
    const r3 = await seedDeliveredRelease(db, b.id, { title: "Three", upc: gtin("01234567003") }, [
      { title: "Three A", isrc: ISRCS[3], duration: 200, track_number: 1 },
    ]);
    const tracks: Track[] = [
      ...r1.tracks.map((x) => ({ ...x, releaseId: r1.id, account: a })),
      ...r2.tracks.map((x) => ({ ...x, releaseId: r2.id, account: a })),
      ...r3.tracks.map((x) => ({ ...x, releaseId: r3.id, account: b })),
    ].map((x) => ({
      id: x.id,
      isrc: x.isrc,
      releaseId: x.releaseId,
      account: x.account,
      splits: "[]",
      versions: 0,
    }));
    const users = new Map<string, SeedUser>();
    for (const email of PEOPLE.slice(0, SIGNED_UP_AT_START))
      users.set(email, await signUp(db, tenant, email));
    const m = (
      await rows<{ m0: string; m1: string; m2: string; next: string }>(
        `select to_char(now(), 'YYYY-MM') as m0, to_char(now() - interval '1 month', 'YYYY-MM') as m1,
           to_char(now() - interval '2 months', 'YYYY-MM') as m2, to_char(now() + interval '1 month', 'YYYY-MM') as next`,
      )
    )[0] as { m0: string; m1: string; m2: string; next: string };
    return {
      tenant,
      accounts,
      releases: [
        { id: r1.id, account: a },
        { id: r2.id, account: a },
        { id: r3.id, account: b },
      ],
      tracks,
      users,
      imports: [],
      fees: new Map(),
      ready: new Map(),
      approved: new Map(),
      months: [m.m0, m.m1, m.m2],
      currentPeriod: m.m0,
      nextPeriod: m.next,
      seq: 0,
    };
  }

  async function signUp(db: Db, tenant: Tenant, email: string): Promise<SeedUser> {
    return db.asService(
      async (tx) =>
        (
          await tx.query<SeedUser>(
            "insert into internal.users (tenant_id, email, email_confirmed_at, email_proven_at) values ($1, $2, now(), now()) returning id, tenant_id, email",
            [tenant.id, email],
          )
        ).rows[0] as SeedUser,
    );
  }

  const feeRate = (w: World, accountId: string, releaseId: string) =>
    w.fees.get(`${accountId}/${releaseId}`) ?? w.fees.get(accountId) ?? w.fees.get("") ?? "0";

  async function payeeOf(accountId: string, email: string): Promise<string | undefined> {
    return (
      await rows<{ id: string }>("select id from internal.payees where account_id = $1 and email = $2", [
        accountId,
        email,
      ])
    )[0]?.id;
  }

  const moneyCode = (code: string) => (e: unknown) => e instanceof MoneyError && e.code === code;

  async function expectMoneyError(p: Promise<unknown>, allowed: string[]): Promise<string | undefined> {
    try {
      await p;
      return undefined;
    } catch (error) {
      if (error instanceof MoneyError && allowed.includes(error.code)) return error.code;
      throw error;
    }
  }

  // -------------------------------------------------------------------------------------------
  // Steps
  // -------------------------------------------------------------------------------------------

  /** What the runs did, printed at the end so a run that tests nothing shows. */
  const tally = new Map<string, number>();
  const count = (what: string) => tally.set(what, (tally.get(what) ?? 0) + 1);
  /** Where the time went: seeding each run's tenant, each kind of step, the invariants. */
  const spent = new Map<string, number>();

  async function step(w: World, op: Op): Promise<void> {
    const db = t().db;
    count(op.kind);
    switch (op.kind) {
      case "import": {
        w.seq += 1;
        const csv = [
          "reporting_period,sale_period,store,territory,upc,isrc,usage_type,units,gross,fees,net,currency",
          ...op.lines.map(
            (l, i) =>
              `${w.currentPeriod},${w.months[l.monthsAgo]},${STORES[l.store]},${TERRITORIES[l.territory]},,${
                ISRCS[l.track]
              },stream,${w.seq * 100 + i},0,0,${l.net},${CURRENCIES[l.currency]}`,
          ),
          "",
        ].join("\n");
        const r = await importRoyalties(db, {
          tenantId: w.tenant.id,
          format: "backline",
          file: reportFile(csv),
        });
        assert.equal(r.status, "completed", JSON.stringify(r));
        if (r.status !== "completed") return;
        w.imports.push({ id: r.report.id, voided: false });
        count("import completed");
        await checkImportAllocation(w, r.report.id);
        return;
      }
      case "void": {
        const open = w.imports.filter((i) => !i.voided);
        const target = open[op.pick % Math.max(open.length, 1)];
        if (!target) return;
        await voidImport(db, target.id, { reason: "property test", via: "cli" });
        target.voided = true;
        // The void gave back exactly what the allocation posted: the import nets to zero per holder.
        const off = await rows(
          `select holder, payee_id, recoupable_id, currency, sum(amount) as s from internal.ledger_entries
           where import_id = $1 and txn_kind in ('allocation', 'void')
           group by holder, payee_id, recoupable_id, currency having sum(amount) <> 0`,
          [target.id],
        );
        assert.deepEqual(off, [], "a void reverses its import's allocation exactly");
        return;
      }
      case "splits": {
        const track = w.tracks[op.track] as Track;
        const json = JSON.stringify(
          op.splits.map((s) => {
            const email = s.person === null ? undefined : (PEOPLE[s.person] as string);
            return {
              name: email ? email.split("@")[0] : "The label",
              ...(email ? { email: s.shout ? email.toUpperCase() : email } : {}),
              share: s.asNumber ? Number(s.share) : s.share,
            };
          }),
        );
        const before = Number(
          (
            await rows<{ n: string }>(
              "select count(*) as n from internal.split_versions where track_id = $1",
              [track.id],
            )
          )[0]?.n,
        );
        await db.asService((tx) =>
          tx.query("update public.tracks set splits = $2 where id = $1", [track.id, json]),
        );
        const changed = (
          await rows<{ changed: boolean }>("select $1::jsonb is distinct from $2::jsonb as changed", [
            json,
            track.splits,
          ])
        )[0]?.changed;
        track.splits = json;
        const made = op.payable && changed ? 1 : 0;
        track.versions += made;
        const after = Number(
          (
            await rows<{ n: string }>(
              "select count(*) as n from internal.split_versions where track_id = $1",
              [track.id],
            )
          )[0]?.n,
        );
        assert.equal(
          after - before,
          made,
          "a split write makes a version exactly when it is payable and new",
        );
        assert.equal(after, track.versions);
        if (made) {
          // The new version's shares: each payee's (an address named twice adds up), the account's
          // own for a share without an address; all of it the account's when the splits were cleared.
          const expected = new Map<string, string>();
          const self = (
            await rows<{ id: string }>(
              "select id from internal.payees where account_id = $1 and kind = 'account'",
              [track.account.id],
            )
          )[0]?.id as string;
          assert.ok(self, "the account's own payee exists once a version is made");
          if (op.splits.length === 0) expected.set(self, "100");
          for (const s of op.splits) {
            const id =
              s.person === null
                ? self
                : ((await payeeOf(track.account.id, PEOPLE[s.person] as string)) as string);
            assert.ok(id, "a payee exists for every address a split names");
            expected.set(id, add(expected.get(id) ?? "0", s.share));
          }
          const shares = await rows<{ payee_id: string; share: string }>(
            `select payee_id, trim_scale(share)::text as share from internal.split_shares
             where version_id = (select max(id) from internal.split_versions where track_id = $1)`,
            [track.id],
          );
          assert.equal(shares.length, expected.size);
          for (const s of shares) assert.equal(compare(s.share, expected.get(s.payee_id) ?? "-1"), 0);
          assert.equal(
            compare(sum(shares.map((s) => s.share)), "100"),
            0,
            "a version's shares total exactly 100",
          );
        }
        return;
      }
      case "datedSplits": {
        const track = w.tracks[op.track] as Track;
        await addSplitVersion(db, w.tenant.id, {
          track_id: track.id,
          effective_from: w.months[op.monthsAgo] as string,
          ...(op.store === null ? {} : { store: STORES[op.store] }),
          splits: op.splits.map((x) => {
            const email = x.person === null ? undefined : (PEOPLE[x.person] as string);
            return { name: email ?? "The label", ...(email ? { email } : {}), share: x.share };
          }),
        });
        track.versions += 1;
        return;
      }
      case "fee": {
        const account = w.accounts[op.account] as Account;
        const releases = w.releases.filter((r) => r.account === account);
        const release = releases[op.release % releases.length] as { id: string };
        const scope =
          op.scope === "tenant"
            ? {}
            : op.scope === "account"
              ? { accountId: account.id }
              : { accountId: account.id, releaseId: release.id };
        await setFee(db, w.tenant.id, scope, op.rate);
        const key =
          op.scope === "tenant" ? "" : op.scope === "account" ? account.id : `${account.id}/${release.id}`;
        if (op.rate === null) w.fees.delete(key);
        else w.fees.set(key, op.rate);
        return;
      }
      case "recoupable": {
        const account = w.accounts[op.account] as Account;
        const releases = w.releases.filter((r) => r.account === account);
        const release = op.release === null ? undefined : releases[op.release % releases.length];
        await addRecoupable(
          db,
          w.tenant.id,
          {
            account_id: account.id,
            ...(release ? { release_id: release.id } : {}),
            kind: op.recoupKind,
            currency: op.currency,
            amount: op.amount,
            description: `${op.recoupKind} ${w.seq}`,
            cross_recoup: op.cross,
          },
          "property test",
        );
        return;
      }
      case "signup": {
        const email = PEOPLE[op.person] as string;
        if (!w.users.has(email)) w.users.set(email, await signUp(db, w.tenant, email));
        return;
      }
      case "payout": {
        // A payee who signed up: one holding at least the threshold if any, the person and account
        // the operation names first.
        const payees = await rows<{ id: string; email: string }>(
          `select p.id, p.email from internal.payees p where p.tenant_id = $1 and p.email = any ($2::text[])
           order by (select coalesce(sum(e.amount), 0) from internal.ledger_entries e where e.payee_id = p.id
             and e.currency = p.currency) >= $5 desc, p.email = $3 desc, p.account_id = $4 desc, p.account_id, p.email`,
          [
            w.tenant.id,
            [...w.users.keys()],
            PEOPLE[op.person],
            (w.accounts[op.account] as Account).id,
            THRESHOLD,
          ],
        );
        const payee = payees[0]?.id;
        const email = payees[0]?.email as string;
        const user = w.users.get(email);
        if (!user || !payee) {
          count("payout: nobody signed up is a payee");
          return;
        }
        if (!w.ready.has(payee)) {
          await fileTaxForm(db, box, payee, {
            form: "W-8BEN",
            name: email,
            country: "BR",
            tax_id: "123.456.789-09",
          });
          await reviewTaxForm(db, w.tenant.id, payee, {
            status: "verified",
            withholding_rate: op.withholding,
          });
          await setPayoutMethod(db, payee, { provider: "paypal", receiver: email });
          w.ready.set(payee, op.withholding);
        }
        const balance = (
          await rows<{ b: string }>(
            "select coalesce(sum(amount), 0)::text as b from internal.ledger_entries where payee_id = $1 and currency = 'USD'",
            [payee],
          )
        )[0]?.b as string;
        const claims = { ...userClaims(user), aal: "aal2" } as Claims;
        const refused = await expectMoneyError(
          db.withRequestContext(claims, (tx) => requestPayout(tx, payee)),
          ["below_threshold", "payout_open"],
        );
        if (refused === "below_threshold") {
          count("payout below threshold");
          assert.ok(compare(balance, THRESHOLD) < 0, `refused as below the threshold with ${balance} USD`);
        } else if (refused === undefined) {
          count("payout requested");
          const o = (
            await rows<{ amount: string; withholding: string }>(
              `select amount::text, withholding::text from internal.payouts where payee_id = $1
               order by requested_at desc limit 1`,
              [payee],
            )
          )[0] as { amount: string; withholding: string };
          // The balance rounded down to the cent; withholding at the rate, rounded half up.
          assert.equal(compare(o.amount, floor2(balance)), 0, `asked for ${o.amount} of ${balance}`);
          assert.equal(
            compare(o.withholding, roundHalfUp(mul(o.amount, mul(w.ready.get(payee) as string, "0.01")), 2)),
            0,
          );
        }
        return;
      }
      case "batch": {
        const batch = await expectMoneyError(approveBatch(db, w.tenant.id, "paypal", "property test"), [
          "nothing_to_pay",
        ]);
        if (batch !== undefined) return;
        const b = (
          await rows<{ id: string }>(
            "select id from internal.payout_batches where tenant_id = $1 and status = 'approved' order by approved_at desc limit 1",
            [w.tenant.id],
          )
        )[0] as { id: string };
        await exportBatch(db, w.tenant.id, b.id);
        const members = await rows<{ id: string }>(
          "select id from internal.payouts where batch_id = $1 order by id",
          [b.id],
        );
        const failed = members
          .filter((_, i) => op.fail[i])
          .map((m) => ({ payout_id: m.id, reason: "receiver unconfirmed" }));
        await settleBatch(db, w.tenant.id, b.id, failed);
        count("batch settled");
        return;
      }
      case "approve": {
        const p = w.currentPeriod;
        const approved = (
          await rows<{ status: string }>(
            "select status from internal.money_periods where tenant_id = $1 and period = $2",
            [w.tenant.id, `${p}-01`],
          )
        )[0]?.status;
        if (approved === "approved") {
          await assert.rejects(
            approvePeriod(db, w.tenant.id, p, "property test"),
            moneyCode("period_approved"),
          );
          await assert.rejects(
            approvePeriod(db, w.tenant.id, w.nextPeriod, "property test"),
            moneyCode("period_not_started"),
          );
          return;
        }
        if (op.withoutRates) {
          const entries = await ledgerCount(w);
          const code = await expectMoneyError(approvePeriod(db, w.tenant.id, p, "property test"), [
            "rate_missing",
          ]);
          const foreign = await rows(
            `select 1 from internal.ledger_entries where tenant_id = $1 and period = $2 and payee_id is not null
               and currency <> 'USD' and txn_kind <> 'conversion' limit 1`,
            [w.tenant.id, `${p}-01`],
          );
          if (code === "rate_missing") {
            assert.equal(foreign.length, 1, "rate_missing with no entry in another currency");
            // Nothing was written: no statement, no conversion, the period still open.
            assert.equal(await ledgerCount(w), entries);
            const s = await rows("select 1 from internal.statements where tenant_id = $1", [w.tenant.id]);
            assert.equal(s.length, 0);
          } else {
            assert.equal(foreign.length, 0, "approved without the rates its entries need");
            await snapshotStatements(w);
            return;
          }
        }
        for (const cur of ["EUR", "JPY"] as const) {
          await setExchangeRate(db, w.tenant.id, { period: p, from: cur, to: "USD", rate: op.rates[cur] });
        }
        await approvePeriod(db, w.tenant.id, p, "property test");
        count("period approved");
        await snapshotStatements(w);
        // Rates of an approved period are final.
        await assert.rejects(
          setExchangeRate(db, w.tenant.id, { period: p, from: "EUR", to: "USD", rate: "2" }),
          moneyCode("period_approved"),
        );
        return;
      }
    }
  }

  const floor2 = (v: string) => {
    const r = roundHalfUp(v, 2);
    return compare(r, v) > 0 ? sub(r, "0.01") : r;
  };

  const ledgerCount = async (w: World) =>
    Number(
      (
        await rows<{ n: string }>("select count(*) as n from internal.ledger_entries where tenant_id = $1", [
          w.tenant.id,
        ])
      )[0]?.n,
    );

  async function snapshotStatements(w: World): Promise<void> {
    const all = await rows<{ id: string; payee_id: string; row: string; document: unknown }>(
      `select id, payee_id, (to_jsonb(s) - 'document')::text as row, document from internal.statements s
       where tenant_id = $1`,
      [w.tenant.id],
    );
    for (const s of all) {
      if (w.approved.has(s.id)) continue;
      w.approved.set(s.id, { row: s.row, document: JSON.stringify(s.document) });
    }
  }

  // -------------------------------------------------------------------------------------------
  // Invariants
  // -------------------------------------------------------------------------------------------

  /** Right after an import: the fee at the rate in force, and recoupment took all it could. */
  async function checkImportAllocation(w: World, importId: string): Promise<void> {
    await t().db.asService((tx) => importAllocationIn(tx, w, importId));
  }

  async function importAllocationIn(tx: Tx, w: World, importId: string): Promise<void> {
    const q = async <T extends Record<string, unknown>>(sql: string, params: unknown[] = []) =>
      (await tx.query<T>(sql, params)).rows;
    const groups = await q<{
      account_id: string;
      release_id: string;
      currency: string;
      net: string;
      fee: string;
      recouped: string;
      version: string | null;
      track_id: string;
      remaining: string;
      usage: string;
      store: string;
      territory: string;
    }>(
      `select account_id, release_id, track_id, to_char(usage_period, 'YYYY-MM') as usage, store, territory, currency, trim_scale(sum(amount + fee_amount + recouped_amount))::text as net,
         trim_scale(sum(fee_amount))::text as fee, trim_scale(sum(recouped_amount))::text as recouped,
         trim_scale(sum(amount))::text as remaining, max(split_version_id)::text as version
       from internal.ledger_entries where import_id = $1 and txn_kind = 'allocation' and holder = 'payee'
       group by account_id, release_id, track_id, usage_period, store, territory, currency`,
      [importId],
    );
    for (const g of groups) {
      const rate = feeRate(w, g.account_id, g.release_id);
      const expected = mul(mul(g.net, rate), "0.01");
      assert.equal(
        compare(g.fee, expected),
        0,
        `fee ${g.fee} on ${g.net} at ${rate}% (expected ${expected})`,
      );
      // Only positive sums recoup, never more than they hold after the fee.
      assert.ok(compare(g.recouped, "0") >= 0, "recouped a negative amount");
      if (compare(g.recouped, "0") > 0) assert.ok(compare(g.remaining, "0") >= 0, "recouped past the sum");
      // The version of the usage month (docs/payouts.md, "Splits"): among the versions in effect
      // then, the most specific scope, and of those the latest; before the first, the earliest
      // unscoped one (of its month, the last written). None: the account takes the whole.
      const versions = await q<{ id: string; from: string; store: string | null; territory: string | null }>(
        `select id::text, to_char(effective_from, 'YYYY-MM') as from, store, territory from internal.split_versions
         where track_id = $1`,
        [g.track_id],
      );
      const version = versions
        .filter(
          (v) =>
            (v.store === null || v.store === g.store) &&
            (v.territory === null || v.territory === g.territory) &&
            (v.from <= g.usage || (v.store === null && v.territory === null)),
        )
        .sort(
          (a, b) =>
            Number(b.from <= g.usage) - Number(a.from <= g.usage) ||
            Number(b.store !== null) - Number(a.store !== null) ||
            Number(b.territory !== null) - Number(a.territory !== null) ||
            (a.from <= g.usage ? b.from.localeCompare(a.from) : a.from.localeCompare(b.from)) ||
            Number(BigInt(b.id) - BigInt(a.id)),
        )[0];
      assert.equal(
        g.version,
        version?.id ?? null,
        `the split version used for ${g.usage} ${g.store} ${g.territory}`,
      );
    }
    // Recoupables still owed after the import: no sum of it they reach had money left.
    const owed = await q<{
      id: string;
      account_id: string;
      release_id: string | null;
      cross_recoup: boolean;
      currency: string;
    }>(
      `select c.id, c.account_id, c.release_id, c.cross_recoup, c.currency from internal.recoupables c
       where c.tenant_id = $1 and coalesce((select sum(e.amount) from internal.ledger_entries e where e.recoupable_id = c.id), 0) < 0`,
      [w.tenant.id],
    );
    for (const c of owed) {
      const left = groups.filter(
        (g) =>
          g.account_id === c.account_id &&
          g.currency === c.currency &&
          (c.release_id === null || c.cross_recoup || g.release_id === c.release_id) &&
          compare(g.remaining, "0") > 0,
      );
      assert.deepEqual(left, [], `recoupable ${c.id} is still owed while a sum it reaches had money left`);
    }
  }

  /** The invariants, all read in one transaction of the service role. */
  async function checkInvariants(w: World): Promise<void> {
    await t().db.asService((tx) => invariantsIn(tx, w));
  }

  async function invariantsIn(tx: Tx, w: World): Promise<void> {
    const tenant = w.tenant.id;
    const q = async <T extends Record<string, unknown>>(sql: string, params: unknown[] = []) =>
      (await tx.query<T>(sql, params)).rows;
    const ledgerEntries = async () =>
      Number(
        (
          await q<{ n: string }>("select count(*) as n from internal.ledger_entries where tenant_id = $1", [
            tenant,
          ])
        )[0]?.n,
      );
    // 1. Every transaction sums to zero per currency; so does the whole ledger.
    assert.deepEqual(
      await q(
        `select txn_id, currency, sum(amount)::text as off from internal.ledger_entries where tenant_id = $1
         group by txn_id, currency having sum(amount) <> 0`,
        [tenant],
      ),
      [],
      "an unbalanced ledger transaction",
    );
    assert.deepEqual(
      await q(
        "select currency from internal.ledger_entries where tenant_id = $1 group by currency having sum(amount) <> 0",
        [tenant],
      ),
      [],
    );

    // 2. A payout request never takes a payee's balance below zero; the payouts agree with the ledger.
    assert.deepEqual(
      await q(
        `select payee_id, running::text from (
           select payee_id, txn_kind, sum(amount) over (partition by payee_id, currency order by id) as running
           from internal.ledger_entries where tenant_id = $1 and holder = 'payee') x
         where txn_kind = 'payout_request' and running < 0`,
        [tenant],
      ),
      [],
      "a payout request took more than the payee's balance",
    );
    assert.deepEqual(
      await q(
        `select o.id, o.status from internal.payouts o where o.tenant_id = $1 and (
           (select coalesce(sum(e.amount), 0) from internal.ledger_entries e where e.payout_id = o.id and e.holder = 'payee'
              and e.txn_kind = 'payout_request') <> -o.amount
           or (o.status = 'paid') <> exists (select 1 from internal.ledger_entries e where e.payout_id = o.id and e.txn_kind = 'payout_paid')
           or (o.status = 'failed') <> exists (select 1 from internal.ledger_entries e where e.payout_id = o.id and e.txn_kind = 'payout_failed')
           or (select coalesce(sum(e.amount), 0) from internal.ledger_entries e where e.payout_id = o.id and e.holder = 'cash') <>
              case when o.status = 'paid' then o.amount - o.withholding else 0 end
           or (select coalesce(sum(e.amount), 0) from internal.ledger_entries e where e.payout_id = o.id and e.holder = 'tax_withheld') <>
              case when o.status = 'paid' then o.withholding else 0 end
           or (select coalesce(sum(e.amount), 0) from internal.ledger_entries e where e.payout_id = o.id and e.holder = 'payee') <>
              case when o.status = 'failed' then 0 else -o.amount end)`,
        [tenant],
      ),
      [],
      "a payout whose ledger entries do not match it",
    );
    const pending = (
      await q<{ ledger: string; open: string }>(
        `select (select coalesce(sum(amount), 0) from internal.ledger_entries where tenant_id = $1 and holder = 'payouts_pending')::text as ledger,
           (select coalesce(sum(amount), 0) from internal.payouts where tenant_id = $1 and status in ('requested', 'approved'))::text as open`,
        [tenant],
      )
    )[0] as { ledger: string; open: string };
    assert.equal(
      compare(pending.ledger, pending.open),
      0,
      "payouts pending in the ledger are the open requests",
    );
    // Paid (or being paid) never more than earned: at each request, the payee's payouts so far
    // (those that did not fail) are at most what the ledger had credited them (earnings, voids and
    // conversions) until then. Later corrections may take a paid payee below zero (docs/payouts.md).
    assert.deepEqual(
      await q(
        `with requests as (
           select o.id, o.payee_id, o.currency, o.amount, o.status, r.id as entry from internal.payouts o
           join internal.ledger_entries r on r.payout_id = o.id and r.txn_kind = 'payout_request' and r.holder = 'payee'
           where o.tenant_id = $1)
         select x.id, x.amount::text from requests x where x.status <> 'failed'
           and (select sum(y.amount) from requests y where y.payee_id = x.payee_id and y.status <> 'failed'
                  and y.entry <= x.entry) >
               (select coalesce(sum(e.amount), 0) from internal.ledger_entries e where e.payee_id = x.payee_id
                  and e.currency = x.currency and e.txn_kind in ('allocation', 'void', 'conversion') and e.id < x.entry)`,
        [tenant],
      ),
      [],
      "a payee paid more than they earned",
    );

    // 3. Each allocated sum: the payees' shares add up to its net after fee and recoupment, exactly.
    const groupKey = "account_id, release_id, track_id, store, territory, currency";
    assert.deepEqual(
      await q(
        `with lines as (
           select import_id, ${groupKey}, period_start as usage_period, sum(net) as net from internal.royalty_lines
           where tenant_id = $1 and account_id is not null and reverses_line_id is null
           group by import_id, ${groupKey}, period_start),
         alloc as (
           select import_id, ${groupKey}, usage_period, sum(amount + fee_amount + recouped_amount) as net
           from internal.ledger_entries where tenant_id = $1 and txn_kind = 'allocation' and holder = 'payee'
           group by import_id, ${groupKey}, usage_period)
         select l.import_id, l.net::text as lines, a.net::text as allocated from lines l
         full join alloc a using (import_id, account_id, release_id, track_id, store, territory, currency, usage_period)
         where l.net is distinct from a.net`,
        [tenant],
      ),
      [],
      "an allocated sum whose payee shares do not add up to its lines' net",
    );
    assert.deepEqual(
      await q(
        `with g as (
           select import_id, ${groupKey}, usage_period, sum(amount) as remaining, sum(fee_amount) as fee,
             sum(recouped_amount) as recouped
           from internal.ledger_entries where tenant_id = $1 and txn_kind = 'allocation' and holder = 'payee'
           group by import_id, ${groupKey}, usage_period)
         select e.id, e.amount::text, ss.share::text from internal.ledger_entries e
         join g using (import_id, account_id, release_id, track_id, store, territory, currency, usage_period)
         left join internal.split_shares ss on ss.version_id = e.split_version_id and ss.payee_id = e.payee_id
         where e.tenant_id = $1 and e.txn_kind = 'allocation' and e.holder = 'payee'
           and (e.amount <> g.remaining * coalesce(ss.share, 100) / 100 or e.fee_amount <> g.fee * coalesce(ss.share, 100) / 100
             or e.recouped_amount <> g.recouped * coalesce(ss.share, 100) / 100
             or (e.split_version_id is not null and ss.share is null)
             or (e.split_version_id is null and e.payee_id <> (select id from internal.payees where account_id = e.account_id and kind = 'account')))`,
        [tenant],
      ),
      [],
      "a payee entry that is not its share of the sum",
    );
    // Per import, account and currency: the store, fee and recoupable entries match the payees'.
    assert.deepEqual(
      await q(
        `select import_id, account_id, currency from internal.ledger_entries
         where tenant_id = $1 and txn_kind = 'allocation'
         group by import_id, account_id, currency
         having sum(amount) filter (where holder = 'fees') is distinct from nullif(sum(fee_amount) filter (where holder = 'payee'), 0)
           or coalesce(sum(amount) filter (where holder = 'recoupable'), 0) <> sum(recouped_amount) filter (where holder = 'payee')
           or sum(amount) filter (where holder = 'store') <> -(select sum(l.net) from internal.royalty_lines l
             where l.import_id = internal.ledger_entries.import_id and l.account_id = internal.ledger_entries.account_id
               and l.currency = internal.ledger_entries.currency and l.reverses_line_id is null)`,
        [tenant],
      ),
      [],
      "an allocation whose store, fee or recoupable entries do not match its payee entries",
    );
    // A recoupable is never recouped below zero nor above its amount.
    assert.deepEqual(
      await q(
        `select c.id, c.amount::text, -coalesce(sum(e.amount), 0) as unrecouped from internal.recoupables c
         left join internal.ledger_entries e on e.recoupable_id = c.id where c.tenant_id = $1
         group by c.id having -coalesce(sum(e.amount), 0) < 0 or -coalesce(sum(e.amount), 0) > c.amount`,
        [tenant],
      ),
      [],
      "a recoupable recouped below zero or past its amount",
    );

    // 4. Replaying an allocation (and a void) posts nothing.
    const count = await ledgerEntries();
    for (const i of w.imports) {
      const again = (await q<{ n: string }>("select internal.allocate_import($1)::text as n", [i.id]))[0]?.n;
      assert.equal(again, "0", "allocate_import replayed posted entries");
      if (i.voided) {
        const rev = (await q<{ n: string }>("select internal.reverse_allocation($1)::text as n", [i.id]))[0]
          ?.n;
        assert.equal(rev, "0", "reverse_allocation replayed posted entries");
      }
    }
    assert.equal(await ledgerEntries(), count);

    // 5. Approved statements never change, state the exact balance rounded, and refuse changes;
    //    ledger entries refuse changes.
    for (const [id, before] of w.approved) {
      const now = (
        await q<{
          payee_id: string;
          period: string;
          row: string;
          document: unknown;
          closing: string;
          exact: string;
          opening: string;
          exact_opening: string;
        }>(
          `select s.payee_id, to_char(s.period, 'YYYY-MM') as period, (to_jsonb(s) - 'document')::text as row, s.document,
             s.closing_balance::text as closing, s.opening_balance::text as opening,
             (select coalesce(sum(e.amount), 0) from internal.ledger_entries e where e.payee_id = s.payee_id
               and e.currency = s.currency and e.period <= s.period)::text as exact,
             (select coalesce(sum(e.amount), 0) from internal.ledger_entries e where e.payee_id = s.payee_id
               and e.currency = s.currency and e.period < s.period)::text as exact_opening
           from internal.statements s where s.id = $1`,
          [id],
        )
      )[0];
      assert.ok(now, `approved statement ${id} is gone`);
      assert.equal(now.row, before.row, "an approved statement's row changed");
      assert.equal(JSON.stringify(now.document), before.document, "an approved statement's document changed");
      const read = await statementFor(tx, now.payee_id, now.period);
      assert.equal(
        JSON.stringify(read),
        before.document,
        "statementFor no longer answers the approved document",
      );
      assert.equal(
        compare(now.closing, roundHalfUp(now.exact, 2)),
        0,
        "closing balance is not the exact balance rounded",
      );
      assert.equal(
        compare(now.opening, roundHalfUp(now.exact_opening, 2)),
        0,
        "opening balance is not the exact one rounded",
      );
      const doc = now.document as {
        opening_balance: string;
        totals: { net: string };
        adjustments_total: string;
        payments_total: string;
        closing_balance: string;
      };
      assert.equal(
        compare(
          sum([doc.opening_balance, doc.totals.net, doc.adjustments_total, doc.payments_total]),
          doc.closing_balance,
        ),
        0,
        "the stated figures do not add up to the closing balance",
      );
    }
    // Each refusal inside a savepoint, so the checks share one transaction.
    const refused = async (sql: string, params: unknown[]) => {
      await tx.query("savepoint refusal");
      try {
        await tx.query(sql, params);
      } catch (error) {
        await tx.query("rollback to savepoint refusal");
        return asDbError(error)?.sqlstate;
      }
      await tx.query("rollback to savepoint refusal");
      return "accepted";
    };
    const entry = (
      await q<{ id: string }>("select id::text from internal.ledger_entries where tenant_id = $1 limit 1", [
        tenant,
      ])
    )[0];
    if (entry) {
      assert.equal(
        await refused("update internal.ledger_entries set amount = amount + 1 where id = $1", [entry.id]),
        "55000",
      );
      assert.equal(
        await refused("update internal.ledger_entries set period = period where id = $1", [entry.id]),
        "55000",
      );
      assert.equal(await refused("delete from internal.ledger_entries where id = $1", [entry.id]), "55000");
    }
    const statement = [...w.approved.keys()][0];
    if (statement) {
      assert.equal(
        await refused("update internal.statements set closing_balance = closing_balance + 1 where id = $1", [
          statement,
        ]),
        "55000",
      );
      assert.equal(
        await refused("update internal.statements set document = '{}' where id = $1", [statement]),
        "55000",
      );
      assert.equal(await refused("delete from internal.statements where id = $1", [statement]), "55000");
    }
  }

  test("random sequences of imports, voids, splits, fees, recoupables, payouts and approvals", async () => {
    const db = t().db;
    const started = Date.now();
    await fc.assert(
      fc.asyncProperty(startArb, fc.array(opArb, { minLength: 1, maxLength: 10 }), async (start, ops) => {
        let mark = performance.now();
        const lap = (what: string) => {
          const now = performance.now();
          spent.set(what, (spent.get(what) ?? 0) + (now - mark));
          mark = now;
        };
        const w = await seedWorld(db);
        lap("seeding");
        for (const op of [...start, ...ops]) {
          await step(w, op);
          lap(op.kind);
          await checkInvariants(w);
          lap("invariants");
        }
      }),
      {
        numRuns: NUM_RUNS,
        examples: EXAMPLES,
        // Bounded: a failure's shrinking stops after this long (reporting the smallest case so far),
        // and runs that did not all finish in it fail rather than pass quietly.
        interruptAfterTimeLimit: 300_000,
        markInterruptAsFailure: true,
        // To replay a failure: MONEY_PROPERTY_SEED and MONEY_PROPERTY_PATH as fast-check printed them.
        ...(process.env.MONEY_PROPERTY_SEED
          ? {
              seed: Number(process.env.MONEY_PROPERTY_SEED),
              path: process.env.MONEY_PROPERTY_PATH,
              endOnFailure: true,
            }
          : {}),
      },
    );
    const did = [...tally].map(([k, n]) => `${k} ${n}`).join(", ");
    const time = [...spent].map(([k, ms]) => `${k} ${(ms / 1000).toFixed(1)} s`).join(", ");
    console.log(
      `# ${t().kind}: ${NUM_RUNS} runs in ${((Date.now() - started) / 1000).toFixed(1)} s (${time}): ${did}`,
    );
  });
});
