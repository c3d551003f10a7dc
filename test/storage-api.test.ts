import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { createClient, type SupabaseClient } from "@supabase/supabase-js";
import { Worker } from "../src/jobs/worker.ts";
import { pipelineHandlers } from "../src/pipeline/handlers.ts";
import { openStorage } from "../src/storage/open.ts";
import { loadSecretBox } from "../src/webhooks/secrets.ts";
import { type RunningApp, startApp, tenantWithKeys, UNLIMITED } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { artworkJpeg, flac } from "./support/media-fixtures.ts";

/**
 * /storage/v1 with storage-js (supabase-js's `storage`), as a browser app of the table interface
 * uses it: createSignedUploadUrl, uploadToSignedUrl (a Blob, sent as multipart/form-data, and
 * raw bytes), createSignedUrl and download, for the buckets artwork and audio; the checks that
 * follow; and what a user of another account cannot do.
 */

type Obj = Record<string, unknown>;
const PASSWORD = "correct horse battery staple";
let n = 0;
const newEmail = () => `storage-${Date.now()}-${n++}@example.org`;

describeEachEngine("storage: /storage/v1 with storage-js", (t) => {
  let app: RunningApp;
  let worker: Worker;
  before(async () => {
    app = await startApp(t());
    const { store } = openStorage(app.config, loadSecretBox(app.config));
    worker = new Worker({ db: t().db, handlers: pipelineHandlers(t().db, { store }), pollMs: 20 });
    worker.start();
  });
  after(async () => {
    await worker?.stop();
    await app?.close();
  });

  async function tenant() {
    const { keys } = await tenantWithKeys(t(), {
      auth: { email_confirmation: false },
      settings: { ...UNLIMITED, require_media: true },
    });
    return keys;
  }

  async function signedUp(anonKey: string): Promise<SupabaseClient> {
    const client = createClient(app.url, anonKey, {
      auth: { persistSession: false, autoRefreshToken: false },
    });
    const { data, error } = await client.auth.signUp({ email: newEmail(), password: PASSWORD });
    assert.equal(error, null);
    assert.ok(data.session);
    return client;
  }

  /** A draft release with one track, made through /rest/v1 as the user. */
  async function catalog(client: SupabaseClient): Promise<{ release: string; track: string }> {
    const artist = await client.from("artist_profiles").insert({ name: "Mira Vale" }).select().single();
    assert.equal(artist.error, null);
    const release = await client
      .from("releases")
      .insert({ artist_id: (artist.data as Obj).id, title: "Signals", release_type: "single" })
      .select()
      .single();
    assert.equal(release.error, null);
    const track = await client
      .from("tracks")
      .insert({ release_id: (release.data as Obj).id, title: "Signals", track_number: 1 })
      .select()
      .single();
    assert.equal(track.error, null);
    return { release: String((release.data as Obj).id), track: String((track.data as Obj).id) };
  }

  async function judged(client: SupabaseClient, release: string, kind: string): Promise<Obj> {
    const deadline = Date.now() + 20_000;
    for (;;) {
      const { data, error } = await client
        .from("media_assets")
        .select("id, kind, status, problems, metadata, superseded_at")
        .eq("release_id", release)
        .eq("kind", kind)
        .is("superseded_at", null)
        .neq("status", "pending");
      assert.equal(error, null);
      const row = (data ?? [])[0] as Obj | undefined;
      if (row && (row.status === "valid" || row.status === "invalid")) return row;
      if (Date.now() > deadline) assert.fail(`${kind} of ${release} not judged: ${JSON.stringify(data)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  test("signed upload of artwork (a Blob) and audio (bytes), checked, then signed URL and download", async () => {
    const keys = await tenant();
    const user = await signedUp(keys.anon_key);
    const { release, track } = await catalog(user);
    const cover = await artworkJpeg();

    const coverPath = `${release}/cover.jpg`;
    const signed = await user.storage.from("artwork").createSignedUploadUrl(coverPath);
    assert.equal(signed.error, null, JSON.stringify(signed.error));
    assert.ok(signed.data);
    assert.match(
      signed.data.signedUrl,
      new RegExp(`^${app.url}/storage/v1/object/upload/sign/artwork/${coverPath}\\?token=`),
    );
    const uploaded = await user.storage
      .from("artwork")
      .uploadToSignedUrl(coverPath, signed.data.token, new Blob([cover], { type: "image/jpeg" }));
    assert.equal(uploaded.error, null, JSON.stringify(uploaded.error));
    assert.equal(uploaded.data?.path, coverPath);
    assert.equal(uploaded.data?.fullPath, `artwork/${coverPath}`);

    const audio = flac({ seconds: 2 });
    const audioPath = `${release}/${track}.flac`;
    const audioSigned = await user.storage.from("audio").createSignedUploadUrl(audioPath);
    assert.equal(audioSigned.error, null);
    const audioUp = await user.storage
      .from("audio")
      .uploadToSignedUrl(audioPath, audioSigned.data?.token as string, audio, { contentType: "audio/flac" });
    assert.equal(audioUp.error, null, JSON.stringify(audioUp.error));

    const art = await judged(user, release, "artwork");
    assert.equal(art.status, "valid", JSON.stringify(art.problems));
    const sound = await judged(user, release, "audio");
    assert.equal(sound.status, "valid", JSON.stringify(sound.problems));
    const trackRow = await user.from("tracks").select("duration, audio_metadata").eq("id", track).single();
    assert.equal((trackRow.data as Obj).duration, 2);

    const url = await user.storage.from("artwork").createSignedUrl(coverPath, 60);
    assert.equal(url.error, null, JSON.stringify(url.error));
    const fetched = await fetch(url.data?.signedUrl as string);
    assert.equal(fetched.status, 200);
    assert.equal(fetched.headers.get("content-type"), "image/jpeg");
    assert.deepEqual(Buffer.from(await fetched.arrayBuffer()), cover);

    const downloaded = await user.storage.from("audio").download(audioPath);
    assert.equal(downloaded.error, null, JSON.stringify(downloaded.error));
    assert.deepEqual(Buffer.from(await (downloaded.data as Blob).arrayBuffer()), audio);
  });

  test("another account's user can neither upload to nor read a release's media", async () => {
    const keys = await tenant();
    const owner = await signedUp(keys.anon_key);
    const stranger = await signedUp(keys.anon_key);
    const { release } = await catalog(owner);
    const path = `${release}/cover.jpg`;
    const signed = await owner.storage.from("artwork").createSignedUploadUrl(path);
    assert.equal(signed.error, null);
    const up = await owner.storage
      .from("artwork")
      .uploadToSignedUrl(path, signed.data?.token as string, new Blob([await artworkJpeg()]));
    assert.equal(up.error, null);

    const theirs = await stranger.storage.from("artwork").createSignedUploadUrl(path);
    assert.ok(theirs.error, "no upload URL for another account's release");
    assert.equal((theirs.error as unknown as { statusCode?: string }).statusCode, "404");
    const link = await stranger.storage.from("artwork").createSignedUrl(path, 60);
    assert.ok(link.error, "no signed URL for another account's media");
    const download = await stranger.storage.from("artwork").download(path);
    assert.ok(download.error, "no download of another account's media");
    const rows = await stranger.from("media_assets").select("id").eq("release_id", release);
    assert.deepEqual(rows.data, [], "media_assets rows follow the release under RLS");

    // Anonymous (anon key only) gets nothing either.
    const anon = createClient(app.url, keys.anon_key, {
      auth: { persistSession: false, autoRefreshToken: false },
    });
    const anonUrl = await anon.storage.from("artwork").createSignedUrl(path, 60);
    assert.ok(anonUrl.error);
  });

  test("bad requests get clear errors and change nothing", async () => {
    const keys = await tenant();
    const user = await signedUp(keys.anon_key);
    const { release, track } = await catalog(user);
    const cases: [string, string, string][] = [
      ["avatars", `${release}/cover.jpg`, "NoSuchBucket"],
      ["artwork", `${release}/front.jpg`, "invalid_path"],
      ["artwork", `${release}/cover.gif`, "invalid_path"],
      ["audio", `${release}/${track}.mp3`, "invalid_path"],
      ["artwork", "../../etc/passwd", "invalid_path"],
    ];
    for (const [bucket, path, code] of cases) {
      const res = await fetch(`${app.url}/storage/v1/object/upload/sign/${bucket}/${path}`, {
        method: "POST",
        headers: {
          apikey: keys.anon_key,
          authorization: `Bearer ${(await user.auth.getSession()).data.session?.access_token}`,
        },
      });
      assert.ok(res.status === 400 || res.status === 404, `${bucket}/${path}: ${res.status}`);
      const body = (await res.json()) as Obj;
      if (!path.includes("..")) assert.equal(body.code, code, `${bucket}/${path}`);
    }
    const noToken = await fetch(`${app.url}/storage/v1/object/upload/sign/artwork/${release}/cover.jpg`, {
      method: "PUT",
      body: "x",
    });
    assert.equal(noToken.status, 400);
    const badExpiry = await user.storage.from("artwork").createSignedUrl(`${release}/cover.jpg`, 0);
    assert.ok(badExpiry.error);
    const rows = await user.from("media_assets").select("id").eq("release_id", release);
    assert.deepEqual(rows.data, []);
  });
});
