import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import type { TenantKeys } from "../src/tenancy/keys.ts";
import type { Account, Tenant } from "../src/tenancy/tenants.ts";
import { sampleCatalogue, writeSampleCsv } from "../src/transfer/sample.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { tempDir } from "./support/process.ts";
import { seedAccount } from "./support/seed.ts";
import { SHARED_REQUIRED, sharedPath } from "./support/shared.ts";

/**
 * /admin/v1/transfers (docs/catalogue.md, "Admin API"): the CSV template or one ERN message as the
 * body, dry run (200) then real run (201), the same body again changes nothing; the tenant's
 * transfers listed and read; another tenant's account and transfers are not found.
 */

type Obj = Record<string, unknown>;
const DJ_MIX = sharedPath("ddex", "ern43", "samples", "8 DjMix.xml");
const djMixMissing = !fs.existsSync(DJ_MIX);

describeEachEngine("catalogue transfer: admin API", (t) => {
  let app: RunningApp;
  let tenant: Tenant;
  let keys: TenantKeys;
  let otherKeys: TenantKeys;
  let account: Account;
  let csv: Buffer;

  before(async () => {
    app = await startApp(t());
    ({ tenant, keys } = await tenantWithKeys(t()));
    ({ keys: otherKeys } = await tenantWithKeys(t()));
    account = await seedAccount(t().db, tenant, "Transfers");
    const file = path.join(tempDir("backline-transfer-admin-"), "catalogue.csv");
    await writeSampleCsv(file, sampleCatalogue(40, 21));
    csv = fs.readFileSync(file);
  });
  after(async () => {
    await app?.close();
  });

  const call = async (
    method: string,
    url: string,
    options: { key?: string; body?: string | Buffer; type?: string } = {},
  ) => {
    const key = options.key ?? keys.service_role_key;
    const res = await fetch(`${app.url}/admin/v1${url}`, {
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

  test("a CSV: dry run 200, import 201, again nothing changes; listed and read back", async () => {
    const dry = await call("POST", `/transfers?account_id=${account.id}&dry_run=true&file_name=cat.csv`, {
      body: csv,
    });
    assert.equal(dry.status, 200, JSON.stringify(dry.body));
    assert.equal(dry.body.object, "transfer_report");
    assert.equal(dry.body.transfer_id, null);
    const planned = (dry.body.counts as { tracks: { create: number } }).tracks.create;
    assert.equal(planned, 40);

    const real = await call("POST", `/transfers?account_id=${account.id}&file_name=cat.csv`, { body: csv });
    assert.equal(real.status, 201, JSON.stringify(real.body));
    assert.equal((real.body.counts as { tracks: { create: number } }).tracks.create, 40);
    const id = real.body.transfer_id as string;

    const again = await call("POST", `/transfers?account_id=${account.id}`, {
      body: csv,
      type: "application/csv",
    });
    assert.equal(again.status, 201);
    assert.deepEqual((again.body.counts as { tracks: unknown }).tracks, {
      create: 0,
      exists: 40,
      problem: 0,
    });

    const list = await call("GET", `/transfers?account_id=${account.id}`);
    assert.equal(list.status, 200);
    const ids = (list.body.data as Obj[]).map((x) => x.id);
    assert.equal(ids.length, 2);
    assert.equal(ids[1], id);
    const one = await call("GET", `/transfers/${id}`);
    assert.equal(one.status, 200);
    assert.equal(one.body.source, "cat.csv");
    assert.equal(one.body.via, "admin");
    assert.equal((one.body.counts as { releases: { create: number } }).releases.create > 0, true);

    // Another tenant: neither the account nor the transfers.
    assert.equal((await call("GET", `/transfers/${id}`, { key: otherKeys.service_role_key })).status, 404);
    assert.deepEqual((await call("GET", "/transfers", { key: otherKeys.service_role_key })).body.data, []);
    const foreign = await call("POST", `/transfers?account_id=${account.id}`, {
      body: csv,
      key: otherKeys.service_role_key,
    });
    assert.equal(foreign.status, 404);
    assert.equal(foreign.body.code, "not_found");
  });

  test("one ERN message as the body", {
    skip: djMixMissing && !SHARED_REQUIRED ? "8 DjMix.xml is not in ../shared" : false,
  }, async () => {
    assert.ok(!djMixMissing, `missing ${DJ_MIX}`);
    const other = await seedAccount(t().db, tenant, "ERN");
    const r = await call("POST", `/transfers?account_id=${other.id}&file_name=mix.xml`, {
      body: fs.readFileSync(DJ_MIX),
      type: "application/xml",
    });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    assert.equal(r.body.format, "ern");
    assert.deepEqual((r.body.counts as { releases: unknown }).releases, { create: 1, exists: 0, problem: 0 });
  });

  test("bad requests: 415 for another body type, 400 for a bad query", async () => {
    const wrong = await call("POST", `/transfers?account_id=${account.id}`, {
      body: "{}",
      type: "application/json",
    });
    assert.equal(wrong.status, 415);
    const noAccount = await call("POST", "/transfers", { body: csv });
    assert.equal(noAccount.status, 400);
    assert.equal(noAccount.body.code, "invalid_request");
  });
});
