// Issue 20, item 8: a page of royalty lines by offset and by keyset (starting_after), over the
// public API on PostgreSQL, with BENCH_LINES lines (default 10,000,000) spread over BENCH_ACCOUNTS
// accounts (default 100: about 100,000 lines per account, as bench/royalties/run.ts makes them).
// The lines are written straight with SQL (generate_series) and rolled up as an import does, so
// the measurement does not wait for an import. Figures in bench/README.md.
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import pino from "pino";
import { loadConfig } from "../../src/config.ts";
import { Db } from "../../src/db/db.ts";
import { migrate } from "../../src/db/migrate.ts";
import { PostgresEngine } from "../../src/db/postgres.ts";
import { rolesSetupSql } from "../../src/db/roles.ts";
import { buildApp } from "../../src/http/app.ts";
import { issueKey } from "../../src/public-api/keys/service.ts";
import { SecretBox } from "../../src/secrets/box.ts";
import { createAccount, createTenant } from "../../src/tenancy/tenants.ts";
import { ADMIN_URL, freePort, withDatabase } from "../support.ts";

const LINES = Number(process.env.BENCH_LINES ?? 10_000_000);
const ACCOUNTS = Number(process.env.BENCH_ACCOUNTS ?? 100);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 200);
const log = (s: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${s}\n`);

const dbName = `backline_bench_keyset_${process.pid}`;
const admin = new pg.Client({ connectionString: ADMIN_URL });
await admin.connect();
await admin.query(rolesSetupSql("authenticator"));
await admin.query(`create database ${dbName}`);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "bench-keyset-"));
const key = randomBytes(32);
const owner = new pg.Client({ connectionString: withDatabase(ADMIN_URL, dbName) });
const db = new Db(
  new PostgresEngine({ url: withDatabase(ADMIN_URL, dbName, "authenticator"), poolSize: 4 }),
  { secrets: new SecretBox(key) },
);
try {
  const ownerEngine = new PostgresEngine({ url: withDatabase(ADMIN_URL, dbName), poolSize: 1 });
  await migrate(ownerEngine);
  await ownerEngine.close();
  await owner.connect();
  const { tenant } = await createTenant(db, { name: "Keyset bench", slug: `keyset-${process.pid}` });
  const accounts: string[] = [];
  for (let i = 0; i < ACCOUNTS; i++)
    accounts.push((await createAccount(db, { tenantId: tenant.id, name: `Label ${i}` })).id);
  const t0 = performance.now();
  const [imp] = (
    await owner.query<{ id: string }>(
      `insert into internal.royalty_imports (tenant_id, format, file_sha256, status, completed_at)
       values ($1, 'backline', repeat('a', 64), 'completed', now()) returning id`,
      [tenant.id],
    )
  ).rows;
  // Per account 20 releases; 3 months; 8 stores; 30 territories; 2 currencies.
  const step = 1_000_000;
  for (let from = 1; from <= LINES; from += step) {
    const to = Math.min(LINES, from + step - 1);
    await owner.query(
      `insert into internal.royalty_lines (import_id, tenant_id, account_id, release_id, line_number, reporting_period,
         period_start, period_end, store, territory, usage_type, units, gross, fees, net, currency)
       select $1, $2, a.account_id, md5(a.account_id::text || (g % 20))::uuid, g, date '2026-09-01',
              m.start, (m.start + interval '1 month - 1 day')::date,
              (array['spotify','apple_music','deezer','tidal','amazon','youtube','tiktok','napster'])[1 + g % 8],
              (array['US','GB','DE','FR','ES','IT','NL','SE','NO','DK','FI','PL','BR','MX','AR','CA','AU','NZ','JP','KR','IN','ZA','NG','EG','TR','IE','BE','AT','CH','PT'])[1 + g % 30],
              'stream', 100 + g % 900, 0.004 * (100 + g % 900), 0.001 * (100 + g % 900), 0.003 * (100 + g % 900),
              (array['USD','EUR'])[1 + g % 2]
       from generate_series($3::bigint, $4::bigint) g
       cross join lateral (select ($5::uuid[])[1 + (g % $6)] as account_id) a
       cross join lateral (select (date '2026-06-01' + make_interval(months => (g % 3)::int))::date as start) m`,
      [imp?.id, tenant.id, from, to, accounts, ACCOUNTS],
    );
    log(`${to} lines`);
  }
  await owner.query(
    `insert into internal.royalty_totals (tenant_id, account_id, release_id, period_start, period_end, store, territory,
       currency, lines, units, streams, gross, fees, net)
     select tenant_id, account_id, release_id, period_start, period_end, store, territory, currency,
            count(*), sum(units), sum(units), sum(gross), sum(fees), sum(net)
     from internal.royalty_lines group by 1, 2, 3, 4, 5, 6, 7, 8`,
  );
  await owner.query("analyze internal.royalty_lines; analyze internal.royalty_totals");
  log(`${LINES} lines written and rolled up in ${((performance.now() - t0) / 1000).toFixed(0)} s`);

  const account = accounts[0] as string;
  const ids = (
    await owner.query<{ id: string }>(
      "select id::text as id from internal.royalty_lines where account_id = $1 order by random() limit $2",
      [account, REQUESTS],
    )
  ).rows.map((r) => r.id);
  const perAccount = Number(
    (
      await owner.query<{ n: string }>(
        "select count(*) as n from internal.royalty_lines where account_id = $1",
        [account],
      )
    ).rows[0]?.n,
  );

  const port = await freePort();
  const config = loadConfig({
    PORT: String(port),
    LOG_LEVEL: "silent",
    DATA_DIR: dir,
    DATABASE_URL: withDatabase(ADMIN_URL, dbName, "authenticator"),
    ENCRYPTION_KEY: key.toString("base64"),
  });
  const app = buildApp({ config, db, logger: pino({ level: "silent" }) });
  await app.listen({ port, host: "127.0.0.1" });
  try {
    const { secret } = await issueKey(db, { accountId: account, mode: "live", scopes: ["royalties:read"] });
    await db.asService((tx) =>
      tx.query("update internal.tenants set settings = settings || $2::jsonb where id = $1", [
        tenant.id,
        JSON.stringify({ public_api_rate_limit: { max: 1_000_000, windowSeconds: 1 } }),
      ]),
    );
    const base = `http://127.0.0.1:${port}/api/public/v1/royalties?limit=100`;
    const get = async (u: string) => {
      const t = performance.now();
      const res = await fetch(u, { headers: { authorization: `Bearer ${secret}` } });
      const body = (await res.json()) as { data?: unknown[] };
      if (res.status !== 200 || !body.data?.length)
        throw new Error(`GET ${u}: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
      return performance.now() - t;
    };
    const pct = (xs: number[], p: number) =>
      [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil(xs.length * p) - 1)] ?? 0;
    for (let i = 0; i < 20; i++) await get(base);
    const first: number[] = [];
    const offset: number[] = [];
    const keyset: number[] = [];
    for (let i = 0; i < REQUESTS; i++) {
      first.push(await get(base));
      offset.push(
        await get(`${base}&offset=${Math.floor(Math.random() * Math.min(1_000_000, perAccount - 100))}`),
      );
      keyset.push(await get(`${base}&starting_after=${ids[i % ids.length]}`));
    }
    const row = (name: string, xs: number[]) =>
      `| ${name} | ${pct(xs, 0.5).toFixed(1)} | ${pct(xs, 0.99).toFixed(1)} | ${Math.max(...xs).toFixed(1)} |`;
    console.log(
      `${LINES.toLocaleString("en")} lines, ${ACCOUNTS} accounts (${perAccount.toLocaleString("en")} for the key's account), ${REQUESTS} requests each, interleaved; PostgreSQL ${(await owner.query<{ server_version: string }>("show server_version")).rows[0]?.server_version}; ${os.cpus().length} cores, load ${os
        .loadavg()
        .map((l) => l.toFixed(1))
        .join(" ")}`,
    );
    console.log("| page of 100 lines | p50 ms | p99 ms | max ms |");
    console.log("|---|---|---|---|");
    console.log(row("first page (offset 0)", first));
    console.log(row("random offset (before: the only way down)", offset));
    console.log(row("random starting_after (keyset)", keyset));
  } finally {
    await app.close();
  }
} finally {
  await db.close();
  await owner.end().catch(() => {});
  await admin.query(`drop database if exists ${dbName} with (force)`);
  await admin.end();
  fs.rmSync(dir, { recursive: true, force: true });
}
