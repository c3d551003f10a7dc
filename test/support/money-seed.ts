import assert from "node:assert/strict";
import { after, before } from "node:test";
import type { Browser } from "playwright-core";
import type { Config } from "../../src/config.ts";
import type { Db } from "../../src/db/db.ts";
import { setFee } from "../../src/money/operator.ts";
import { importRoyalties } from "../../src/royalties/import.ts";
import { createAccount, createTenant } from "../../src/tenancy/tenants.ts";
import { launchBrowser } from "./browser.ts";
import { type ConsoleStack, seedPasswordUser, startConsoleStack } from "./console.ts";
import { portalStories } from "./portal-browser.ts";
import { PASSWORD } from "./portal-seed.ts";
import { reportFile, seedDeliveredRelease } from "./royalties.ts";

/**
 * The world of the portal's money pages (test/portal/money.test.ts), written before the server
 * starts (the embedded database is the server's once it runs):
 *
 * - tenant "Harbour" (slug harbour): "Lantern Records", owned by `owner@lantern.test`, with
 *   `viewer@lantern.test` as a viewer; its delivered release "Night Drive" whose first track's
 *   splits name Ana Lima (`ana@example.org`, 40) and June Park (60) by e-mail, a 10% fee, and one
 *   store report imported as the operator imports it (docs/payouts.md): Ana is owed exactly
 *   11.5488 USD ((30.00 + 2.08) × 0.9 × 0.4). Ana and June have passwords and are members of no
 *   account: they sign in only to be paid. "Other Label", owned by `other@label.test`, owes nobody;
 * - tenant "Elsewhere" (slug elsewhere): a user with Ana's very address, who is owed nothing there.
 */

export const REPORT = [
  "reporting_period,sale_period,store,territory,upc,isrc,usage_type,units,gross,fees,net,currency",
  "2026-11,2026-10,spotify,US,012345000010,QZABC2600001,stream,8000,42.86,12.86,30.00,USD",
  "2026-11,2026-10,apple_music,GB,012345000010,QZABC2600001,download,3,2.97,0.89,2.08,USD",
  "2026-11,2026-10,spotify,US,012345000010,QZABC2600002,stream,500,2.00,0.60,1.40,USD",
  "",
].join("\n");

export interface MoneyWorld {
  harbour: { id: string; slug: string; anonKey: string; serviceKey: string };
  elsewhere: { slug: string };
  lantern: { id: string };
  owner: string;
  viewer: string;
  ana: string;
  /** June Park, the other payee of the split: signs in too, with no authenticator app yet. */
  june: string;
  other: string;
}

export async function seedMoneyWorld(db: Db, _config: Config): Promise<MoneyWorld> {
  const { tenant, keys } = await createTenant(db, { name: "Harbour", slug: "harbour" });
  const lantern = await createAccount(db, { tenantId: tenant.id, name: "Lantern Records", kind: "label" });
  const otherLabel = await createAccount(db, { tenantId: tenant.id, name: "Other Label", kind: "label" });
  const owner = await seedPasswordUser(db, tenant.id, "owner@lantern.test", PASSWORD);
  const viewer = await seedPasswordUser(db, tenant.id, "viewer@lantern.test", PASSWORD);
  const ana = await seedPasswordUser(db, tenant.id, "ana@example.org", PASSWORD);
  const other = await seedPasswordUser(db, tenant.id, "other@label.test", PASSWORD);
  const june = await seedPasswordUser(db, tenant.id, "june@lantern.test", PASSWORD);
  await db.asService((tx) =>
    tx.query(
      `insert into internal.memberships (tenant_id, account_id, user_id, role)
       values ($1, $2, $3, 'owner'), ($1, $2, $4, 'viewer'), ($1, $5, $6, 'owner')`,
      [tenant.id, lantern.id, owner.id, viewer.id, otherLabel.id, other.id],
    ),
  );
  const release = await seedDeliveredRelease(db, lantern.id, { title: "Night Drive", upc: "012345000010" }, [
    { title: "Night Drive", isrc: "QZABC2600001", duration: 200, track_number: 1 },
    { title: "Neon", isrc: "QZABC2600002", duration: 180, track_number: 2 },
  ]);
  await db.asService((tx) =>
    tx.query("update public.tracks set splits = $2 where id = $1", [
      release.tracks[0]?.id,
      JSON.stringify([
        { name: "June Park", email: "june@lantern.test", share: 60 },
        { name: "Ana Lima", email: "ana@example.org", share: 40 },
      ]),
    ]),
  );
  await setFee(db, tenant.id, {}, "10");
  const imported = await importRoyalties(db, {
    tenantId: tenant.id,
    format: "backline",
    file: reportFile(REPORT),
  });
  assert.equal(imported.status, "completed");

  const far = await createTenant(db, { name: "Elsewhere", slug: "elsewhere" });
  await seedPasswordUser(db, far.tenant.id, "ana@example.org", PASSWORD);
  return {
    harbour: {
      id: tenant.id,
      slug: tenant.slug,
      anonKey: keys.anon_key,
      serviceKey: keys.service_role_key,
    },
    elsewhere: { slug: far.tenant.slug },
    lantern: { id: lantern.id },
    owner: owner.email,
    viewer: viewer.email,
    ana: ana.email,
    june: june.email,
    other: other.email,
  };
}

/**
 * A describe block's portal on the money world: `npm start`'s server on the embedded database
 * and a Chromium, as test/support/portal-browser.ts's portalSuite starts them for its own world.
 */
export function moneySuite() {
  const pageErrors: string[] = [];
  const started = {
    stack: undefined as unknown as ConsoleStack,
    world: undefined as unknown as MoneyWorld,
    browser: undefined as unknown as Browser,
  };
  const stories = portalStories(
    () => started.browser,
    () => started.stack.url,
    pageErrors,
  );
  before(async () => {
    const [stack, launched] = await Promise.all([
      startConsoleStack("pglite", seedMoneyWorld),
      launchBrowser(),
    ]);
    started.stack = stack.stack;
    started.world = stack.seeded;
    started.browser = launched;
  });
  after(async () => {
    await started.browser?.close();
    await started.stack?.stop();
    assert.deepEqual(pageErrors, [], "the portal threw in the page");
  });
  return {
    get stack(): ConsoleStack {
      return started.stack;
    },
    get world(): MoneyWorld {
      return started.world;
    },
    portal: (slug = started.world.harbour.slug): string => `${started.stack.url}/portal/t/${slug}`,
    story: stories.story,
    signIn: stories.signIn,
    /** The operator, through /admin/v1 with the tenant's service-role key. */
    async admin(method: "GET" | "POST", path: string, body?: unknown): Promise<unknown> {
      const key = started.world.harbour.serviceKey;
      const res = await fetch(`${started.stack.url}/admin/v1${path}`, {
        method,
        headers: {
          apikey: key,
          authorization: `Bearer ${key}`,
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await res.text();
      assert.ok(res.ok, `${method} /admin/v1${path}: ${res.status} ${text}`);
      return text ? JSON.parse(text) : undefined;
    },
  };
}
