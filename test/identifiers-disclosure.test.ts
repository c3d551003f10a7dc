import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { createClient } from "@supabase/supabase-js";
import type { TenantKeys } from "../src/tenancy/keys.ts";
import type { Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { assertProblem, completeRelease, keyedAccount, publicApi } from "./support/public-api.ts";

/**
 * Issue 26, item 3: the ISRC rule (one code, one recording, per account) must not tell a caller
 * anything of an account they may not write. A user who names another account's id on a track,
 * with a code that account uses, gets exactly the refusal any row they may not write gets — the
 * same as with a code nobody uses — and a conflict in their own account names the code only.
 */

const PASSWORD = "Correct-Horse-7";

interface Party {
  token: string;
  accountId: string;
  releaseId: string;
  trackId: string;
  title: string;
  isrc: string;
}

let isrcSeq = 0;
const nextIsrc = () => `QZDSC26${String(Date.now() % 10_000).padStart(4, "0")}${isrcSeq++ % 10}`.slice(0, 12);

describeEachEngine("identifiers disclose nothing of other accounts (issue 26, item 3)", (t) => {
  let app: RunningApp;
  let one: { tenant: Tenant; keys: TenantKeys };
  let two: { tenant: Tenant; keys: TenantKeys };
  let attacker: Party;
  let victim: Party;

  before(async () => {
    app = await startApp(t());
    one = await tenantWithKeys(t(), { auth: { email_confirmation: false } });
    two = await tenantWithKeys(t(), { auth: { email_confirmation: false } });
    attacker = await party(one, "QZATK2600001");
    victim = await party(one, "QZVIC2600001");
  });
  after(() => app?.close());

  /** A user signed up on `env`, with a draft release and one track with `isrc` in their own account. */
  async function party(env: { keys: TenantKeys }, isrc: string): Promise<Party> {
    const client = createClient(app.url, env.keys.anon_key, {
      auth: { persistSession: false, autoRefreshToken: false },
    });
    const signed = await client.auth.signUp({
      email: `u-${randomUUID().slice(0, 8)}@example.com`,
      password: PASSWORD,
    });
    assert.equal(signed.error, null);
    assert.ok(signed.data.session);
    const title = `Hidden ${randomUUID().slice(0, 8)}`;
    const artist = await client
      .from("artist_profiles")
      .insert({ name: `${title} artist` })
      .select()
      .single();
    assert.equal(artist.error, null);
    const release = await client
      .from("releases")
      .insert({ title: `${title} release`, artist_id: artist.data.id, status: "draft" })
      .select()
      .single();
    assert.equal(release.error, null);
    const track = await client
      .from("tracks")
      .insert({ release_id: release.data.id, title, isrc, duration: 200 })
      .select()
      .single();
    assert.equal(track.error, null, JSON.stringify(track.error));
    return {
      token: signed.data.session.access_token,
      accountId: release.data.account_id,
      releaseId: release.data.id,
      trackId: track.data.id,
      title,
      isrc,
    };
  }

  async function rest(
    apikey: string,
    bearer: string,
    method: string,
    path: string,
    body: unknown,
  ): Promise<{ status: number; text: string }> {
    const res = await fetch(`${app.url}/rest/v1/${path}`, {
      method,
      headers: {
        apikey,
        authorization: `Bearer ${bearer}`,
        "content-type": "application/json",
        prefer: "return=representation",
      },
      body: JSON.stringify(body),
    });
    return { status: res.status, text: await res.text() };
  }

  /** Nothing of the victim's catalogue appears in `text` (but what the request itself named). */
  function assertNothingOfVictim(text: string, named: string[] = []): void {
    for (const secret of [victim.title, victim.trackId, victim.releaseId].filter((s) => !named.includes(s))) {
      assert.ok(!text.includes(secret), `the answer names ${secret}: ${text}`);
    }
  }

  // Each caller names the victim's account on a track insert: with the victim's ISRC, and with a
  // code nobody uses. Both answers are the refusal for a row the caller may not write.
  const ATTACKS: {
    name: string;
    caller: () => { apikey: string; bearer: string };
    releaseId: () => string;
  }[] = [
    {
      name: "a user of the same tenant, on their own release",
      caller: () => ({ apikey: one.keys.anon_key, bearer: attacker.token }),
      releaseId: () => attacker.releaseId,
    },
    {
      name: "a user of the same tenant, on the victim's release",
      caller: () => ({ apikey: one.keys.anon_key, bearer: attacker.token }),
      releaseId: () => victim.releaseId,
    },
    {
      name: "another tenant's service-role key",
      caller: () => ({ apikey: two.keys.service_role_key, bearer: two.keys.service_role_key }),
      releaseId: () => victim.releaseId,
    },
  ];
  for (const attack of ATTACKS) {
    test(`/rest/v1: ${attack.name} naming another account's id learns nothing from its ISRC`, async () => {
      const { apikey, bearer } = attack.caller();
      const insert = (isrc: string) =>
        rest(apikey, bearer, "POST", "tracks", {
          release_id: attack.releaseId(),
          account_id: victim.accountId,
          title: "Probe",
          isrc,
          track_number: 9,
        });
      const taken = await insert(victim.isrc);
      const unused = await insert("QZNON2600009");
      assert.deepEqual(taken, unused, "a used code and an unused one are refused alike");
      assert.ok(taken.status >= 400 && taken.status < 500, taken.text);
      assert.doesNotMatch(taken.text, /isrc|BL006|already/i);
      assertNothingOfVictim(taken.text, [attack.releaseId()]);
      const count = await t().db.asService((tx) =>
        tx.query("select 1 from public.tracks where title = 'Probe'"),
      );
      assert.equal(count.rowCount, 0);
    });
  }

  test("/rest/v1: a conflict in the caller's own account names the code only", async () => {
    // The attacker's own ISRC under another title, on a second release: refused, and the answer
    // names neither the other track, its title nor its release.
    const release = await rest(one.keys.anon_key, attacker.token, "POST", "releases", {
      title: "Second",
      artist_id: (
        await t().db.asService((tx) =>
          tx.query<{ artist_id: string }>("select artist_id from public.releases where id = $1", [
            attacker.releaseId,
          ]),
        )
      ).rows[0]?.artist_id,
    });
    assert.equal(release.status, 201, release.text);
    const secondId = (JSON.parse(release.text) as { id: string }[])[0]?.id;
    const conflict = await rest(one.keys.anon_key, attacker.token, "POST", "tracks", {
      release_id: secondId,
      title: "Another recording",
      isrc: attacker.isrc,
    });
    assert.equal(conflict.status, 409, conflict.text);
    const body = JSON.parse(conflict.text) as { code: string; message: string; details: string };
    assert.equal(body.code, "BL006");
    assert.match(body.message, new RegExp(`ISRC ${attacker.isrc} is already registered`));
    assert.deepEqual(JSON.parse(body.details), { isrc: attacker.isrc });
    for (const secret of [attacker.title, attacker.trackId, attacker.releaseId]) {
      assert.ok(!conflict.text.includes(secret), `the conflict names ${secret}`);
    }
    // The victim's code is no conflict in the attacker's account: codes are per account.
    const reuse = await rest(one.keys.anon_key, attacker.token, "POST", "tracks", {
      release_id: secondId,
      title: "Their code, my account",
      isrc: victim.isrc,
    });
    assert.equal(reuse.status, 201, reuse.text);
    assertNothingOfVictim(reuse.text);
  });

  test("public API: a key cannot name another account, and a conflict names the code only", async () => {
    const mine = await keyedAccount(t().db, { tenant: one.tenant });
    const theirs = await keyedAccount(t().db, { tenant: one.tenant });
    const api = publicApi(app.url, mine.key.secret);
    const theirApi = publicApi(app.url, theirs.key.secret);
    const code = nextIsrc();
    const theirRelease = await theirApi<{ id: string }>("POST", "/releases", completeRelease());
    assert.equal(theirRelease.status, 201);
    const theirTrack = await theirApi<{ id: string }>("POST", `/releases/${theirRelease.body.id}/tracks`, {
      title: "Their secret recording",
      isrc: code,
    });
    assert.equal(theirTrack.status, 201);
    const myRelease = await api<{ id: string }>("POST", "/releases", completeRelease());
    assert.equal(myRelease.status, 201);

    // Naming their account: refused as an unknown field, before anything is looked up.
    const named = await api("POST", `/releases/${myRelease.body.id}/tracks`, {
      title: "Probe",
      isrc: code,
      account_id: theirs.account.id,
    });
    assert.equal(named.status, 422);
    // Their release: not found, as any release of another account.
    const onTheirs = await api("POST", `/releases/${theirRelease.body.id}/tracks`, {
      title: "Probe",
      isrc: code,
    });
    assertProblem(onTheirs, 404, "resource_missing");
    // Their code in my account: no conflict, nothing of theirs.
    const reused = await api("POST", `/releases/${myRelease.body.id}/tracks`, { title: "Mine", isrc: code });
    assert.equal(reused.status, 201);
    for (const [res, asked] of [
      [named, ""],
      [onTheirs, theirRelease.body.id],
      [reused, ""],
    ] as const) {
      const text = JSON.stringify(res.body);
      for (const secret of ["Their secret recording", theirTrack.body.id, theirRelease.body.id]) {
        if (secret === asked) continue;
        assert.ok(!text.includes(secret), `the answer names ${secret}: ${text}`);
      }
    }
    // A conflict in my own account: isrc_in_use, naming the code and nothing of the other track.
    const second = await api<{ id: string }>("POST", "/releases", completeRelease({ title: "Second" }));
    const conflict = await api("POST", `/releases/${second.body.id}/tracks`, { title: "Other", isrc: code });
    const problem = assertProblem(conflict, 409, "isrc_in_use");
    assert.equal(problem.param, "isrc");
    assert.match(problem.detail, new RegExp(`ISRC ${code} is already registered`));
    const text = JSON.stringify(conflict.body);
    for (const secret of ["Mine", myRelease.body.id, String((reused.body as { id: string }).id)]) {
      assert.ok(!text.includes(secret), `the conflict names ${secret}: ${text}`);
    }
  });
});
