import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { Db } from "../src/db/db.ts";
import { migrate } from "../src/db/migrate.ts";
import { PgliteEngine } from "../src/db/pglite.ts";
import type { TenantKeys } from "../src/tenancy/keys.ts";
import type { Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { runCli, tempDir } from "./support/process.ts";
import { countLines, reportFile, SAMPLES, seedSampleCatalog } from "./support/royalties.ts";
import { seedAccount, seedTenant } from "./support/seed.ts";

/** The operator's side of royalty imports: the admin API (both engines) and the CLI (a real process). */

type Obj = Record<string, unknown>;

describeEachEngine("royalties: admin API", (t) => {
  let app: RunningApp;
  let tenant: Tenant;
  let keys: TenantKeys;
  let otherKeys: TenantKeys;

  before(async () => {
    app = await startApp(t());
    ({ tenant, keys } = await tenantWithKeys(t()));
    ({ keys: otherKeys } = await tenantWithKeys(t()));
    const account = await seedAccount(t().db, tenant, "A");
    await seedSampleCatalog(t().db, account);
  });
  after(async () => {
    await app?.close();
  });

  const call = async (
    method: string,
    path: string,
    options: { key?: string; body?: string | Buffer; type?: string } = {},
  ) => {
    const key = options.key ?? keys.service_role_key;
    const res = await fetch(`${app.url}/admin/v1${path}`, {
      method,
      headers: {
        apikey: key,
        authorization: `Bearer ${key}`,
        ...(options.body !== undefined ? { "content-type": options.type ?? "text/csv" } : {}),
      },
      ...(options.body !== undefined ? { body: options.body } : {}),
    });
    return { status: res.status, body: (await res.json()) as Obj };
  };

  test("POST /royalty-imports imports the body (201), the same report again is 200 duplicate", async () => {
    const body = fs.readFileSync(SAMPLES["streaming-monthly"]);
    const r = await call(
      "POST",
      "/royalty-imports?format=streaming-monthly&store=deezer&file_name=deezer-03.csv",
      {
        body,
      },
    );
    assert.equal(r.status, 201, JSON.stringify(r.body));
    const report = r.body.import as Obj;
    assert.equal(r.body.status, "completed");
    assert.equal(report.store, "deezer");
    assert.equal(report.file_name, "deezer-03.csv");
    assert.equal(report.source, "admin_api");
    assert.equal(report.lines_matched, 4);
    const again = await call("POST", "/royalty-imports?format=streaming-monthly&store=deezer", {
      body,
      type: "application/octet-stream",
    });
    assert.equal(again.status, 200);
    assert.equal(again.body.status, "duplicate");
    assert.equal((again.body.import as Obj).id, report.id);
    assert.equal(await countLines(t().db, tenant.id), 4);

    const list = await call("GET", "/royalty-imports");
    assert.deepEqual(
      (list.body.data as Obj[]).map((i) => i.id),
      [report.id],
    );
    const one = await call("GET", `/royalty-imports/${report.id}`);
    assert.equal(one.status, 200);
    assert.equal(one.body.lines_total, 4);
    // Another tenant's operator sees none of it.
    assert.equal(
      (await call("GET", `/royalty-imports/${report.id}`, { key: otherKeys.service_role_key })).status,
      404,
    );
    assert.deepEqual(
      (await call("GET", "/royalty-imports", { key: otherKeys.service_role_key })).body.data,
      [],
    );
  });

  test("a malformed report is 422 with its line numbers; bad requests are 400, 415, 401", async () => {
    const bad = reportFile(
      "reporting_period,sale_period,store,territory,upc,isrc,usage_type,units,gross,fees,net,currency\n" +
        "2026-03,2026-02,spotify,US,012345000010,QZABC2600001,stream,1,0.1,0,0.1,usd\n" +
        "2026-03,2026-02,spotify,US,012345000010,QZABC2600001,stream,-1,0.1,0,0.1,USD\n",
    );
    const r = await call("POST", "/royalty-imports?format=backline", { body: fs.readFileSync(bad) });
    assert.equal(r.status, 422);
    assert.equal(r.body.status, "rejected");
    assert.deepEqual(
      ((r.body.import as Obj).errors as Obj[]).map((e) => e.line),
      [3],
    );
    const noFormat = await call("POST", "/royalty-imports?format=excel", { body: "x" });
    assert.equal(noFormat.status, 400);
    assert.equal(noFormat.body.param, "format");
    const json = await call("POST", "/royalty-imports?format=backline", {
      body: "{}",
      type: "application/json",
    });
    assert.equal(json.status, 415);
    const storeOnBackline = await call("POST", "/royalty-imports?format=backline&store=spotify", {
      body: "x",
    });
    assert.equal(storeOnBackline.status, 422);
    // The anon key is not the operator's.
    assert.equal((await call("GET", "/royalty-imports", { key: keys.anon_key })).status, 403);
  });
});

describe("royalties: backline royalties import (CLI)", () => {
  const dataDir = tempDir();
  const env = { DATA_DIR: dataDir };
  let tenant: Tenant;

  before(async () => {
    const engine = await PgliteEngine.open({ dataDir: path.join(dataDir, "pgdata") });
    await migrate(engine);
    const db = new Db(engine);
    tenant = await seedTenant(db);
    await seedSampleCatalog(db, await seedAccount(db, tenant, "A"));
    await db.close();
  });
  after(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  test("--json: progress lines on stderr, the report on stdout; again: duplicate; malformed: exit 1", async () => {
    const r = await runCli(
      [
        "--json",
        "royalties",
        "import",
        SAMPLES["video-ugc"],
        "--tenant",
        tenant.slug,
        "--format",
        "video-ugc",
      ],
      env,
    );
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout) as { status: string; import: Obj };
    assert.equal(out.status, "completed");
    assert.equal(out.import.lines_unmatched, 1);
    const progress = r.stderr
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Obj);
    assert.equal(progress.at(-1)?.event, "progress");
    assert.equal(progress.at(-1)?.lines, 4);

    const again = await runCli(
      ["royalties", "import", SAMPLES["video-ugc"], "--tenant", tenant.slug, "--format", "video-ugc"],
      env,
    );
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, new RegExp(`Already imported: the same file as import ${out.import.id}`));

    const bad = reportFile(fs.readFileSync(SAMPLES["video-ugc"], "utf8").replace("10000", "many"));
    const rejected = await runCli(
      ["royalties", "import", bad, "--tenant", tenant.slug, "--format", "video-ugc"],
      env,
    );
    assert.equal(rejected.code, 1);
    assert.match(rejected.stdout, /line 5: units "many" is not a whole number/);
    assert.match(rejected.stdout, /Nothing was imported/);

    const show = await runCli(["royalties", "show", String(out.import.id)], env);
    assert.match(
      show.stdout,
      /USD: 4 lines, 12840 units, gross 1\.578567891234, fees 0, net 1\.578567891234/,
    );
    assert.match(show.stdout, /ISRC GBXYZ2600099/);
    const unknown = await runCli(
      ["royalties", "import", bad, "--tenant", tenant.slug, "--format", "excel"],
      env,
    );
    assert.equal(unknown.code, 1);
  });
});
