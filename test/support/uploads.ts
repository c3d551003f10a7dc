import assert from "node:assert/strict";
import { type RunningApp, tenantWithKeys, UNLIMITED } from "./app.ts";
import type { TestDb } from "./db.ts";
import { completeRelease, expectStatus, isrcs, keyedAccount, publicApi } from "./public-api.ts";

/** Helpers for the upload suites (docs/uploads.md): accounts whose tenant requires media, drafts, upload URLs. */

type Obj = Record<string, unknown>;
export type Api = ReturnType<typeof publicApi>;

/** The upload-URL endpoints' response. */
export interface Target {
  asset_id: string;
  upload_url: string;
  method: string;
  headers: Record<string, string>;
  expires_at: string;
  max_bytes: number;
  complete_url: string | null;
  multipart?: { upload_id: string; part_size: number; parts: { part_number: number; url: string }[] };
}

const nextIsrc = isrcs("QZUPL");

/** An account with a key, in a tenant that requires valid media to submit (the default). */
export async function uploader(t: TestDb, app: RunningApp, scopes?: string[]) {
  const { tenant } = await tenantWithKeys(t, {
    settings: {
      ...UNLIMITED,
      require_media: true,
      public_api_rate_limit: { max: 1_000_000, windowSeconds: 1 },
    },
  });
  const k = await keyedAccount(t.db, { tenant, ...(scopes ? { scopes } : {}) });
  return { ...k, api: publicApi(app.url, k.key.secret) };
}

/** A draft single with `tracks` tracks, each with an ISRC and a position. */
export async function draft(api: Api, tracks = 1): Promise<{ id: string; tracks: string[] }> {
  const release = expectStatus(await api("POST", "/releases", completeRelease()), 201) as Obj & {
    id: string;
  };
  const ids: string[] = [];
  for (let i = 0; i < tracks; i++) {
    const track = expectStatus(
      await api("POST", `/releases/${release.id}/tracks`, {
        title: `Track ${i + 1}`,
        isrc: nextIsrc(),
        track_number: i + 1,
      }),
      201,
    ) as Obj & { id: string };
    ids.push(track.id);
  }
  return { id: release.id, tracks: ids };
}

export const artworkUrl = async (api: Api, releaseId: string, body: Obj = {}) =>
  expectStatus(
    await api("POST", `/releases/${releaseId}/artwork-upload-url`, body),
    201,
  ) as unknown as Target;

export const audioUrl = async (api: Api, releaseId: string, trackId: string, body: Obj = {}) =>
  expectStatus(
    await api("POST", `/releases/${releaseId}/tracks/${trackId}/audio-upload-url`, body),
    201,
  ) as unknown as Target;

/** Polls the upload until its checks are done. */
export async function judged(api: Api, assetId: string, timeoutMs = 30_000): Promise<Obj> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const asset = expectStatus(await api("GET", `/uploads/${assetId}`), 200);
    if (asset.status === "valid" || asset.status === "invalid") return asset;
    if (Date.now() > deadline) assert.fail(`upload ${assetId} still ${String(asset.status)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
