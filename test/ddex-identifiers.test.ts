import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { Worker } from "../src/jobs/worker.ts";
import { reportDelivery } from "../src/pipeline/delivery.ts";
import { pipelineHandlers } from "../src/pipeline/handlers.ts";
import { reviewRelease } from "../src/pipeline/review.ts";
import { LocalMedia } from "../src/storage/media.ts";
import { type Account, getTenantKeys, type Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys, UNLIMITED } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import {
  all,
  at,
  configureDdexStore,
  gtin13,
  kids,
  listFiles,
  parseXml,
  poll,
  RECIPIENT,
  SENDER,
  textAt,
  type XmlNode,
} from "./support/ddex.ts";
import {
  ernSchemaErrors,
  ernSchemaPresent,
  ernSchemaSkip,
  schemaMissingFails,
} from "./support/ern-schema.ts";
import { tempDir } from "./support/process.ts";
import {
  completeRelease,
  expectStatus,
  type FieldError,
  FUTURE_DATE,
  keyedAccount,
  publicApi,
} from "./support/public-api.ts";
import { memberToken, seedUser, userClaims } from "./support/seed.ts";

/**
 * Issue 28, on each engine: identifiers a store needs (docs/releases.md, "Identifiers") — a
 * release without a GTIN refused at submission through both interfaces, or given the next GTIN of
 * the tenant's GS1 company prefix; tracks without an ISRC refused, or given the next ISRC of the
 * tenant's registrant code; numbers never issued twice — and real DDEX deliveries of such a
 * release (new release, test message, update, takedown before the release date), each message
 * carrying the assigned identifiers, display-name genres and zoned, never backwards deal periods,
 * and valid against DDEX's ERN 4.3 schema when it is there (test/support/ern-schema.ts).
 */

type Obj = Record<string, unknown>;
type Api = ReturnType<typeof publicApi>;

let isrcSeq = 0;
const ownIsrc = () => `QZOWN26${String(++isrcSeq).padStart(5, "0")}`;
const ZONED = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

describeEachEngine("release identifiers and what reaches a DDEX store", (t) => {
  let app: RunningApp;
  let yy: string;
  before(async () => {
    app = await startApp(t());
    yy = (await rows<{ yy: string }>("select to_char(now() at time zone 'UTC', 'YY') as yy"))[0]
      ?.yy as string;
  });
  after(async () => {
    await app?.close();
  });

  async function rows<T extends Obj>(sql: string, params: unknown[] = []): Promise<T[]> {
    return t().db.asService(async (tx) => (await tx.query<T>(sql, params)).rows);
  }

  async function tenantWith(settings: Obj): Promise<Tenant> {
    return (
      await tenantWithKeys(t(), {
        settings: {
          ...UNLIMITED,
          public_api_rate_limit: { max: 1_000_000, windowSeconds: 1 },
          gs1_company_prefix: null,
          ...settings,
        },
      })
    ).tenant;
  }

  async function keyed(tenant: Tenant): Promise<{ account: Account; api: Api }> {
    const k = await keyedAccount(t().db, { tenant });
    return { account: k.account, api: publicApi(app.url, k.key.secret) };
  }

  /** A draft release through the public API with `isrcs` tracks (null: without an ISRC). */
  async function draft(api: Api, isrcs: (string | null)[], over: Obj = {}): Promise<string> {
    const release = expectStatus(
      await api<{ id: string }>("POST", "/releases", completeRelease({ release_type: "ep", ...over })),
      201,
    );
    for (const [i, isrc] of isrcs.entries()) {
      expectStatus(
        await api("POST", `/releases/${release.id}/tracks`, {
          title: `Song ${i + 1}`,
          duration: 200,
          track_number: i + 1,
          ...(isrc ? { isrc } : {}),
        }),
        201,
      );
    }
    return release.id;
  }

  const submit = (api: Api, id: string) =>
    api<Obj & { errors?: FieldError[]; code?: string }>("POST", `/releases/${id}/submit`);
  const isrcsOf = async (id: string) =>
    (
      await rows<{ isrc: string | null }>(
        "select isrc from public.tracks where release_id = $1 order by track_number",
        [id],
      )
    ).map((r) => r.isrc);

  async function rest(tenant: Tenant, token: string, method: string, p: string, body?: unknown) {
    const keys = await getTenantKeys(t().db, tenant.id);
    assert.ok(keys);
    const res = await fetch(`${app.url}/rest/v1${p}`, {
      method,
      headers: {
        apikey: keys.anon_key,
        authorization: `Bearer ${token}`,
        ...(body === undefined
          ? {}
          : { "content-type": "application/json", prefer: "return=representation" }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as unknown) : undefined };
  }

  test("without a GS1 prefix a release without a UPC is not submitted: 422 on the public API, rejected with the same check after /rest/v1", async () => {
    const tenant = await tenantWith({});
    const { account, api } = await keyed(tenant);
    const id = await draft(api, [ownIsrc()]);
    const res = await submit(api, id);
    assert.equal(res.status, 422, JSON.stringify(res.body));
    assert.equal(res.body.code, "release_incomplete");
    assert.deepEqual(res.body.errors, [
      {
        param: "upc",
        code: "required",
        message: "upc is required to submit: the release's GTIN (a 12-digit UPC-A or 13-digit EAN-13)",
      },
    ]);
    assert.equal((await rows("select status from public.releases where id = $1", [id]))[0]?.status, "draft");

    // /rest/v1 stores the submission; the review job rejects it with the same check.
    const member = await memberToken(t().db, tenant, [account], `${app.url}/auth/v1`);
    const patched = await rest(tenant, member, "PATCH", `/releases?id=eq.${id}`, { status: "submitted" });
    assert.equal(patched.status, 200, JSON.stringify(patched.body));
    assert.equal(
      (patched.body as { upc: string | null }[])[0]?.upc,
      null,
      "nothing assigned without a prefix",
    );
    assert.equal(await reviewRelease(t().db, id), "rejected");
    const [rejected] = await rows<{ status: string; status_reason: string }>(
      "select status, status_reason from public.releases where id = $1",
      [id],
    );
    assert.equal(rejected?.status, "rejected");
    assert.match(rejected?.status_reason ?? "", /upc is required to submit/);

    // Given a UPC, it submits.
    const upc = gtin13("400638100077");
    expectStatus(await api("PATCH", `/releases/${id}`, { upc }), 200);
    const ok = expectStatus(await submit(api, id), 200);
    assert.equal(ok.upc, upc);
  });

  test("with a GS1 prefix the UPC is assigned at submission (both interfaces): the next number with its check digit, never one already used", async () => {
    // A U.S. U.P.C. company prefix in its GTIN-13 form: the codes are 12-digit UPC-As.
    const tenant = await tenantWith({ gs1_company_prefix: "0614141" });
    const { account, api } = await keyed(tenant);
    const first = await draft(api, [ownIsrc()]);
    const own = gtin13("400638100088");
    const withOwn = await draft(api, [ownIsrc()], { upc: own });
    // A release already carrying the number the counter would give next: that number is skipped.
    const taken = gtin13("061414100001").slice(1);
    await draft(api, [ownIsrc()], { upc: taken });
    const second = await draft(api, [ownIsrc()]);

    const a = expectStatus(await submit(api, first), 200);
    assert.equal(a.upc, gtin13("061414100000").slice(1));
    assert.equal(String(a.upc).length, 12);
    assert.equal(expectStatus(await submit(api, withOwn), 200).upc, own, "a release's own UPC is kept");

    const member = await memberToken(t().db, tenant, [account], `${app.url}/auth/v1`);
    const viaRest = await rest(tenant, member, "PATCH", `/releases?id=eq.${second}`, { status: "submitted" });
    assert.equal(viaRest.status, 200, JSON.stringify(viaRest.body));
    const expected = gtin13("061414100002").slice(1);
    assert.equal((viaRest.body as { upc: string }[])[0]?.upc, expected, "assigned in the same transition");
    assert.equal(await reviewRelease(t().db, second), "in_review", "the checks pass");

    // A deleted release's number is not given again.
    await rows("delete from public.releases where id = $1", [first]);
    const third = await draft(api, [ownIsrc()]);
    assert.equal(expectStatus(await submit(api, third), 200).upc, gtin13("061414100003").slice(1));
    assert.deepEqual(
      await rows(
        "select company_prefix, next_item::int as next_item from internal.gtin_counters where company_prefix = $1",
        ["0614141"],
      ),
      [{ company_prefix: "0614141", next_item: 4 }],
    );
  });

  test("a prefix whose numbers are used up: the release is refused with gtin_unavailable; an EAN-13 prefix gives 13 digits", async () => {
    // A 12-digit prefix holds one number.
    const tenant = await tenantWith({ gs1_company_prefix: "200000000009" });
    const { api } = await keyed(tenant);
    const one = await draft(api, [ownIsrc()]);
    const two = await draft(api, [ownIsrc()]);
    assert.equal(expectStatus(await submit(api, one), 200).upc, gtin13("200000000009"));
    const res = await submit(api, two);
    assert.equal(res.status, 422, JSON.stringify(res.body));
    assert.deepEqual(
      res.body.errors?.map((e) => [e.param, e.code]),
      [["upc", "gtin_unavailable"]],
    );
    assert.match(res.body.errors?.[0]?.message ?? "", /no GTIN left to assign/);
  });

  test("ISRCs: refused without a registrant code; with one, tracks without an ISRC get CC XXX YY NNNNN in track order, never a code in use", async () => {
    const without = await keyed(await tenantWith({ gs1_company_prefix: "2000001" }));
    const bare = await draft(without.api, [ownIsrc(), null]);
    const refused = await submit(without.api, bare);
    assert.equal(refused.status, 422);
    assert.deepEqual(
      refused.body.errors?.map((e) => [e.param, e.code, e.message]),
      [["tracks[1].isrc", "required", "track 2 (Song 2) has no ISRC"]],
    );

    const tenant = await tenantWith({ gs1_company_prefix: "2000002", isrc_registrant: "QZ-K7B" });
    const { api } = await keyed(tenant);
    const own = ownIsrc();
    const first = await draft(api, [null, own, null]);
    expectStatus(await submit(api, first), 200);
    assert.deepEqual(await isrcsOf(first), [`QZK7B${yy}00001`, own, `QZK7B${yy}00002`]);

    // Another tenant's track already holds the next code: it is skipped.
    const elsewhere = await draft(without.api, [`QZK7B${yy}00003`]);
    assert.ok(elsewhere);
    const second = await draft(api, [null]);
    expectStatus(await submit(api, second), 200);
    assert.deepEqual(await isrcsOf(second), [`QZK7B${yy}00004`]);

    // The year's codes used up: the track is refused with isrc_unavailable.
    await rows("update internal.isrc_counters set next_number = 100000 where registrant = 'QZK7B'");
    const third = await draft(api, [null]);
    const res = await submit(api, third);
    assert.equal(res.status, 422, JSON.stringify(res.body));
    assert.deepEqual(
      res.body.errors?.map((e) => [e.param, e.code]),
      [["tracks[0].isrc", "isrc_unavailable"]],
    );
  });

  test("the tenant settings' shapes are the database's to check; no client reads or draws from the counters", async () => {
    const tenant = await tenantWith({ gs1_company_prefix: "2000003" });
    const bad: Obj[] = [
      { gs1_company_prefix: "12ab345" },
      { gs1_company_prefix: "12345" },
      { gs1_company_prefix: 2000003 },
      { isrc_registrant: "us-xyz" },
      { isrc_registrant: "USXYZ" },
    ];
    for (const settings of bad) {
      await assert.rejects(
        rows("update internal.tenants set settings = settings || $2::jsonb where id = $1", [
          tenant.id,
          JSON.stringify(settings),
        ]),
        /tenants_identifier_settings/,
        JSON.stringify(settings),
      );
    }
    const { account } = await keyed(tenant);
    const user = await seedUser(t().db, tenant, [{ account, role: "owner" }]);
    const attempts = [
      "select * from internal.gtin_counters",
      "update internal.gtin_counters set next_item = 0",
      "select * from internal.isrc_counters",
      `select internal.assign_gtin('${tenant.id}')`,
      `select internal.assign_isrc('${tenant.id}')`,
    ];
    for (const sql of attempts) {
      await assert.rejects(
        t().db.withRequestContext(userClaims(user), (tx) => tx.query(sql)),
        /permission denied/,
        sql,
      );
    }
  });

  // -------------------------------------------------------------------------------------------
  // Deliveries to DDEX stores

  let worker: Worker | undefined;
  let drops: string | undefined;
  let media: LocalMedia | undefined;
  after(async () => {
    await worker?.stop();
    if (drops) fs.rmSync(drops, { recursive: true, force: true });
    if (media) fs.rmSync(media.root, { recursive: true, force: true });
  });

  test("a DDEX delivery carries the assigned UPC and ISRCs, display-name genres (a store's own with its map), zoned deals; a takedown before the release date never ends a deal before it starts", async () => {
    drops = tempDir("backline-ddex-ids-");
    media = new LocalMedia(tempDir("backline-ddex-ids-media-"));
    const stores = { plain: "ddex_ids_plain", mapped: "ddex_ids_mapped" };
    await configureDdexStore(t().db, stores.plain, {
      sender: SENDER,
      recipient: RECIPIENT,
      destination: { type: "directory", path: path.join(drops, "plain") },
    });
    await configureDdexStore(t().db, stores.mapped, {
      sender: SENDER,
      recipient: RECIPIENT,
      destination: { type: "directory", path: path.join(drops, "mapped") },
      genres: { "rnb-soul": "R&B" },
      test_messages: true,
    });
    worker = new Worker({ db: t().db, handlers: pipelineHandlers(t().db, { media }), pollMs: 20 });
    worker.start();

    const tenant = await tenantWith({
      gs1_company_prefix: "2000004",
      isrc_registrant: "QZ-D3X",
      auto_review: true,
      require_media: false,
    });
    const { api } = await keyed(tenant);
    const id = await draft(api, [null, null], {
      primary_genre: "rnb-soul",
      secondary_genre: "hip-hop-rap",
    });
    // The stores were added after the server read its catalogue: named on the service path.
    await rows("update public.releases set services = $2 where id = $1", [id, [stores.plain, stores.mapped]]);
    const submitted = expectStatus(await submit(api, id), 200);
    const upc = gtin13("200000400000");
    assert.equal(submitted.upc, upc);
    const isrcs = [`QZD3X${yy}00001`, `QZD3X${yy}00002`];
    assert.deepEqual(await isrcsOf(id), isrcs);
    worker.wake();

    // Each delivery's batch is dropped once it has its store reference (the batch folder).
    const deliveries = (n: number) =>
      poll(
        `${n} deliveries of the release dropped`,
        () =>
          rows<{ id: string; store: string; action: string; dropped: boolean; ref: string | null }>(
            `select id::text as id, store, action, store_reference is not null as dropped, store_reference as ref
             from internal.release_deliveries where release_id = $1 order by created_at, store`,
            [id],
          ),
        (ds) => ds.length === n && ds.every((d) => d.dropped),
      );
    const messageOf = (d: {
      id: string;
      store: string;
      ref: string | null;
    }): { xml: string; root: XmlNode } => {
      // The batch folder (named by its time, YYYYMMDDhhmmssnnn) is the store reference.
      const dir = String(d.ref);
      assert.equal(
        path.dirname(dir),
        path.join(drops as string, d.store === stores.plain ? "plain" : "mapped"),
      );
      const xml = fs.readFileSync(path.join(dir, upc, `${upc}.xml`), "utf8");
      assert.ok(listFiles(dir).includes(`${upc}/${upc}.xml`));
      return { xml, root: parseXml(xml) };
    };
    const messages: { kind: string; xml: string }[] = [];

    const inserts = await deliveries(2);
    for (const d of inserts) {
      const { xml, root } = messageOf(d);
      messages.push({ kind: `new release (${d.store})`, xml });
      assert.equal(textAt(root, "ReleaseList/Release/ReleaseId/ICPN"), upc);
      assert.deepEqual(
        kids(at(root, "ResourceList"), "SoundRecording").map((s) =>
          textAt(s, "SoundRecordingEdition/ResourceId/ISRC"),
        ),
        isrcs,
      );
      const genres = all(root, "Genre").map((g) => [textAt(g, "GenreText"), textAt(g, "SubGenre")]);
      assert.equal(genres.length, 3, "the release and each track release");
      const name = d.store === stores.plain ? "R&B/Soul" : "R&B";
      for (const g of genres) assert.deepEqual(g, [name, "Hip-Hop/Rap"], d.store);
      assert.equal(
        textAt(root, "MessageHeader/MessageControlType"),
        d.store === stores.plain ? "LiveMessage" : "TestMessage",
      );
      for (const s of all(root, "StartDateTime")) assert.equal(s.text, `${FUTURE_DATE}T00:00:00Z`);
      assert.deepEqual(all(root, "EndDateTime"), []);
      await reportDelivery(t().db, d.id, { status: "live" });
    }

    // A correction: an update message to each store.
    await rows("select internal.correct_release_metadata($1, $2::jsonb)", [
      id,
      JSON.stringify({ title: "Night Drive (Fixed)" }),
    ]);
    worker.wake();
    const updates = (await deliveries(4)).filter((d) => d.action === "update");
    assert.equal(updates.length, 2);
    for (const d of updates) {
      const { xml, root } = messageOf(d);
      messages.push({ kind: `update (${d.store})`, xml });
      assert.equal(textAt(root, "ReleaseList/Release/DisplayTitle/TitleText"), "Night Drive (Fixed)");
    }

    // Taken down 60 days before its release date: each deal ends at its start, in UTC.
    await rows("insert into public.takedown_requests (release_id, reason) values ($1, 'Wrong master')", [id]);
    worker.wake();
    const takedowns = (await deliveries(6)).filter((d) => d.action === "takedown");
    assert.equal(takedowns.length, 2);
    for (const d of takedowns) {
      const { xml, root } = messageOf(d);
      messages.push({ kind: `takedown (${d.store})`, xml });
      const periods = all(root, "ValidityPeriod");
      assert.equal(periods.length, 3);
      for (const p of periods) {
        const [start, end] = [textAt(p, "StartDateTime"), textAt(p, "EndDateTime")];
        assert.equal(start, `${FUTURE_DATE}T00:00:00Z`);
        assert.equal(end, start, "ends where it starts, never before");
      }
      for (const s of [
        ...all(root, "StartDateTime"),
        ...all(root, "EndDateTime"),
        ...all(root, "MessageCreatedDateTime"),
      ]) {
        assert.match(s.text, ZONED, `${s.name} carries its zone`);
      }
    }

    // Every message written, against DDEX's own schema.
    assert.equal(messages.length, 6);
    if (!ernSchemaPresent) {
      // Under CI the schema must be there: validating is the point of this step.
      if (schemaMissingFails) assert.fail(String(ernSchemaSkip));
      console.log(`# schema validation of the delivered messages skipped: ${ernSchemaSkip}`);
      return;
    }
    for (const m of messages) assert.deepEqual(await ernSchemaErrors(m.xml), [], m.kind);
  });
});
