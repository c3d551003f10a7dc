/**
 * The portal's calls to the account's public API (/api/public/v1, docs/public-api.md) for what
 * /rest/v1 does not do: the rules, editing and submitting a release, its completeness list, its
 * uploads and its status per store. The member's own access token, with the account named in
 * `Backline-Account`: the member's role in that account decides (viewer: read only). Failures
 * come out as `PlainError`s with every field's problem in plain words (`fields`).
 */
import { withoutPath } from "../../../ui-shared/field-errors.ts";
import { accessToken, currentTenant, PlainError, plainFromStatus } from "./portal.ts";

const BASE = "/api/public/v1";

export interface ApiProblem {
  param: string;
  code: string;
  message: string;
}

/** A problem of a field in words a person acts on; the API's own sentence where none is known. */
export function plainProblem(p: ApiProblem): string {
  const track = /^tracks\[(\d+)\]\.(\w+)$/.exec(p.param);
  const n = track ? Number(track[1]) + 1 : 0;
  switch (`${track ? `track.${track[2]}` : p.param}:${p.code}`) {
    case "release_date:required":
      return "Choose the day the release comes out.";
    case "release_date:too_soon":
      return `Choose a later release date: ${p.message.replace(/^release_date \S+ is /, "it is ")}.`;
    case "primary_genre:required":
      return "Choose a genre.";
    case "primary_genre:invalid_genre":
      return "Choose a genre from the list.";
    case "licensed_territories_include:no_territories":
      return "Choose where the release is sold: the whole world, or a list of countries.";
    case "tracks:no_tracks":
      return "Add at least one track.";
    case "release_type:too_many_tracks":
      return "A single has at most 3 tracks: make it an EP or an album.";
    case "artwork:artwork_missing":
      return "Upload the cover: a square JPEG or PNG, at least 3000 × 3000 pixels.";
    case "artwork:artwork_validating":
      return "The cover is still being checked: wait a moment.";
    case "artwork:artwork_invalid":
      return `The cover cannot be used: ${p.message.replace(/^the cover artwork is not usable: /, "")}. Upload another.`;
    case "upc:required":
      return "Enter the release's UPC (its barcode number): this platform does not assign them.";
    case "upc:gtin_unavailable":
      return "Enter the release's UPC (its barcode number): the platform has none left to give it.";
    case "track.isrc:required":
    case "track.isrc:isrc_unavailable":
      return `Track ${n} needs an ISRC, such as GB-ABC-26-00001.`;
    case "track.track_number:required":
      return `Track ${n} needs a track number.`;
    case "track.splits:splits_total":
      return `The splits of track ${n} must total exactly 100%.`;
    case "track.audio:audio_missing":
      return `Upload the audio of track ${n}: a WAV or FLAC file.`;
    case "track.audio:audio_validating":
      return `The audio of track ${n} is still being checked: wait a moment.`;
    case "track.audio:audio_invalid":
      return `The audio of track ${n} cannot be used: ${p.message.replace(/^the audio of track \d+ \([^)]*\) is not usable: /, "")}. Upload another file.`;
  }
  // The API's sentences are written for people too: said beside the field, without the field's
  // path the API starts them with (`tracks[0].title: …`), with a capital and a full stop.
  return withoutPath(p.param, p.message);
}

/** An API failure as a PlainError: field problems (`errors`, or `param`) keyed by field. */
export function failure(status: number, body: unknown): PlainError {
  // application/problem+json (docs/public-api.md, "Errors"): detail is the sentence.
  const b = (body ?? {}) as { code?: string; detail?: string; param?: string; errors?: ApiProblem[] };
  const code = typeof b.code === "string" ? b.code : "error";
  const problems =
    Array.isArray(b.errors) && b.errors.length > 0
      ? b.errors
      : b.param && b.detail
        ? [{ param: b.param, code, message: b.detail }]
        : [];
  if (problems.length > 0 && (status === 400 || status === 409 || status === 413 || status === 422)) {
    const fields: Record<string, string> = {};
    for (const p of problems) fields[p.param] ??= plainProblem(p);
    const first = problems[0] as ApiProblem;
    return new PlainError(
      problems.length === 1
        ? plainProblem(first)
        : "Some fields need a change: see the messages beside them.",
      { code, status, fields, problems },
    );
  }
  if ((status === 409 || status === 422) && b.detail)
    return new PlainError(plainProblem({ param: "", code, message: b.detail }), { code, status });
  if (status === 404)
    return new PlainError("This was not found: it was deleted, or it belongs to an account you are not in.", {
      code,
      status,
    });
  if (status === 403 && code === "insufficient_scope")
    return new PlainError(
      "Your role in this account does not allow this. Ask an owner or admin of the account.",
      { code, status },
    );
  return plainFromStatus(status, code);
}

/**
 * One call for the account `accountId` (null: a person's own /me route, which names no account);
 * the parsed body, or a PlainError.
 */
export async function call<T>(
  accountId: string | null,
  method: "GET" | "POST" | "PATCH" | "DELETE",
  path: string,
  body?: unknown,
): Promise<T> {
  const headers: Record<string, string> = {
    authorization: `Bearer ${await accessToken()}`,
    accept: "application/json",
  };
  if (accountId !== null) headers["backline-account"] = accountId;
  if (body !== undefined) headers["content-type"] = "application/json";
  // A create sent twice (a retried request) makes one thing.
  if (method === "POST") headers["idempotency-key"] = crypto.randomUUID();
  let response: Response;
  try {
    response = await fetch(`${BASE}${path}`, {
      method,
      headers,
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
  } catch {
    throw new PlainError("The server could not be reached. Check your connection and try again.", {
      code: "network",
    });
  }
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  if (!response.ok) throw failure(response.status, parsed);
  return parsed as T;
}

// ---------------------------------------------------------------------------------------------
// What the portal reads and writes

/**
 * Whether the person is a payee of any account (GET /me/payees): the header then offers Money.
 * The money pages' own calls are api/money.ts, loaded with them.
 */
export const owedByAnyone = async (): Promise<boolean> =>
  (await call<{ data: unknown[] }>(null, "GET", "/me/payees?limit=1")).data.length > 0;

export interface Rules {
  release_types: string[];
  genres: { code: string; name: string }[];
  stores: { code: string; name: string; kind: string }[];
  territories: { code: string; name: string }[];
  contributor_roles: string[];
  release_lead_days: number;
  max_tracks_on_single: number;
}

export interface MediaAsset {
  id: string;
  kind: "artwork" | "audio";
  status: "pending" | "uploaded" | "validating" | "valid" | "invalid";
  filename: string | null;
  problems: { code: string; message: string }[];
  metadata: Record<string, unknown>;
}

export interface Split {
  name: string;
  /** Percent, up to two decimals. */
  share: number;
  email?: string;
  role?: string;
}

export interface ApiTrack {
  id: string;
  title: string;
  version: string | null;
  isrc: string | null;
  track_number: number | null;
  disc_number: number;
  duration: number | null;
  explicit: boolean;
  splits: Split[];
  audio: MediaAsset | null;
  updated_at: string;
}

export interface ApiRelease {
  id: string;
  account_id: string;
  title: string;
  version: string | null;
  release_type: string;
  artist_name: string | null;
  primary_genre: string | null;
  release_date: string | null;
  upc: string | null;
  label_name: string | null;
  copyright: string | null;
  phonographic_copyright: string | null;
  licensed_territories_include: string | null;
  explicit: boolean;
  status: string;
  status_reason: string | null;
  submitted_at: string | null;
  updated_at: string;
  artwork: MediaAsset | null;
  tracks: ApiTrack[];
}

export interface ReleaseProblems {
  ready: boolean;
  submittable_status: boolean;
  errors: ApiProblem[];
}

export interface StoreDelivery {
  store: string;
  action: string;
  status: string;
  message: string | null;
  delivered_at: string | null;
  live_at: string | null;
  taken_down_at: string | null;
  updated_at: string;
}

export interface TakedownStore {
  store: string;
  status: "pending" | "in_progress" | "takedown_sent" | "taken_down" | "error";
  sent_at: string | null;
  taken_down_at: string | null;
}

export interface ReleaseStatus {
  takedown: {
    status: string;
    reason: string | null;
    status_reason: string | null;
    stores: TakedownStore[];
    created_at: string;
    completed_at: string | null;
  } | null;
  status: string;
  approval: "not_submitted" | "in_review" | "approved" | "rejected";
  rejection_reason: string | null;
  live: boolean;
  submitted_at: string | null;
  stores: StoreDelivery[];
}

export const getRules = (accountId: string) => call<Rules>(accountId, "GET", "/rules");
export const getApiRelease = (accountId: string, id: string) =>
  call<ApiRelease>(accountId, "GET", `/releases/${id}`);
export const patchRelease = (accountId: string, id: string, changes: Record<string, unknown>) =>
  call<ApiRelease>(accountId, "PATCH", `/releases/${id}`, changes);
export const getProblems = (accountId: string, id: string) =>
  call<ReleaseProblems>(accountId, "GET", `/releases/${id}/problems`);
export const submitRelease = (accountId: string, id: string) =>
  call<ApiRelease>(accountId, "POST", `/releases/${id}/submit`);
export const getReleaseStatus = (accountId: string, id: string) =>
  call<ReleaseStatus>(accountId, "GET", `/releases/${id}/status`);
export const addTrack = (accountId: string, releaseId: string, track: Record<string, unknown>) =>
  call<ApiTrack>(accountId, "POST", `/releases/${releaseId}/tracks`, track);
export const patchTrack = (
  accountId: string,
  releaseId: string,
  trackId: string,
  changes: Record<string, unknown>,
) => call<ApiTrack>(accountId, "PATCH", `/releases/${releaseId}/tracks/${trackId}`, changes);
export const getUpload = (accountId: string, assetId: string) =>
  call<MediaAsset>(accountId, "GET", `/uploads/${assetId}`);

// ---------------------------------------------------------------------------------------------
// Uploads: a signed URL, the file sent straight to storage with its progress, then the checks

interface UploadUrl {
  asset_id: string;
  upload_url: string;
  method: "PUT";
  headers: Record<string, string>;
  max_bytes: number;
  multipart?: { upload_id: string; part_size: number; parts: { part_number: number; url: string }[] };
  complete_url: string | null;
}

/** PUT `body` with its progress (fetch has no upload progress); the response's ETag header. */
function put(
  url: string,
  headers: Record<string, string>,
  body: Blob,
  onProgress: (sent: number) => void,
): Promise<string | null> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("PUT", url);
    for (const [k, v] of Object.entries(headers)) xhr.setRequestHeader(k, v);
    xhr.upload.onprogress = (e) => onProgress(e.loaded);
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) resolve(xhr.getResponseHeader("etag"));
      else {
        let parsed: unknown;
        try {
          parsed = JSON.parse(xhr.responseText);
        } catch {
          parsed = undefined;
        }
        reject(failure(xhr.status, parsed));
      }
    };
    xhr.onerror = () =>
      reject(
        new PlainError("The upload was cut off. Check your connection and try again.", { code: "network" }),
      );
    xhr.send(body);
  });
}

/**
 * Uploads `file` as the release's cover (`trackId` undefined) or a track's audio, reporting the
 * share sent (0–1); resolves with the asset id once storage has the file (its checks then run).
 */
export async function upload(
  accountId: string,
  releaseId: string,
  trackId: string | undefined,
  file: File,
  onProgress: (share: number) => void,
): Promise<string> {
  const objectPath = slotPath(releaseId, trackId, file);
  if (file.size > RESUMABLE_FROM && objectPath) {
    return resumable(trackId ? "audio" : "artwork", objectPath, file, onProgress);
  }
  const path = trackId
    ? `/releases/${releaseId}/tracks/${trackId}/audio-upload-url`
    : `/releases/${releaseId}/artwork-upload-url`;
  const slot = await call<UploadUrl>(accountId, "POST", path, {
    filename: file.name,
    ...(file.type ? { content_type: file.type } : {}),
    size: file.size,
  });
  if (slot.multipart) {
    const { part_size, parts, upload_id } = slot.multipart;
    const sent: number[] = parts.map(() => 0);
    const done: { part_number: number; etag: string }[] = [];
    for (const [i, part] of parts.entries()) {
      const blob = file.slice(i * part_size, (i + 1) * part_size);
      const etag = await put(part.url, {}, blob, (n) => {
        sent[i] = n;
        onProgress(sent.reduce((a, b) => a + b, 0) / file.size);
      });
      if (!etag) throw new PlainError("The storage did not confirm a part of the file. Try again.");
      done.push({ part_number: part.part_number, etag });
    }
    await call(accountId, "POST", `/uploads/${slot.asset_id}/complete`, { upload_id, parts: done });
  } else {
    await put(slot.upload_url, slot.headers, file, (n) => onProgress(n / file.size));
    if (slot.complete_url) await call(accountId, "POST", `/uploads/${slot.asset_id}/complete`, {});
  }
  onProgress(1);
  return slot.asset_id;
}

/** Files over this size go resumably (TUS, in 6 MB chunks as Supabase Storage takes them). */
const RESUMABLE_FROM = 6 * 1024 * 1024;
const CHUNK = 6 * 1024 * 1024;

/** The slot's object path in /storage/v1 (docs/storage.md); undefined for a type no slot takes. */
function slotPath(releaseId: string, trackId: string | undefined, file: File): string | undefined {
  const ext = (file.name.split(".").pop() ?? "").toLowerCase();
  const type = file.type.toLowerCase();
  if (trackId) {
    const audio =
      type.includes("flac") || ext === "flac"
        ? "flac"
        : type.includes("wav") || ext === "wav"
          ? "wav"
          : undefined;
    return audio ? `${releaseId}/${trackId}.${audio}` : undefined;
  }
  const image =
    type === "image/png" || ext === "png"
      ? "png"
      : type === "image/jpeg" || ext === "jpg" || ext === "jpeg"
        ? "jpg"
        : undefined;
  return image ? `${releaseId}/cover.${image}` : undefined;
}

/**
 * A large file through /storage/v1/upload/resumable (tus-js-client): a dropped connection is
 * retried from where it stopped, and the same file chosen again after a reload resumes its upload
 * (tus-js-client remembers the upload's URL in localStorage). Resolves with the asset id.
 */
async function resumable(
  bucket: "artwork" | "audio",
  objectName: string,
  file: File,
  onProgress: (share: number) => void,
): Promise<string> {
  const { Upload } = await import("tus-js-client");
  const token = await accessToken();
  return new Promise((resolve, reject) => {
    const tus = new Upload(file, {
      endpoint: "/storage/v1/upload/resumable",
      chunkSize: CHUNK,
      retryDelays: [0, 1000, 3000, 5000, 10000],
      removeFingerprintOnSuccess: true,
      headers: { apikey: currentTenant().anon_key, authorization: `Bearer ${token}` },
      metadata: { bucketName: bucket, objectName, contentType: file.type || "application/octet-stream" },
      onProgress: (sent, total) => onProgress(total ? sent / total : 0),
      onSuccess: ({ lastResponse }) => {
        const assetId = lastResponse.getHeader("backline-asset-id");
        if (assetId) resolve(assetId);
        else reject(new PlainError("The storage did not confirm the file. Try again."));
      },
      onError: (error) => {
        const response = (error as { originalResponse?: { getStatus(): number; getBody(): string } | null })
          .originalResponse;
        if (!response) {
          reject(
            new PlainError("The upload was cut off. Check your connection and try again.", {
              code: "network",
            }),
          );
          return;
        }
        // Storage's error shape (docs/storage.md): its message is the sentence.
        let parsed: { code?: string; message?: string } = {};
        try {
          parsed = JSON.parse(response.getBody()) as typeof parsed;
        } catch {
          parsed = {};
        }
        reject(failure(response.getStatus(), { code: parsed.code, detail: parsed.message }));
      },
    });
    void tus.findPreviousUploads().then((previous) => {
      if (previous[0]) tus.resumeFromPreviousUpload(previous[0]);
      tus.start();
    }, reject);
  });
}

// ---------------------------------------------------------------------------------------------
// Royalties (GET /royalties, royalties:read): sums per month, store, territory, release or track,
// per currency. Amounts are decimal strings and stay strings: the page never adds money up itself.

export interface RoyaltyFilters {
  from?: string | undefined;
  to?: string | undefined;
  store?: string | undefined;
  territory?: string | undefined;
  currency?: string | undefined;
  release_id?: string | undefined;
}

export interface RoyaltySums {
  currency: string;
  lines: number;
  units: number;
  streams: number;
  downloads: number;
  ugc_uses: number;
  gross: string;
  fees: string;
  net: string;
}

export interface RoyaltyGroup extends RoyaltySums {
  period?: string;
  store?: string;
  territory?: string | null;
  release_id?: string;
  /** By track: the release's title, and the track (all null for a sale of the release as a whole). */
  release_title?: string | null;
  track_id?: string | null;
  track_title?: string | null;
  isrc?: string | null;
}

export type RoyaltyKey = "period" | "store" | "territory" | "release" | "track";

/** The most groups the page reads for one breakdown (10 pages of 100). */
const MAX_GROUPS = 1000;

/** Every group of `by` under `filters` (page after page), with the totals per currency. */
export async function royaltyGroups(
  accountId: string,
  by: RoyaltyKey,
  filters: RoyaltyFilters,
): Promise<{ groups: RoyaltyGroup[]; totals: RoyaltySums[]; truncated: boolean }> {
  const groups: RoyaltyGroup[] = [];
  let totals: RoyaltySums[] = [];
  for (let offset = 0; ; offset += 100) {
    const q = new URLSearchParams({ group_by: by, limit: "100", offset: String(offset) });
    for (const [k, v] of Object.entries(filters)) if (v) q.set(k, v);
    const page = await call<{ data: RoyaltyGroup[]; has_more: boolean; totals?: RoyaltySums[] }>(
      accountId,
      "GET",
      `/royalties?${q}`,
    );
    groups.push(...page.data);
    totals = page.totals ?? totals;
    if (!page.has_more) return { groups, totals, truncated: false };
    if (groups.length >= MAX_GROUPS) return { groups, totals, truncated: true };
  }
}

// ---------------------------------------------------------------------------------------------
// The developers' corner: the account's API keys and webhook endpoints (owners and admins: the
// database shows a member or viewer none, and the API answers 403 for their role).

export interface ApiKey {
  id: string;
  name: string;
  mode: "live" | "test";
  prefix: string;
  scopes: string[];
  status: "pending_reveal" | "active" | "frozen" | "revoked";
  expires_at: string | null;
  last_used_at: string | null;
  reveal_locked_at: string | null;
  created_at: string;
  verification?: { sent_to: string[]; expires_at: string };
}

export interface WebhookEndpoint {
  id: string;
  url: string;
  description: string | null;
  events: string[];
  enabled: boolean;
  disabled_reason: string | null;
  created_at: string;
  secret?: string;
}

export interface WebhookDelivery {
  id: string;
  event_type: string;
  status: "pending" | "succeeded" | "failed";
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  created_at: string;
  next_attempt_at: string | null;
}

interface ListOf<T> {
  data: T[];
  has_more: boolean;
}

export const listKeys = (a: string) => call<ListOf<ApiKey>>(a, "GET", "/api-keys?limit=100");
export const createKey = (a: string, body: { name: string; scopes?: string[]; expires_at?: string }) =>
  call<ApiKey>(a, "POST", "/api-keys", { ...body, account_id: a });
export const revealKey = (a: string, id: string, code: string) =>
  call<ApiKey & { secret: string }>(a, "POST", `/api-keys/${id}/reveal`, { code });
export const resendKeyCode = (a: string, id: string) =>
  call<{ sent_to: string[] }>(a, "POST", `/api-keys/${id}/verification`);
export const freezeKey = (a: string, id: string, frozen: boolean) =>
  call<ApiKey>(a, "POST", `/api-keys/${id}/${frozen ? "freeze" : "unfreeze"}`);
export const revokeKey = (a: string, id: string) => call<ApiKey>(a, "DELETE", `/api-keys/${id}`);

export const listWebhooks = (a: string) => call<ListOf<WebhookEndpoint>>(a, "GET", "/webhooks?limit=100");
export const createWebhook = (a: string, body: { url: string; events: string[]; description?: string }) =>
  call<WebhookEndpoint & { secret: string }>(a, "POST", "/webhooks", body);
export const setWebhookEnabled = (a: string, id: string, enabled: boolean) =>
  call<WebhookEndpoint>(a, "PATCH", `/webhooks/${id}`, { enabled });
export const deleteWebhook = (a: string, id: string) => call<unknown>(a, "DELETE", `/webhooks/${id}`);
export const rotateWebhookSecret = (a: string, id: string) =>
  call<WebhookEndpoint & { secret: string }>(a, "POST", `/webhooks/${id}/rotate-secret`, {});
export const listDeliveries = (a: string, id: string) =>
  call<ListOf<WebhookDelivery>>(a, "GET", `/webhooks/${id}/deliveries?limit=20`);
export const retryDelivery = (a: string, id: string, deliveryId: string) =>
  call<WebhookDelivery>(a, "POST", `/webhooks/${id}/deliveries/${deliveryId}/retry`);
export const testWebhook = (a: string, id: string) =>
  call<WebhookDelivery>(a, "POST", `/webhooks/${id}/test`);

// ---------------------------------------------------------------------------------------------
// After delivery: metadata corrections (an update delivery to every store) and takedowns.

export const correctMetadata = (accountId: string, id: string, changes: Record<string, unknown>) =>
  call<ApiRelease>(accountId, "PATCH", `/releases/${id}/metadata`, changes);
export const requestTakedown = (accountId: string, id: string, reason: string) =>
  call<{ id: string; status: string }>(
    accountId,
    "POST",
    `/releases/${id}/takedown`,
    reason ? { reason } : {},
  );

// ---------------------------------------------------------------------------------------------
// Artists: their ids at the stores, and Official Artist Channel requests (YouTube Music).

export interface ApiArtist {
  id: string;
  name: string;
  bio: string | null;
  store_ids: Record<string, string>;
  updated_at: string;
}

export interface OacRequest {
  id: string;
  store: string;
  channel_url: string | null;
  status: "requested" | "processing" | "approved" | "rejected" | "cancelled";
  status_reason: string | null;
  created_at: string;
  completed_at: string | null;
}

export const listArtists = (a: string) => call<ListOf<ApiArtist>>(a, "GET", "/artists?limit=100");
export const getArtist = (a: string, id: string) => call<ApiArtist>(a, "GET", `/artists/${id}`);
export const patchArtist = (a: string, id: string, changes: Record<string, unknown>) =>
  call<ApiArtist>(a, "PATCH", `/artists/${id}`, changes);
/** The artist's latest channel request, or null when there is none (404). */
export async function getOacRequest(a: string, id: string): Promise<OacRequest | null> {
  try {
    return await call<OacRequest>(a, "GET", `/artists/${id}/oac-request`);
  } catch (e) {
    if ((e as { status?: number }).status === 404) return null;
    throw e;
  }
}
export const requestOac = (a: string, id: string, body: { channel_url?: string; note?: string }) =>
  call<OacRequest>(a, "POST", `/artists/${id}/oac-request`, body);
