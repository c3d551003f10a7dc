import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { Db } from "../src/db/db.ts";
import { PgliteEngine } from "../src/db/pglite.ts";
import { loadSecretBox } from "../src/secrets/box.ts";
import type { TenantKeys } from "../src/tenancy/keys.ts";
import type { Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { copyMigratedDatabase, describeEachEngine } from "./support/db.ts";
import { runCli, tempDir } from "./support/process.ts";
import {
  countLines,
  reportFile,
  SAMPLES,
  seedDeliveredRelease,
  seedSampleCatalog,
} from "./support/royalties.ts";
import { seedAccount, seedTenant } from "./support/seed.ts";

/** The operator's side of royalty imports: the admin API (both engines) and the CLI (a real process). */

type Obj = Record<string, unknown>;

/** A small ROYALTY_IMPORT_MAX_BYTES for the admin API suite (the samples are under 1 KB). */
const MAX_BYTES = 4096;
/** The admin upload's temporary files (src/royalties/admin.ts). */
const tempFiles = () => fs.readdirSync(os.tmpdir()).filter((f) => f.startsWith("backline-royalty-"));

describeEachEngine("royalties: admin API", (t) => {
  let app: RunningApp;
  let tenant: Tenant;
  let keys: TenantKeys;
  let otherKeys: TenantKeys;

  before(async () => {
    app = await startApp(t(), { ROYALTY_IMPORT_MAX_BYTES: String(MAX_BYTES) });
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
  test("a body over ROYALTY_IMPORT_MAX_BYTES is 413 file_too_large, declared or counted, and leaves no file", async () => {
    const leftBefore = new Set(tempFiles());
    const line = "2026-03,2026-02,spotify,US,012345000010,QZABC2600001,stream,1,0.1,0,0.1,USD\n";
    const big = `reporting_period,sale_period,store,territory,upc,isrc,usage_type,units,gross,fees,net,currency\n${line.repeat(
      Math.ceil(MAX_BYTES / line.length) + 5,
    )}`;
    assert.ok(Buffer.byteLength(big) > MAX_BYTES);
    const declared = await fetch(`${app.url}/admin/v1/royalty-imports?format=backline`, {
      method: "POST",
      headers: {
        apikey: keys.service_role_key,
        authorization: `Bearer ${keys.service_role_key}`,
        "content-type": "text/csv",
      },
      body: big,
    });
    assert.equal(declared.status, 413);
    assert.equal(declared.headers.get("connection"), "close");
    const problem = (await declared.json()) as Obj;
    assert.equal(problem.code, "file_too_large");
    assert.match(String(problem.detail), /larger than 4096 bytes \(ROYALTY_IMPORT_MAX_BYTES\)/);

    // Chunked (no Content-Length): counted as it is written, stopped past the limit.
    const bytes = Buffer.from(big);
    const chunked = await fetch(`${app.url}/admin/v1/royalty-imports?format=backline`, {
      method: "POST",
      headers: {
        apikey: keys.service_role_key,
        authorization: `Bearer ${keys.service_role_key}`,
        "content-type": "text/csv",
      },
      body: new ReadableStream({
        start(controller) {
          for (let i = 0; i < bytes.length; i += 1000) controller.enqueue(bytes.subarray(i, i + 1000));
          controller.close();
        },
      }),
      duplex: "half",
    } as RequestInit);
    assert.equal(chunked.status, 413);
    assert.equal(((await chunked.json()) as Obj).code, "file_too_large");
    assert.deepEqual(
      tempFiles().filter((f) => !leftBefore.has(f)),
      [],
    );
    assert.equal(await countLines(t().db, tenant.id), 4, "nothing was imported");
    // At the limit exactly, the body is taken.
    const exact = reportFile(big.slice(0, big.lastIndexOf("\n", MAX_BYTES) + 1));
    const ok = await call("POST", "/royalty-imports?format=backline", { body: fs.readFileSync(exact) });
    assert.equal(ok.status, 201, JSON.stringify(ok.body));
  });

  test("the raw report parser serves the import route only: a text/csv body elsewhere is 415", async () => {
    const id = "00000000-0000-4000-8000-000000000000";
    for (const path of [
      `/releases/${id}/reject`,
      `/deliveries/${id}/report`,
      `/oac-requests/${id}/approve`,
    ]) {
      const r = await call("POST", path, { body: "reason,x\n", type: "text/csv" });
      assert.equal(r.status, 415, `${path}: ${JSON.stringify(r.body)}`);
      const octets = await call("POST", path, { body: "x", type: "application/octet-stream" });
      assert.equal(octets.status, 415, path);
    }
  });
});

describe("royalties: backline royalties import (CLI)", () => {
  const dataDir = tempDir();
  const env = { DATA_DIR: dataDir };
  let tenant: Tenant;
  /** A release being taken down, its takedown sent to spotify and waiting for the store's word. */
  let takedown: { releaseId: string; deliveryId: string; insertId: string };

  before(async () => {
    await copyMigratedDatabase(dataDir);
    const engine = await PgliteEngine.open({ dataDir: path.join(dataDir, "pgdata") });
    const db = new Db(engine, { secrets: loadSecretBox({ encryptionKey: undefined, dataDir }) });
    tenant = await seedTenant(db);
    const account = await seedAccount(db, tenant, "A");
    await seedSampleCatalog(db, account);
    const release = await seedDeliveredRelease(db, account.id, { title: "Gone" }, [], "takedown_requested");
    takedown = await db.asService(async (tx) => {
      const ids = [];
      for (const [action, status] of [
        ["insert", "live"],
        ["takedown", "takedown_sent"],
      ]) {
        const r = await tx.query<{ id: string }>(
          `insert into internal.release_deliveries (release_id, account_id, store, action, status, delivered_at, created_at)
           values ($1, $2, 'spotify', $3, $4, now(), now() - make_interval(mins => $5)) returning id::text as id`,
          // The insert first, the takedown after it (as the pipeline makes them).
          [release.id, account.id, action, status, action === "insert" ? 10 : 0],
        );
        ids.push(r.rows[0]?.id as string);
      }
      return { releaseId: release.id, insertId: ids[0] as string, deliveryId: ids[1] as string };
    });
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
    assert.equal(unknown.code, 2, "an unknown format is a usage error");
    assert.match(unknown.stderr, /^backline: option '--format <name>' argument 'excel' is invalid/);
  });

  test("royalties void: the import's lines leave the totals, --json prints the voided import; twice: exit 1; the same file imports again", async () => {
    const file = reportFile(fs.readFileSync(SAMPLES["streaming-monthly"]));
    const args = ["royalties", "import", file, "--tenant", tenant.slug, "--format", "streaming-monthly"];
    const first = await runCli(["--json", ...args, "--store", "deezer"], env);
    assert.equal(first.code, 0, first.stderr);
    const id = String((JSON.parse(first.stdout) as { import: Obj }).import.id);

    const noReason = await runCli(["royalties", "void", id], env);
    assert.equal(noReason.code, 2, "a missing option is a usage error");
    assert.match(noReason.stderr, /--reason/);
    const blank = await runCli(["royalties", "void", id, "--reason", "  "], env);
    assert.equal(blank.code, 1);
    assert.equal(blank.stderr, "backline: a void needs a reason: it is recorded and shown\n");

    const voided = await runCli(
      ["--json", "royalties", "void", id, "--reason", "Wrong store: not Deezer"],
      env,
    );
    assert.equal(voided.code, 0, voided.stderr);
    const out = JSON.parse(voided.stdout) as Obj;
    assert.deepEqual(
      [out.id, out.status, out.void_reason, out.voided_via],
      [id, "voided", "Wrong store: not Deezer", "cli"],
    );
    const twice = await runCli(["royalties", "void", id, "--reason", "Again"], env);
    assert.equal(twice.code, 1);
    assert.match(twice.stderr, new RegExp(`^backline: royalty import ${id} was voided already`));
    const shown = await runCli(["royalties", "show", id], env);
    assert.match(shown.stdout, /: voided\n/);
    assert.match(shown.stdout, /voided .* \(cli\): Wrong store: not Deezer/);
    for (const bad of ["not-a-uuid", "00000000-0000-4000-8000-000000000000"]) {
      const r = await runCli(["royalties", "void", bad, "--reason", "x"], env);
      assert.equal(r.code, 1, bad);
      assert.equal(r.stderr, `backline: no royalty import ${bad}\n`);
    }
    const again = await runCli(["--json", ...args, "--store", "spotify"], env);
    assert.equal(again.code, 0, again.stderr);
    assert.equal((JSON.parse(again.stdout) as Obj).status, "completed");
  });

  test("deliveries report --taken-down records the store's confirmation by hand, with a note; the release is taken down", async () => {
    const noNote = await runCli(["deliveries", "report", takedown.deliveryId, "--taken-down"], env);
    assert.equal(noNote.code, 2);
    assert.equal(
      noNote.stderr,
      "backline: --taken-down needs --note: who confirmed the takedown, and how (see `backline deliveries report --help`)\n",
    );
    const both = await runCli(["deliveries", "report", takedown.deliveryId, "--taken-down", "--live"], env);
    assert.equal(both.code, 2);
    assert.equal(
      both.stderr,
      "backline: say --live, --error or --taken-down (see `backline deliveries report --help`)\n",
    );
    const insert = await runCli(
      ["deliveries", "report", takedown.insertId, "--taken-down", "--note", "Spotify e-mail"],
      env,
    );
    assert.equal(insert.code, 1);
    assert.match(insert.stderr, /a store reports only on a delivery it received/);

    const note = "Spotify partner support, e-mail of 25 November";
    const r = await runCli(
      ["--json", "deliveries", "report", takedown.deliveryId, "--taken-down", "--note", note],
      env,
    );
    assert.equal(r.code, 0, r.stderr);
    const row = JSON.parse(r.stdout) as Obj;
    assert.deepEqual(
      [row.status, row.confirmed_by, row.confirmed_via, row.confirmation_note],
      ["taken_down", "operator", "cli", note],
    );
    assert.ok(row.taken_down_at);
    const list = await runCli(["--json", "deliveries", "list", "--release", takedown.releaseId], env);
    assert.deepEqual((JSON.parse(list.stdout) as Obj[]).map((d) => [d.action, d.status]).sort(), [
      ["insert", "live"],
      ["takedown", "taken_down"],
    ]);
    const twice = await runCli(
      ["deliveries", "report", takedown.deliveryId, "--taken-down", "--note", note],
      env,
    );
    assert.equal(twice.code, 1);
    const engine = await PgliteEngine.open({ dataDir: path.join(dataDir, "pgdata") });
    const db = new Db(engine);
    try {
      const status = await db.asService((tx) =>
        tx.query<{ status: string }>("select status from public.releases where id = $1", [
          takedown.releaseId,
        ]),
      );
      assert.equal(status.rows[0]?.status, "taken_down");
    } finally {
      await db.close();
    }
  });

  test("royalties show with an id that is not a UUID: one line, exit 1; --period says what it does", async () => {
    for (const id of [
      "not-a-uuid",
      "0-----------------------------------",
      "12345678-1234-1234-1234-12345678901z",
    ]) {
      const r = await runCli(["royalties", "show", id], env);
      assert.equal(r.code, 1, id);
      assert.equal(r.stderr, `backline: no import ${id}\n`);
      assert.equal(r.stdout, "");
    }
    const help = await runCli(["royalties", "import", "--help"], env);
    assert.match(
      help.stdout.replace(/\s+/g, " "),
      /--period <YYYY-MM> the reporting month for lines that give none/,
    );
  });
});
