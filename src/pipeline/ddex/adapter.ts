import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { z } from "zod";
import type { MediaFile, MediaSource } from "../../storage/media.ts";
import { DICTIONARY_IDS, dictionary, resolveVocabulary } from "../dictionaries.ts";
import {
  DeliveryConfigError,
  type DeliveryRequest,
  type DeliveryResult,
  type StoreAdapter,
} from "../stores.ts";
import { batchIdAt, buildManifestMessage } from "./choreography.ts";
import { type Destination, dropBatch, type PackageFile } from "./drop.ts";
import type { ErnAudioFile, ErnImageFile, ErnRelease, ErnTrack } from "./ern.ts";
import { CONTRIBUTOR_ROLE } from "./ern-input.ts";
import { ERN_VERSIONS, ERN_WRITERS } from "./ern-writers.ts";
import { SftpSettings } from "./sftp.ts";

/**
 * The `ddex` store adapter (docs/ddex.md): each delivery becomes a DDEX ERN 4.3 package — the
 * NewReleaseMessage, the audio and cover files, and the batch's ManifestMessage as DDEX's SFTP
 * choreography 1.8 defines it — dropped into the store's directory, SFTP folder or S3 bucket,
 * the "file drop" stores ingest from. Takedowns are the
 * same message with every deal ended. The store tells when the release is live
 * (`backline deliveries report`, POST /admin/v1/deliveries/{id}/report), unless its settings say
 * to assume it after `live_after_ms`.
 */

const DPID = z
  .string()
  .regex(/^PADPIDA[a-zA-Z0-9]+$/, "a DDEX Party ID: PADPIDA followed by letters and digits");
const Party = z.object({ dpid: DPID, name: z.string().trim().min(1).max(300) }).strict();

export const COMMERCIAL_MODELS = [
  "SubscriptionModel",
  "AdvertisementSupportedModel",
  "PayAsYouGoModel",
  "FreeOfChargeModel",
] as const;
export const USE_TYPES = [
  "Stream",
  "OnDemandStream",
  "NonInteractiveStream",
  "PermanentDownload",
  "ConditionalDownload",
  "TetheredDownload",
] as const;

/** The contributor roles a store may name its own way (artists are DisplayArtists, not roles). */
export const STORE_ROLE_KEYS = Object.keys(CONTRIBUTOR_ROLE) as [string, ...string[]];

const DEFAULT_DEALS = [
  { commercial_model: "SubscriptionModel", use_types: ["OnDemandStream", "NonInteractiveStream"] },
  { commercial_model: "AdvertisementSupportedModel", use_types: ["OnDemandStream", "NonInteractiveStream"] },
  { commercial_model: "PayAsYouGoModel", use_types: ["PermanentDownload"] },
] as const;

export const DestinationSettings = z.discriminatedUnion("type", [
  z.object({ type: z.literal("directory"), path: z.string().min(1) }).strict(),
  z
    .object({
      type: z.literal("s3"),
      bucket: z.string().min(3).max(63),
      prefix: z.string().max(500).optional(),
      region: z.string().min(1).optional(),
      endpoint: z.url().optional(),
      force_path_style: z.boolean().optional(),
      access_key_id: z.string().min(1).optional(),
      secret_access_key: z.string().min(1).optional(),
    })
    .strict(),
  SftpSettings,
]);

/** Where and how often the store's answers and reports are fetched (src/pipeline/store-inbox.ts). */
export const InboxSettings = z
  .object({
    // Where the folders are: by default the destination's server (the same credentials).
    source: DestinationSettings.optional(),
    // The folder of the store's acknowledgement files, relative to the source's path.
    acknowledgements: z.string().min(1).max(500).optional(),
    reports: z
      .object({
        path: z.string().min(1).max(500),
        format: z.string().default("ddex-dsr"),
        // The tenant whose catalog the reports cover (royalty imports are per tenant).
        tenant: z.uuid(),
      })
      .strict()
      .optional(),
    every_s: z.number().int().min(10).max(86_400).default(900),
    // How long an acknowledgement naming a delivery not yet recorded as sent is read again at each
    // poll before it is given up and moved to `unmatched/` (docs/ddex.md).
    unmatched_after_s: z.number().int().min(0).max(2_592_000).default(172_800),
    enabled: z.boolean().default(true),
  })
  .strict();
export type InboxSettings = z.infer<typeof InboxSettings>;

export const DdexSettings = z
  .object({
    sender: Party,
    recipient: Party,
    destination: DestinationSettings,
    deals: z
      .array(
        z
          .object({
            commercial_model: z.enum(COMMERCIAL_MODELS),
            use_types: z.array(z.enum(USE_TYPES)).min(1),
          })
          .strict(),
      )
      .min(1)
      .default(DEFAULT_DEALS.map((d) => ({ ...d, use_types: [...d.use_types] }))),
    test_messages: z.boolean().default(false),
    // The ERN version the store takes: 4.3, or 3.8.2 for stores still on ERN 3 (docs/ddex.md).
    ern_version: z.enum(ERN_VERSIONS).default("4.3"),
    // The store's genre list and role vocabulary: a built-in dictionary (src/pipeline/dictionaries).
    dictionary: z.enum(DICTIONARY_IDS).optional(),
    // The store's own genre names for Backline's genre codes, for stores with their own list; with
    // a dictionary, overrides of its mappings, each one of the dictionary's genres.
    genres: z
      .record(
        z.string().regex(/^[a-z0-9-]{1,60}$/, "a Backline genre code (GET /api/public/v1/rules)"),
        z.string().trim().min(1).max(100),
      )
      .default({}),
    // The store's own names for Backline's contributor roles (overriding the dictionary's).
    roles: z.partialRecord(z.enum(STORE_ROLE_KEYS), z.string().trim().min(1).max(100)).default({}),
    live_after_ms: z.number().int().min(0).nullable().default(null),
    inbox: InboxSettings.optional(),
  })
  .strict()
  .superRefine((s, ctx) => {
    if (!s.dictionary) return;
    const names = new Set(dictionary(s.dictionary).genres.map((g) => g.name));
    for (const [code, name] of Object.entries(s.genres)) {
      if (!names.has(name)) {
        ctx.addIssue({
          code: "custom",
          path: ["genres", code],
          message: `${JSON.stringify(name)} is not a genre of the ${s.dictionary} dictionary`,
        });
      }
    }
  });
export type DdexSettings = z.infer<typeof DdexSettings>;

/** The store's ddex settings, or a DeliveryConfigError naming every field at fault. */
export function ddexSettingsOf(store: { code: string; settings: Record<string, unknown> }): DdexSettings {
  const parsed = DdexSettings.safeParse(store.settings.ddex ?? {});
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues
    .map((i) => `${["ddex", ...i.path].join(".")}: ${i.message}`)
    .join("; ");
  throw new DeliveryConfigError(`store ${store.code} has bad ddex settings: ${problems}`);
}

/** The genre and role names the store reads: its dictionary's, with its overrides. */
function vocabularyOf(settings: DdexSettings): {
  genreMap: Record<string, string>;
  roleMap: Record<string, string>;
} {
  const resolved = resolveVocabulary(settings);
  return { genreMap: resolved.genres, roleMap: resolved.roles };
}

interface Hashed {
  md5: string;
  sha256: string;
  bytes: number;
}

async function hashFile(file: string, signal?: AbortSignal): Promise<Hashed> {
  const md5 = createHash("md5");
  const sha256 = createHash("sha256");
  let bytes = 0;
  for await (const chunk of createReadStream(file, { signal })) {
    md5.update(chunk as Buffer);
    sha256.update(chunk as Buffer);
    bytes += (chunk as Buffer).length;
  }
  return { md5: md5.digest("hex"), sha256: sha256.digest("hex"), bytes };
}

function hashData(data: Buffer): Hashed {
  return {
    md5: createHash("md5").update(data).digest("hex"),
    sha256: createHash("sha256").update(data).digest("hex"),
    bytes: data.length,
  };
}

const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : undefined);

export function ddexStore(media: MediaSource, now: () => Date = () => new Date()): StoreAdapter {
  return {
    name: "ddex",
    async deliver(request: DeliveryRequest): Promise<DeliveryResult> {
      // Media from object storage come as temporary local copies, removed once the batch is dropped.
      const opened: MediaFile[] = [];
      try {
        return await packageAndDrop(request, (found) => {
          if (found) opened.push(found);
          return found;
        });
      } finally {
        await Promise.all(opened.map((f) => f.release?.()));
      }
    },
  };

  async function packageAndDrop(
    request: DeliveryRequest,
    keep: (found: MediaFile | undefined) => MediaFile | undefined,
  ): Promise<DeliveryResult> {
    const settings = ddexSettingsOf(request.store);
    const release = request.release as unknown as ErnRelease & { account_id: string };
    const tracks = request.tracks as unknown as (ErnTrack & { audio_metadata: Record<string, unknown> })[];
    const folder = release.upc ?? release.id;
    const files: (PackageFile & Hashed)[] = [];

    const audio = new Map<string, ErnAudioFile>();
    for (const track of tracks) {
      const found = keep(await media.audio(release.account_id, release.id, track.id, request.signal));
      if (!found) continue;
      const hashed = await hashFile(found.path, request.signal);
      const uri = `resources/${track.isrc ?? track.id}.${found.ext}`;
      files.push({ path: `${folder}/${uri}`, source: { file: found.path }, ...hashed });
      const meta = track.audio_metadata ?? {};
      audio.set(track.id, {
        uri,
        md5: hashed.md5,
        bytes: hashed.bytes,
        codec: found.ext === "flac" ? "FLAC" : "PCM",
        channels: num(meta.channels),
        sampleRate: num(meta.sample_rate),
        bitsPerSample: num(meta.bit_depth),
      });
    }
    let artwork: ErnImageFile | undefined;
    const cover = keep(await media.artwork(release.account_id, release.id, request.signal));
    if (cover) {
      const hashed = await hashFile(cover.path, request.signal);
      const uri = `resources/cover.${cover.ext === "jpeg" ? "jpg" : cover.ext}`;
      files.push({ path: `${folder}/${uri}`, source: { file: cover.path }, ...hashed });
      artwork = { uri, md5: hashed.md5, bytes: hashed.bytes, codec: cover.ext === "png" ? "PNG" : "JPEG" };
    }

    const createdAt = now();
    const xml = Buffer.from(
      ERN_WRITERS[settings.ern_version]({
        messageId: request.deliveryId,
        threadId: release.id,
        createdAt,
        sender: settings.sender,
        recipient: settings.recipient,
        test: settings.test_messages,
        release,
        tracks,
        audio,
        artwork,
        deals: settings.deals.map((d) => ({ commercialModel: d.commercial_model, useTypes: d.use_types })),
        endDealsAt: request.action === "takedown" ? createdAt : undefined,
        ...vocabularyOf(settings),
      }),
    );
    files.unshift({ path: `${folder}/${folder}.xml`, source: { data: xml }, ...hashData(xml) });

    // The choreography's batch: named by the time it was made, given once by the pipeline so
    // that a retry writes the same folder (src/pipeline/delivery.ts); its ManifestMessage
    // (BatchComplete_<batch>.xml, written last) lists the message with its release ids and hash.
    const batchId = request.batchId ?? batchIdAt(createdAt);
    const message = files[0] as PackageFile & Hashed;
    const complete = Buffer.from(
      buildManifestMessage({
        batchId,
        createdAt,
        sender: settings.sender,
        recipient: settings.recipient,
        test: settings.test_messages,
        messages: [
          {
            messageId: request.deliveryId,
            url: message.path,
            icpn: release.upc ?? null,
            releaseId: release.id,
            action: request.action,
            sha256: message.sha256,
          },
        ],
      }),
    );
    const dropped = await dropBatch(
      settings.destination as Destination,
      batchId,
      files,
      { path: `BatchComplete_${batchId}.xml`, source: { data: complete }, bytes: complete.length },
      request.signal,
      request.store.code,
    );
    // A takedown is done when the store confirms it (its report), never assumed (docs/ddex.md).
    return {
      reference: dropped.location,
      liveAfterMs: request.action === "takedown" ? null : settings.live_after_ms,
    };
  }
}
