import assert from "node:assert/strict";
import { test } from "node:test";
import type { Db } from "../src/db/db.ts";
import { describeEachEngine } from "./support/db.ts";
import { forceReleaseStatus, seedAccount, seedTenant, seedUser, userClaims } from "./support/seed.ts";

/**
 * Notifications (migration 0008; docs/operator.md): every member of the account hears of its
 * release's approval, rejection, going live and taking down, of each store's delivery going live,
 * failing or being removed, of a refused takedown and of an OAC decision — written in the
 * transaction of the change, whoever made it. Nobody outside the account hears of it.
 */

type Row = { kind: string; title: string; body: string | null; data: Record<string, unknown> };

describeEachEngine("notifications", (t) => {
  const db = (): Db => t().db;
  const sql = async <T = Record<string, unknown>>(text: string, params: unknown[] = []): Promise<T[]> =>
    db().asService(async (tx) => (await tx.query<T & Record<string, unknown>>(text, params)).rows);

  async function world() {
    const tenant = await seedTenant(db());
    const account = await seedAccount(db(), tenant, "Night Owl");
    const other = await seedAccount(db(), tenant, "Elsewhere");
    const owner = await seedUser(db(), tenant, [{ account, role: "owner" }]);
    const viewer = await seedUser(db(), tenant, [{ account, role: "viewer" }]);
    const stranger = await seedUser(db(), tenant, [{ account: other, role: "owner" }]);
    const [artist] = await sql<{ id: string }>(
      "insert into public.artist_profiles (account_id, name) values ($1, 'Luna Vale') returning id",
      [account.id],
    );
    const [release] = await sql<{ id: string }>(
      "insert into public.releases (account_id, artist_id, title) values ($1, $2, 'Night Drive') returning id",
      [account.id, artist?.id],
    );
    if (!release || !artist) throw new Error("seed");
    return { account, owner, viewer, stranger, release: release.id, artist: artist.id };
  }

  /** What `user` reads of their notifications, through row-level security, oldest first. */
  async function inbox(user: Awaited<ReturnType<typeof world>>["owner"]): Promise<Row[]> {
    return db().withRequestContext(
      userClaims(user),
      async (tx) =>
        (
          await tx.query<Row>(
            "select kind, title, body, data from public.notifications order by created_at, kind",
          )
        ).rows,
    );
  }

  test("a release's approval, rejection, live and takedown reach every member, and no one else", async () => {
    const w = await world();
    await forceReleaseStatus(db(), w.release, "approved");
    await sql(
      "update public.releases set status = 'rejected', status_reason = 'Cover art shows a URL' where id = $1",
      [w.release],
    );
    await forceReleaseStatus(db(), w.release, "live");
    await forceReleaseStatus(db(), w.release, "taken_down");
    for (const member of [w.owner, w.viewer]) {
      const rows = await inbox(member);
      assert.deepEqual(
        rows.map((r) => [r.kind, r.title]),
        [
          ["release.approved", "“Night Drive” was approved"],
          ["release.rejected", "“Night Drive” was rejected"],
          ["release.live", "“Night Drive” is live"],
          ["release.taken_down", "“Night Drive” was taken down"],
        ],
      );
      assert.equal(rows[1]?.body, "Cover art shows a URL");
      assert.deepEqual(rows[1]?.data, { release_id: w.release, reason: "Cover art shows a URL" });
      assert.deepEqual(rows[0]?.data, { release_id: w.release });
    }
    assert.deepEqual(await inbox(w.stranger), []);
  });

  test("statuses that are not news (submitted, in review, delivering) notify nobody", async () => {
    const w = await world();
    for (const status of ["submitted", "in_review", "delivering", "delivered"]) {
      await forceReleaseStatus(db(), w.release, status);
    }
    assert.deepEqual(await inbox(w.owner), []);
  });

  test("each store's delivery going live, failing and being removed is a DSP update", async () => {
    const w = await world();
    await forceReleaseStatus(db(), w.release, "delivering");
    const [spotify] = await sql<{ id: string }>(
      `insert into internal.release_deliveries (release_id, account_id, store) values ($1, $2, 'spotify') returning id`,
      [w.release, w.account.id],
    );
    const [deezer] = await sql<{ id: string }>(
      `insert into internal.release_deliveries (release_id, account_id, store) values ($1, $2, 'deezer') returning id`,
      [w.release, w.account.id],
    );
    await sql("update internal.release_deliveries set status = 'in_progress' where id = $1", [spotify?.id]);
    await sql("update internal.release_deliveries set status = 'live' where id = $1", [spotify?.id]);
    await sql(
      "update internal.release_deliveries set status = 'error', message = 'Artwork too small' where id = $1",
      [deezer?.id],
    );
    const [removal] = await sql<{ id: string }>(
      `insert into internal.release_deliveries (release_id, account_id, store, action) values ($1, $2, 'spotify', 'takedown')
       returning id`,
      [w.release, w.account.id],
    );
    // Sent is not removed: the account is told when the store confirms.
    await sql("update internal.release_deliveries set status = 'takedown_sent' where id = $1", [removal?.id]);
    assert.deepEqual(
      (await inbox(w.owner)).map((r) => r.kind),
      ["delivery.live", "delivery.error"],
    );
    await sql(
      `update internal.release_deliveries set status = 'taken_down', taken_down_at = now(), confirmed_by = 'store',
         confirmed_via = 'store' where id = $1`,
      [removal?.id],
    );

    const rows = await inbox(w.owner);
    assert.deepEqual(
      rows.map((r) => [r.kind, r.title, r.body]),
      [
        ["delivery.live", "“Night Drive” is live on Spotify", ""],
        ["delivery.error", "Delivery of “Night Drive” to Deezer failed", "Artwork too small"],
        ["delivery.removed", "“Night Drive” was removed from Spotify", ""],
      ],
    );
    assert.deepEqual(rows[1]?.data, {
      release_id: w.release,
      store: "deezer",
      action: "insert",
      delivery_id: deezer?.id,
    });
    assert.deepEqual(await inbox(w.stranger), []);
  });

  test("a refused takedown and an OAC decision are told to the members", async () => {
    const w = await world();
    await forceReleaseStatus(db(), w.release, "live");
    const [takedown] = await sql<{ id: string }>(
      "insert into public.takedown_requests (release_id, account_id, reason) values ($1, $2, 'Dispute') returning id",
      [w.release, w.account.id],
    );
    await sql(
      "update public.takedown_requests set status = 'rejected', status_reason = 'Contract runs to 2027' where id = $1",
      [takedown?.id],
    );
    const [oac] = await sql<{ id: string }>(
      "insert into internal.oac_requests (account_id, artist_id) values ($1, $2) returning id",
      [w.account.id, w.artist],
    );
    await sql("update internal.oac_requests set status = 'approved' where id = $1", [oac?.id]);

    const rows = (await inbox(w.viewer)).filter((r) => !r.kind.startsWith("release."));
    assert.deepEqual(
      rows.map((r) => [r.kind, r.title, r.body]),
      [
        ["takedown.rejected", "The takedown of “Night Drive” was refused", "Contract runs to 2027"],
        ["oac.approved", "Official Artist Channel for Luna Vale: approved", ""],
      ],
    );
    assert.deepEqual(rows[1]?.data, { artist_id: w.artist, oac_request_id: oac?.id, store: "youtube_music" });
  });

  test("clients cannot call the function that writes them", async () => {
    const w = await world();
    const attempt = db().withRequestContext(userClaims(w.owner), (tx) =>
      tx.query("select internal.notify_members($1, 'x.y', 'Hi', '', '{}')", [w.account.id]),
    );
    await assert.rejects(attempt, (e: unknown) => (e as { code?: string }).code === "42501");
  });
});
