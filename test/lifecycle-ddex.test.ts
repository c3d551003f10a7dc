import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { createClient, type SupabaseClient } from "@supabase/supabase-js";
import { XMLValidator } from "fast-xml-parser";
import { Worker } from "../src/jobs/worker.ts";
import { pipelineHandlers } from "../src/pipeline/handlers.ts";
import { LocalMedia } from "../src/storage/media.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { tempDir } from "./support/process.ts";
import { FUTURE_DATE } from "./support/public-api.ts";

/**
 * A release's whole life through the table interface (seed 000, with @supabase/supabase-js), the
 * operator's admin API and a DDEX file drop: sign up, artist, release, tracks, media, submit;
 * the operator rejects, the account fixes and resubmits, the operator approves; the worker drops
 * an ERN package; the store reports it live; the account asks for a takedown and the worker
 * drops the takedown. At each step: the release's status, the account's notifications, the
 * outbox events and the history.
 */

const PASSWORD = "Correct-Horse-7";
const STORE = "drop_store";
const UPC = "4006381333931";

interface Row {
  [key: string]: unknown;
}

describeEachEngine("lifecycle: /rest/v1, /admin/v1 and a DDEX file drop", (t) => {
  let app: RunningApp;
  let worker: Worker;
  let drops: string;
  let media: LocalMedia;
  before(async () => {
    drops = tempDir("backline-drops-");
    media = new LocalMedia(tempDir("backline-media-"));
    await t().db.asService((tx) =>
      tx.query(
        `insert into internal.stores (code, name, kind, settings) values ($1, 'Drop Store', 'dsp', $2)
         on conflict (code) do update set settings = excluded.settings`,
        [
          STORE,
          JSON.stringify({
            adapter: "ddex",
            ddex: {
              sender: { dpid: "PADPIDA2026112201B", name: "Backline Distribution" },
              recipient: { dpid: "PADPIDA2026112202S", name: "Drop Store" },
              destination: { type: "directory", path: drops },
            },
          }),
        ],
      ),
    );
    app = await startApp(t());
    worker = new Worker({ db: t().db, handlers: pipelineHandlers(t().db, { media }), pollMs: 20 });
    worker.start();
  });
  after(async () => {
    await worker?.stop();
    await app?.close();
    rmSync(drops, { recursive: true, force: true });
    rmSync(media.root, { recursive: true, force: true });
  });

  const rows = async (sql: string, params: unknown[] = []) =>
    t().db.asService(async (tx) => (await tx.query<Row>(sql, params)).rows);

  async function until<T>(what: string, read: () => Promise<T>, ok: (v: T) => boolean): Promise<T> {
    const deadline = Date.now() + 15_000;
    for (;;) {
      const value = await read();
      if (ok(value)) return value;
      if (Date.now() > deadline) assert.fail(`${what}: still ${JSON.stringify(value)}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  function admin(serviceKey: string) {
    return async (method: string, url: string, body?: unknown) => {
      const res = await fetch(`${app.url}/admin/v1${url}`, {
        method,
        headers: {
          apikey: serviceKey,
          authorization: `Bearer ${serviceKey}`,
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as Row };
    };
  }

  const ok = <T>(r: { data: T | null; error: unknown }): T => {
    assert.equal(r.error, null, JSON.stringify(r.error));
    assert.ok(r.data !== null);
    return r.data;
  };

  test("rejected, fixed, resubmitted, approved, dropped, live, taken down", async () => {
    const { keys } = await tenantWithKeys(t(), { auth: { email_confirmation: false } });
    const operator = admin(keys.service_role_key);
    const client: SupabaseClient = createClient(app.url, keys.anon_key, {
      auth: { persistSession: false, autoRefreshToken: false },
    });
    const signUp = await client.auth.signUp({
      email: `user-${randomUUID().slice(0, 8)}@example.com`,
      password: PASSWORD,
    });
    assert.equal(signUp.error, null);
    const userId = signUp.data.user?.id as string;

    // The account's side, as seed 000 has it.
    const artist = ok(
      await client.from("artist_profiles").insert({ name: "Mira Vale" }).select().single(),
    ) as Row;
    const release = ok(
      await client
        .from("releases")
        .insert({
          title: "Midnight Signals",
          artist_id: artist.id,
          release_type: "ep",
          primary_genre: "electronic",
          release_date: FUTURE_DATE,
          upc: UPC,
          label_name: "Night Owl Records",
          licensed_territories_include: "WW",
          services: [STORE],
          phonographic_copyright: "2026 Night Owl Records",
          phonographic_year: 2026,
          status: "draft",
        })
        .select()
        .single(),
    ) as Row;
    const releaseId = release.id as string;
    const accountId = release.account_id as string;
    const tracks: Row[] = [];
    for (const [i, title] of ["Neon Tide", "Static Bloom"].entries()) {
      tracks.push(
        ok(
          await client
            .from("tracks")
            .insert({
              release_id: releaseId,
              title,
              isrc: `QZDDX26000${i + 1}0`,
              duration: 200 + i,
              track_number: i + 1,
              contributors: [{ name: "Ana Lima", role: "composer" }],
              splits: [{ name: "Mira Vale", share: 100 }],
            })
            .select()
            .single(),
        ) as Row,
      );
    }
    // The uploaded media, where the upload routes keep them.
    mkdirSync(media.folder("audio", accountId, releaseId), { recursive: true });
    mkdirSync(media.folder("artwork", accountId, releaseId), { recursive: true });
    for (const track of tracks) {
      writeFileSync(
        path.join(media.folder("audio", accountId, releaseId), `${track.id}.wav`),
        Buffer.concat([Buffer.from("RIFF"), Buffer.alloc(2048, Number(track.duration) % 256)]),
      );
    }
    writeFileSync(
      path.join(media.folder("artwork", accountId, releaseId), "cover.jpg"),
      Buffer.from([0xff, 0xd8, 0xff, 0xe0, 1, 2, 3]),
    );

    const status = async () =>
      (await rows("select status, status_reason from public.releases where id = $1", [releaseId]))[0];
    const submit = async () =>
      ok(await client.from("releases").update({ status: "submitted" }).eq("id", releaseId).select());

    // Submitted: the worker's review leaves it for the operator (this tenant does not auto-review).
    await submit();
    await until("in review", status, (s) => s?.status === "in_review");
    const queue = await operator("GET", "/reviews");
    assert.equal(queue.status, 200);
    assert.deepEqual(
      (queue.body.data as Row[]).map((r) => [r.id, r.problems]),
      [[releaseId, []]],
    );

    // Rejected with a reason the account reads; fixed and submitted again.
    const rejected = await operator("POST", `/releases/${releaseId}/reject`, {
      reason: "The title needs its version",
    });
    assert.equal(rejected.status, 200);
    const seen = ok(
      await client.from("releases").select("status, status_reason").eq("id", releaseId).single(),
    ) as Row;
    assert.deepEqual(seen, { status: "rejected", status_reason: "The title needs its version" });
    ok(await client.from("releases").update({ version: "Extended" }).eq("id", releaseId).select());
    await submit();
    await until("in review again", status, (s) => s?.status === "in_review");

    // Approved: the worker drops the package; the release is delivered, not yet live.
    assert.equal((await operator("POST", `/releases/${releaseId}/approve`)).status, 200);
    await until("delivered", status, (s) => s?.status === "delivered");
    const [delivery] = await rows(
      "select id, status, store_reference from internal.release_deliveries where release_id = $1 and action = 'insert'",
      [releaseId],
    );
    assert.equal(delivery?.status, "delivered");
    // A batch is named by the time it was made (DDEX's SFTP choreography: YYYYMMDDhhmmssnnn).
    const batch = String(delivery?.store_reference);
    assert.match(path.basename(batch), /^[0-9]{17}$/);
    assert.equal(path.dirname(batch), drops);
    assert.deepEqual(readdirSync(batch).sort(), [`BatchComplete_${path.basename(batch)}.xml`, UPC].sort());
    const xml = readFileSync(path.join(batch, UPC, `${UPC}.xml`), "utf8");
    assert.equal(XMLValidator.validate(xml), true);
    for (const needle of [
      `<ICPN>${UPC}</ICPN>`,
      "<ISRC>QZDDX2600010</ISRC>",
      "<ISRC>QZDDX2600020</ISRC>",
      "<TitleText>Midnight Signals</TitleText>",
      '<SubTitle SubTitleType="Version">Extended</SubTitle>',
      "<ReleaseType>EP</ReleaseType>",
      "<TerritoryCode>Worldwide</TerritoryCode>",
      "<Role>Composer</Role>",
      "<FullName>Drop Store</FullName>",
    ]) {
      assert.ok(xml.includes(needle), `the message has ${needle}`);
    }
    assert.ok(!xml.includes("<EndDateTime>"), "an insert's deals do not end");
    const files = (readdirSync(path.join(batch, UPC), { recursive: true }) as string[])
      .map((f) => `${UPC}/${f.split(path.sep).join("/")}`)
      .filter((f) => f.includes("."))
      .sort();
    assert.deepEqual(files, [
      `${UPC}/${UPC}.xml`,
      `${UPC}/resources/QZDDX2600010.wav`,
      `${UPC}/resources/QZDDX2600020.wav`,
      `${UPC}/resources/cover.jpg`,
    ]);

    // The store says it is live; the operator records it.
    const deliveries = await operator("GET", `/releases/${releaseId}/deliveries`);
    assert.deepEqual(
      (deliveries.body.data as Row[]).map((d) => [d.id, d.action, d.status]),
      [[delivery?.id, "insert", "delivered"]],
    );
    const reported = await operator("POST", `/deliveries/${delivery?.id}/report`, { status: "live" });
    assert.equal(reported.status, 200);
    assert.equal(reported.body.status, "live");
    assert.equal((await status())?.status, "live");

    // The account asks for a takedown through the table interface; the worker drops the takedown.
    const takedown = ok(
      await client
        .from("takedown_requests")
        .insert({ release_id: releaseId, reason: "Rights ended" })
        .select()
        .single(),
    ) as Row;
    // The takedown reaches the store's drop; the release waits until the store confirms it.
    const sent = await until(
      "takedown sent",
      () =>
        rows(
          "select id, status from internal.release_deliveries where release_id = $1 and action = 'takedown'",
          [releaseId],
        ),
      (ds) => ds[0]?.status === "takedown_sent",
    );
    assert.equal((await status())?.status, "takedown_requested");
    const pending = ok(
      await client
        .from("takedown_requests")
        .select("status, stores")
        .eq("id", takedown.id as string)
        .single(),
    ) as Row;
    assert.equal(pending.status, "processing");
    assert.deepEqual(
      (pending.stores as Row[]).map((s) => [s.store, s.status, s.taken_down_at]),
      [[STORE, "takedown_sent", null]],
    );
    // The store confirmed (its acknowledgement files come later): the operator records it by hand.
    const confirmed = await operator("POST", `/deliveries/${sent[0]?.id}/report`, {
      status: "taken_down",
      note: "Drop Store support confirmed the removal by e-mail",
    });
    assert.equal(confirmed.status, 200);
    assert.deepEqual(
      [confirmed.body.status, confirmed.body.confirmed_by, confirmed.body.confirmed_via],
      ["taken_down", "operator", "admin_api"],
    );
    await until("taken down", status, (s) => s?.status === "taken_down");
    const request = ok(
      await client
        .from("takedown_requests")
        .select("status, stores")
        .eq("id", takedown.id as string)
        .single(),
    ) as Row;
    assert.equal(request.status, "completed");
    // Per store, at /rest/v1: when the takedown was sent and when the store confirmed it.
    const [store] = request.stores as Row[];
    assert.deepEqual([store?.store, store?.status, store?.confirmed_by], [STORE, "taken_down", "operator"]);
    assert.ok(Date.parse(String(store?.taken_down_at)) >= Date.parse(String(store?.sent_at)));
    const [removal] = await rows(
      "select id, status, store_reference from internal.release_deliveries where release_id = $1 and action = 'takedown'",
      [releaseId],
    );
    assert.equal(removal?.status, "taken_down");
    const removalXml = readFileSync(path.join(String(removal?.store_reference), UPC, `${UPC}.xml`), "utf8");
    assert.equal(XMLValidator.validate(removalXml), true);
    assert.match(removalXml, /<EndDateTime>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z<\/EndDateTime>/);

    // What the account was told, what webhooks will send, and what the history kept.
    const notes = ok(
      await client.from("notifications").select("kind").eq("user_id", userId).order("created_at"),
    );
    assert.deepEqual(
      (notes as Row[]).map((n) => n.kind),
      [
        "release.rejected",
        "release.approved",
        "delivery.live",
        "release.live",
        "delivery.removed",
        "release.taken_down",
      ],
    );
    const events = await rows(
      "select type from internal.events where account_id = $1 order by created_at, type",
      [accountId],
    );
    assert.deepEqual(
      events.map((e) => e.type).filter((type) => String(type).startsWith("release.")),
      [
        "release.submitted",
        "release.rejected",
        "release.submitted",
        "release.approved",
        "release.live",
        "release.takedown_completed",
      ],
    );
    const history = await rows(
      "select from_status, to_status from internal.release_history where release_id = $1 order by created_at, id",
      [releaseId],
    );
    assert.deepEqual(
      history.map((h) => `${h.from_status ?? ""}>${h.to_status}`),
      [
        ">draft",
        "draft>submitted",
        "submitted>in_review",
        "in_review>rejected",
        "rejected>submitted",
        "submitted>in_review",
        "in_review>approved",
        "approved>delivering",
        "delivering>delivered",
        "delivered>live",
        "live>takedown_requested",
        "takedown_requested>taken_down",
      ],
    );
  });
});
