import { createHash, randomUUID } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdtemp, readdir, readFile, rm, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Db } from "../db/db.ts";
import type { Tx } from "../db/types.ts";
import { ArchiveError, type ArchiveLimits, isZipArchive, unpackArchive } from "./archive.ts";
import { readCatalogueCsv } from "./csv.ts";
import { readErnMessage } from "./ern-read.ts";
import { type MediaTarget, storeMediaFile } from "./media.ts";
import {
  type GenreList,
  problem,
  type TransferCatalogue,
  type TransferMedia,
  type TransferProblem,
  type TransferRelease,
  type TransferTrack,
  trackHasErrors,
} from "./model.ts";

/**
 * Catalogue transfer (docs/catalogue.md): read a CSV template or a folder of ERN messages, check
 * the media against the checksums, plan each release and track against the account's catalogue
 * (create, or already there — matched by UPC, or by the source's own key for a release without
 * one, and by ISRC within it), and — unless it is a dry run — write what is new as drafts marked
 * as transferred. Writes go in batches of releases, each batch one transaction of a few bulk
 * statements; a batch the database refuses is retried release by release, so one bad release
 * never costs the good ones. The same import twice changes nothing.
 */

export class TransferError extends Error {
  readonly code: string;
  /** Where in the source the fault is (an archive's entry), when it is one place. */
  readonly where: string | undefined;

  constructor(message: string, code = "invalid_transfer", where?: string) {
    super(message);
    this.name = "TransferError";
    this.code = code;
    this.where = where;
  }
}

export type PlanAction = "create" | "exists" | "problem";

export interface PlannedTrack {
  where: string;
  isrc: string | null;
  title: string;
  disc_number: number;
  track_number: number | null;
  action: PlanAction;
  track_id?: string | undefined;
  problems: TransferProblem[];
}

export interface PlannedRelease {
  where: string;
  key: string;
  title: string;
  artist_name: string;
  upc: string | null;
  action: PlanAction;
  release_id?: string | undefined;
  tracks: PlannedTrack[];
  problems: TransferProblem[];
}

export interface TransferCounts {
  releases: Record<PlanAction, number>;
  tracks: Record<PlanAction, number>;
  artists_created: number;
  errors: number;
  warnings: number;
}

export interface TransferReport {
  transfer_id: string | null;
  account_id: string;
  source: string;
  format: "csv" | "ern";
  dry_run: boolean;
  counts: TransferCounts;
  /** Problems of the source as a whole. */
  problems: TransferProblem[];
  releases: PlannedRelease[];
  seconds: number;
}

export interface TransferProgress {
  phase: "read" | "check" | "write" | "media";
  done: number;
  total: number;
}

export interface TransferOptions {
  accountId: string;
  /**
   * A CSV file, one ERN message, a folder of ERN messages (searched recursively) with their media,
   * or a .zip archive of such a folder (src/transfer/archive.ts).
   */
  input: string;
  dryRun: boolean;
  via?: "cli" | "admin";
  /**
   * Where the checked media go (the installation's storage): each file that matched its checksum
   * becomes the new release's cover or the new track's audio, as an upload does. Without it the
   * media are checked only.
   */
  media?: MediaTarget | undefined;
  /** The source's name in the report and the transfer record (default: the input's file name). */
  sourceName?: string | undefined;
  /** An archive's limits (default ARCHIVE_LIMITS, docs/catalogue.md). */
  archiveLimits?: ArchiveLimits | undefined;
  /** Releases per write transaction (default 250; 50 on the embedded database). */
  batchSize?: number;
  onProgress?: (p: TransferProgress) => void;
}

interface Account {
  id: string;
  tenant_id: string;
}

async function catalogueLists(
  db: Db,
): Promise<{ genres: GenreList; storeCodes: Set<string>; territoryCodes: Set<string> }> {
  return db.asService(
    async (tx) => {
      const genres = (
        await tx.query<{ code: string; name: string }>("select code, name from internal.genres")
      ).rows;
      const stores = (await tx.query<{ code: string }>("select code from internal.stores")).rows;
      const territories = (await tx.query<{ code: string }>("select code from internal.territories")).rows;
      return {
        genres: { genres },
        storeCodes: new Set(stores.map((s) => s.code)),
        territoryCodes: new Set(territories.map((t) => t.code)),
      };
    },
    { readOnly: true },
  );
}

/**
 * What the release's own fields hold that submission will refuse, or that says the source no
 * longer sells it: said now, as warnings (the release is still imported).
 */
function reviewRelease(r: TransferRelease, territoryCodes: ReadonlySet<string>, today: string): void {
  const codes = [
    ...(r.licensed_territories_include && r.licensed_territories_include !== "WW"
      ? r.licensed_territories_include.split(",")
      : []),
    ...r.territories_exclude,
  ];
  const unknown = [...new Set(codes.filter((c) => !territoryCodes.has(c)))];
  if (unknown.length > 0)
    r.problems.push(
      problem(
        "warning",
        r.where,
        "unknown_territory",
        `territories ${unknown.join(", ")} are not ISO 3166-1 countries the platform knows: change them before submitting`,
      ),
    );
  if (r.deals.length > 0 && r.deals.every((d) => d.end !== null && d.end <= today))
    r.problems.push(
      problem(
        "warning",
        r.where,
        "deals_ended",
        "every deal of the source has ended: the previous distributor no longer sells the release; it is imported to be delivered again",
      ),
    );
}

/** Every .xml file under `dir`, sorted, relative to it. */
async function ernFiles(dir: string, prefix = ""): Promise<string[]> {
  const out: string[] = [];
  const entries = await readdir(path.join(dir, prefix), { withFileTypes: true });
  for (const e of entries.sort((a, b) => a.name.localeCompare(b.name))) {
    const rel = prefix ? `${prefix}/${e.name}` : e.name;
    if (e.isDirectory()) out.push(...(await ernFiles(dir, rel)));
    else if (e.isFile() && e.name.toLowerCase().endsWith(".xml")) out.push(rel);
  }
  return out;
}

/** Reads the source into the catalogue model: a CSV file, or a folder of ERN messages. */
export async function readTransferSource(
  input: string,
  lists: { genres: GenreList; storeCodes: ReadonlySet<string> },
  onProgress?: (p: TransferProgress) => void,
): Promise<TransferCatalogue> {
  const info = await stat(input).catch(() => undefined);
  if (!info) throw new TransferError(`${input} does not exist`, "not_found");
  let files: string[];
  let dir = input;
  if (info.isFile()) {
    if (/\.xml$/i.test(input)) {
      dir = path.dirname(input);
      files = [path.basename(input)];
    } else if (/\.(csv|txt)$/i.test(input)) return readCatalogueCsv(input, lists);
    else
      throw new TransferError(
        `${input}: a transfer is a .csv file of the template, an ERN message (.xml), a folder of ERN messages, or a .zip of one`,
      );
  } else files = await ernFiles(input);
  const catalogue: TransferCatalogue = { format: "ern", releases: [], problems: [] };
  if (files.length === 0)
    catalogue.problems.push(problem("error", input, "no_messages", "the folder holds no .xml message"));
  let done = 0;
  for (const rel of files) {
    const file = path.join(dir, rel);
    const result = readErnMessage(await readFile(file, "utf8"), {
      genres: lists.genres,
      source: rel,
      dir: path.dirname(file),
    });
    catalogue.problems.push(...result.problems);
    if (result.release) catalogue.releases.push(result.release);
    onProgress?.({ phase: "read", done: ++done, total: files.length });
  }
  return catalogue;
}

async function md5Of(file: string): Promise<string> {
  const hash = createHash("md5");
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

/** Checks one media file against its checksum: a mismatch is an error, a missing file a warning. */
async function checkMedia(
  media: TransferMedia | undefined,
  where: string,
  into: TransferProblem[],
  root: string,
): Promise<void> {
  if (!media) return;
  // Only files inside the source's folder are read: a URI never reaches elsewhere on this machine.
  const rel = path.relative(root, path.resolve(media.path));
  if (rel.startsWith("..") || path.isAbsolute(rel) || /^[a-z][a-z0-9+.-]*:/i.test(media.uri)) {
    media.checked = "missing";
    into.push(
      problem(
        "warning",
        where,
        "media_outside",
        `${media.uri} is not a file inside the source's folder: not read; upload it before submitting`,
      ),
    );
    return;
  }
  const info = await stat(media.path).catch(() => undefined);
  if (!info?.isFile()) {
    media.checked = "missing";
    into.push(
      problem(
        "warning",
        where,
        "media_missing",
        `${media.uri} is not beside the source: the release is imported without it; upload it before submitting`,
      ),
    );
    return;
  }
  if (!media.md5) {
    media.checked = "ok";
    return;
  }
  const actual = await md5Of(media.path);
  if (actual === media.md5) media.checked = "ok";
  else {
    media.checked = "mismatch";
    into.push(
      problem(
        "error",
        where,
        "checksum_mismatch",
        `${media.uri} has MD5 ${actual}, the source says ${media.md5}: the file is not the one described`,
      ),
    );
  }
}

interface Existing {
  releasesByUpc: Map<string, { id: string; status: string }>;
  releasesByKey: Map<string, { id: string; status: string }>;
  /** Tracks of the matched releases, by release id, then ISRC. */
  tracksOf: Map<string, Map<string, string>>;
  positionsOf: Map<string, Set<string>>;
  /** The account's tracks with these ISRCs (on any release): title and version, to refuse a clash early. */
  isrcTitles: Map<string, { title: string; version: string | null }>;
  /** UPCs that another account of the tenant holds. */
  upcElsewhere: Set<string>;
}

async function loadExisting(tx: Tx, account: Account, catalogue: TransferCatalogue): Promise<Existing> {
  const upcs = [...new Set(catalogue.releases.map((r) => r.upc).filter((u): u is string => !!u))];
  const keys = [...new Set(catalogue.releases.map((r) => r.key))];
  const isrcs = [
    ...new Set(
      catalogue.releases.flatMap((r) => r.tracks.map((t) => t.isrc)).filter((i): i is string => !!i),
    ),
  ];
  const byUpc = await tx.query<{ id: string; upc: string; status: string }>(
    "select id, upc, status from public.releases where account_id = $1 and upc = any($2::text[])",
    [account.id, upcs],
  );
  const byKey = await tx.query<{ id: string; source_key: string; status: string }>(
    `select t.release_id as id, t.source_key, r.status from internal.transferred_releases t
     join public.releases r on r.id = t.release_id where t.account_id = $1 and t.source_key = any($2::text[])`,
    [account.id, keys],
  );
  const elsewhere = await tx.query<{ upc: string }>(
    `select distinct r.upc from public.releases r join internal.accounts a on a.id = r.account_id
     where a.tenant_id = $1 and r.account_id <> $2 and r.upc = any($3::text[])`,
    [account.tenant_id, account.id, upcs],
  );
  const releasesByUpc = new Map(byUpc.rows.map((r) => [r.upc, { id: r.id, status: r.status }]));
  const releasesByKey = new Map(byKey.rows.map((r) => [r.source_key, { id: r.id, status: r.status }]));
  const ids = [...new Set([...byUpc.rows.map((r) => r.id), ...byKey.rows.map((r) => r.id)])];
  const tracks = await tx.query<{
    id: string;
    release_id: string;
    isrc: string | null;
    disc_number: number;
    track_number: number | null;
  }>(
    "select id, release_id, isrc, disc_number, track_number from public.tracks where release_id = any($1::uuid[])",
    [ids],
  );
  const tracksOf = new Map<string, Map<string, string>>();
  const positionsOf = new Map<string, Set<string>>();
  for (const t of tracks.rows) {
    if (t.isrc) {
      const m = tracksOf.get(t.release_id) ?? new Map<string, string>();
      m.set(t.isrc, t.id);
      tracksOf.set(t.release_id, m);
    }
    const p = positionsOf.get(t.release_id) ?? new Set<string>();
    p.add(`${t.disc_number}/${t.track_number}`);
    positionsOf.set(t.release_id, p);
  }
  const isrcRows = await tx.query<{ isrc: string; title: string; version: string | null }>(
    "select distinct on (isrc) isrc, title, version from public.tracks where account_id = $1 and isrc = any($2::text[])",
    [account.id, isrcs],
  );
  return {
    releasesByUpc,
    releasesByKey,
    tracksOf,
    positionsOf,
    isrcTitles: new Map(isrcRows.rows.map((r) => [r.isrc, { title: r.title, version: r.version }])),
    upcElsewhere: new Set(elsewhere.rows.map((r) => r.upc)),
  };
}

const sameRecording = (
  a: { title: string; version: string | null },
  b: { title: string; version: string | null },
) =>
  a.title.trim().toLowerCase() === b.title.trim().toLowerCase() &&
  (a.version ?? "").trim().toLowerCase() === (b.version ?? "").trim().toLowerCase();

interface Item {
  release: TransferRelease;
  plan: PlannedRelease;
  /** The tracks to create, with the plan entry of each. */
  newTracks: { track: TransferTrack; plan: PlannedTrack }[];
}

/** Plans every release and track against what the account already has. */
function plan(catalogue: TransferCatalogue, existing: Existing): Item[] {
  const items: Item[] = [];
  const seenKeys = new Map<string, string>();
  const newIsrcs = new Map<string, { title: string; version: string | null; where: string }>();
  for (const release of catalogue.releases) {
    const problems = [...release.problems];
    const where = release.where;
    const dupOf = seenKeys.get(release.key) ?? (release.upc ? seenKeys.get(`upc:${release.upc}`) : undefined);
    if (dupOf)
      problems.push(
        problem(
          "error",
          where,
          "duplicate_release",
          `the same release (${release.key}) as ${dupOf}: imported once`,
        ),
      );
    if (release.upc && existing.upcElsewhere.has(release.upc))
      problems.push(
        problem(
          "error",
          where,
          "upc_elsewhere",
          `UPC ${release.upc} belongs to a release of another account on this platform`,
        ),
      );
    const match =
      (release.upc ? existing.releasesByUpc.get(release.upc) : undefined) ??
      existing.releasesByKey.get(release.key);
    const trackPlans: PlannedTrack[] = [];
    const newTracks: Item["newTracks"] = [];
    const known = match
      ? (existing.tracksOf.get(match.id) ?? new Map<string, string>())
      : new Map<string, string>();
    const positions = match ? (existing.positionsOf.get(match.id) ?? new Set<string>()) : new Set<string>();
    for (const track of release.tracks) {
      const tp: PlannedTrack = {
        where: track.where,
        isrc: track.isrc,
        title: track.title,
        disc_number: track.disc_number,
        track_number: track.track_number,
        action: "create",
        problems: [...track.problems],
      };
      const existingId = track.isrc ? known.get(track.isrc) : undefined;
      if (existingId) {
        tp.action = "exists";
        tp.track_id = existingId;
      } else if (trackHasErrors(track)) {
        tp.action = "problem";
      } else {
        const other = track.isrc ? existing.isrcTitles.get(track.isrc) : undefined;
        const sibling = track.isrc ? newIsrcs.get(track.isrc) : undefined;
        if (other && !sameRecording(other, track))
          tp.problems.push(
            problem(
              "error",
              track.where,
              "isrc_taken",
              `ISRC ${track.isrc} already identifies "${other.title}" in this account`,
            ),
          );
        else if (sibling && !sameRecording(sibling, track))
          tp.problems.push(
            problem(
              "error",
              track.where,
              "isrc_taken",
              `ISRC ${track.isrc} is also "${sibling.title}" (${sibling.where})`,
            ),
          );
        if (match) {
          if (!["draft", "pending", "rejected"].includes(match.status))
            tp.problems.push(
              problem(
                "error",
                track.where,
                "release_not_editable",
                `the release is already there (${match.status}) without this track: add it through a correction`,
              ),
            );
          else if (positions.has(`${track.disc_number}/${track.track_number}`))
            tp.problems.push(
              problem(
                "error",
                track.where,
                "position_taken",
                `the release already has another track at disc ${track.disc_number} track ${track.track_number}`,
              ),
            );
        }
        tp.action = tp.problems.some((p) => p.severity === "error") ? "problem" : "create";
        if (tp.action === "create") newTracks.push({ track, plan: tp });
      }
      trackPlans.push(tp);
    }
    const hasErrors =
      problems.some((p) => p.severity === "error") || trackPlans.some((t) => t.action === "problem");
    const action: PlanAction = hasErrors ? "problem" : match ? "exists" : "create";
    if (action === "problem") {
      // Nothing of a release with an error is written: its tracks are held back with it.
      for (const t of trackPlans) if (t.action === "create") t.action = "problem";
      newTracks.length = 0;
    } else {
      // Only a release that goes in makes a later one with the same key a duplicate.
      seenKeys.set(release.key, where);
      if (release.upc) seenKeys.set(`upc:${release.upc}`, where);
      for (const { track } of newTracks)
        if (track.isrc)
          newIsrcs.set(track.isrc, { title: track.title, version: track.version, where: track.where });
    }
    items.push({
      release,
      newTracks,
      plan: {
        where,
        key: release.key,
        title: release.title,
        artist_name: release.artist_name,
        upc: release.upc,
        action,
        release_id: match?.id,
        tracks: trackPlans,
        problems,
      },
    });
  }
  return items;
}

const RELEASE_COLUMNS =
  "id uuid, account_id uuid, artist_id uuid, title text, version text, release_type text, artist_name text, " +
  "primary_genre text, secondary_genre text, release_date date, original_release_date date, upc text, label_name text, " +
  "catalog_number text, licensed_territories_include text, territories_exclude text[], copyright text, " +
  "copyright_year integer, phonographic_copyright text, phonographic_year integer, explicit boolean, language text";
const TRACK_COLUMNS =
  "id uuid, release_id uuid, account_id uuid, title text, version text, isrc text, duration integer, " +
  "track_number integer, disc_number integer, artist_name text, explicit boolean, language text, contributors jsonb, splits jsonb";

/** Writes one batch of planned items in the transaction: artists, releases, tracks, transfer marks. */
async function writeBatch(tx: Tx, account: Account, transferId: string, items: Item[]): Promise<number> {
  const creating = items.filter((i) => i.plan.action === "create");
  const adding = items.filter((i) => i.plan.action === "exists" && i.newTracks.length > 0);
  let artistsCreated = 0;
  if (creating.length > 0) {
    const names = [...new Set(creating.map((i) => i.release.artist_name))];
    const found = await tx.query<{ id: string; name: string }>(
      "select distinct on (name) id, name from public.artist_profiles where account_id = $1 and name = any($2::text[]) order by name, created_at",
      [account.id, names],
    );
    const artistIds = new Map(found.rows.map((r) => [r.name, r.id]));
    const missing = names.filter((n) => !artistIds.has(n));
    if (missing.length > 0) {
      const made = await tx.query<{ id: string; name: string }>(
        `insert into public.artist_profiles (account_id, name)
         select $1, x.name from unnest($2::text[]) as x(name) returning id, name`,
        [account.id, missing],
      );
      for (const r of made.rows) artistIds.set(r.name, r.id);
      artistsCreated = made.rows.length;
    }
    const rows = creating.map((i) => {
      const r = i.release;
      i.plan.release_id = randomUUID();
      return {
        id: i.plan.release_id,
        account_id: account.id,
        artist_id: artistIds.get(r.artist_name),
        title: r.title,
        version: r.version,
        release_type: r.release_type,
        artist_name: r.artist_name,
        primary_genre: r.primary_genre,
        secondary_genre: r.secondary_genre,
        release_date: r.release_date,
        original_release_date: r.original_release_date,
        upc: r.upc,
        label_name: r.label_name,
        catalog_number: r.catalog_number,
        licensed_territories_include: r.licensed_territories_include,
        territories_exclude: r.territories_exclude,
        copyright: r.copyright,
        copyright_year: r.copyright_year,
        phonographic_copyright: r.phonographic_copyright,
        phonographic_year: r.phonographic_year,
        explicit: r.explicit,
        language: r.language,
      };
    });
    await tx.query(
      `insert into public.releases (${RELEASE_COLUMNS.replace(/ [a-z[\]]+(,|$)/g, "$1")}, status)
       select x.*, 'draft' from jsonb_to_recordset($1::jsonb) as x(${RELEASE_COLUMNS})`,
      [JSON.stringify(rows)],
    );
    await tx.query(
      `insert into internal.transferred_releases (release_id, account_id, transfer_id, source_key, store_ids, track_store_ids, deals)
       select x.release_id, $1, $2, x.source_key, x.store_ids, x.track_store_ids, x.deals
       from jsonb_to_recordset($3::jsonb) as x(release_id uuid, source_key text, store_ids jsonb, track_store_ids jsonb, deals jsonb)`,
      [
        account.id,
        transferId,
        JSON.stringify(
          creating.map((i) => ({
            release_id: i.plan.release_id,
            source_key: i.release.key,
            store_ids: i.release.store_ids,
            track_store_ids: Object.fromEntries(
              i.release.tracks
                .filter((t) => t.isrc && Object.keys(t.store_ids).length)
                .map((t) => [t.isrc, t.store_ids]),
            ),
            deals: i.release.deals,
          })),
        ),
      ],
    );
  }
  const trackRows = [...creating, ...adding].flatMap((i) =>
    i.newTracks.map(({ track: t, plan: tp }) => {
      tp.track_id = randomUUID();
      return {
        id: tp.track_id,
        release_id: i.plan.release_id,
        account_id: account.id,
        title: t.title,
        version: t.version,
        isrc: t.isrc,
        duration: t.duration,
        track_number: t.track_number,
        disc_number: t.disc_number,
        artist_name: t.artist_name && t.artist_name !== i.release.artist_name ? t.artist_name : null,
        explicit: t.explicit,
        language: t.language,
        contributors: t.contributors,
        splits: t.splits.map((s) => ({
          name: s.name,
          ...(s.email ? { email: s.email } : {}),
          share: s.share,
        })),
      };
    }),
  );
  if (trackRows.length > 0) {
    await tx.query(
      `insert into public.tracks (${TRACK_COLUMNS.replace(/ [a-z[\]]+(,|$)/g, "$1")})
       select x.* from jsonb_to_recordset($1::jsonb) as x(${TRACK_COLUMNS})`,
      [JSON.stringify(trackRows)],
    );
  }
  return artistsCreated;
}

function emptyCounts(): TransferCounts {
  return {
    releases: { create: 0, exists: 0, problem: 0 },
    tracks: { create: 0, exists: 0, problem: 0 },
    artists_created: 0,
    errors: 0,
    warnings: 0,
  };
}

function countOf(report: Pick<TransferReport, "releases" | "problems">, artists: number): TransferCounts {
  const c = emptyCounts();
  c.artists_created = artists;
  const tally = (ps: TransferProblem[]) => {
    for (const p of ps) c[p.severity === "error" ? "errors" : "warnings"]++;
  };
  tally(report.problems);
  for (const r of report.releases) {
    c.releases[r.action]++;
    tally(r.problems);
    for (const t of r.tracks) {
      c.tracks[t.action]++;
      tally(t.problems);
    }
  }
  return c;
}

/** Problems kept on the transfer record (the report itself has them all). */
const RECORDED_PROBLEMS = 1000;

/**
 * Runs a transfer (or its dry run) for an account; see the module comment. An archive is unpacked
 * into a private folder first (and refused whole if it breaks a limit: nothing of it is read), then
 * imported as that folder; the folder is removed at the end.
 */
export async function runTransfer(db: Db, options: TransferOptions): Promise<TransferReport> {
  const info = await stat(options.input).catch(() => undefined);
  if (!info?.isFile() || !(await isZipArchive(options.input))) return runTransferOf(db, options);
  const dir = await mkdtemp(path.join(os.tmpdir(), "backline-transfer-archive-"));
  try {
    await unpackArchive(options.input, dir, options.archiveLimits).catch((error: unknown) => {
      if (error instanceof ArchiveError) {
        throw new TransferError(error.message, error.code, error.entry ?? path.basename(options.input));
      }
      throw error;
    });
    return await runTransferOf(
      db,
      { ...options, input: dir },
      options.sourceName ?? path.basename(options.input),
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function runTransferOf(db: Db, options: TransferOptions, sourceName?: string): Promise<TransferReport> {
  const started = performance.now();
  const account = await db.asService(
    async (tx) =>
      (
        await tx.query<Account>("select id, tenant_id from internal.accounts where id = $1", [
          options.accountId,
        ])
      ).rows[0],
    { readOnly: true },
  );
  if (!account) throw new TransferError(`no account ${options.accountId}`, "not_found");
  const lists = await catalogueLists(db);
  const catalogue = await readTransferSource(options.input, lists, options.onProgress);
  const source = sourceName ?? options.sourceName ?? path.basename(path.resolve(options.input));
  const today = new Date().toISOString().slice(0, 10);
  for (const r of catalogue.releases) reviewRelease(r, lists.territoryCodes, today);

  // Media against the source's checksums (only files the source names).
  const media = catalogue.releases
    .flatMap((r) => [
      { m: r.artwork, where: r.where, into: r.problems },
      ...r.tracks.map((t) => ({ m: t.audio, where: t.where, into: t.problems })),
    ])
    .filter((x) => x.m);
  let checked = 0;
  const info = await stat(options.input);
  const root = path.resolve(info.isFile() ? path.dirname(options.input) : options.input);
  for (const x of media) {
    await checkMedia(x.m, x.where, x.into, root);
    options.onProgress?.({ phase: "check", done: ++checked, total: media.length });
  }

  const fatal =
    catalogue.problems.some((p) => p.severity === "error" && p.code !== "malformed_csv") &&
    catalogue.releases.length === 0;
  const existing = fatal
    ? undefined
    : await db.asService((tx) => loadExisting(tx, account, catalogue), { readOnly: true });
  const items = existing ? plan(catalogue, existing) : [];
  const report: TransferReport = {
    transfer_id: null,
    account_id: account.id,
    source,
    format: catalogue.format,
    dry_run: options.dryRun,
    counts: emptyCounts(),
    problems: catalogue.problems,
    releases: items.map((i) => i.plan),
    seconds: 0,
  };
  if (options.dryRun || !existing) {
    report.counts = countOf(report, 0);
    report.seconds = (performance.now() - started) / 1000;
    return report;
  }

  const transferId = await db.asService(async (tx) => {
    const r = await tx.query<{ id: string }>(
      "insert into internal.transfers (tenant_id, account_id, source, format, via) values ($1, $2, $3, $4, $5) returning id",
      [account.tenant_id, account.id, source, catalogue.format, options.via ?? "cli"],
    );
    return (r.rows[0] as { id: string }).id;
  });
  report.transfer_id = transferId;
  const writable = items.filter(
    (i) => i.plan.action === "create" || (i.plan.action === "exists" && i.newTracks.length),
  );
  // On the embedded database a write transaction holds its one connection: smaller batches let the
  // server's other requests in between.
  const batchSize = options.batchSize ?? (db.kind === "pglite" ? 50 : 250);
  let artists = 0;
  let done = 0;
  for (let at = 0; at < writable.length; at += batchSize) {
    const batch = writable.slice(at, at + batchSize);
    try {
      artists += await db.asService((tx) => writeBatch(tx, account, transferId, batch));
    } catch {
      // One release at a time: the good ones go in, the bad one says why.
      for (const item of batch) {
        try {
          artists += await db.asService((tx) => writeBatch(tx, account, transferId, [item]));
        } catch (error) {
          refuse(item, error);
        }
      }
    }
    done += batch.length;
    options.onProgress?.({ phase: "write", done, total: writable.length });
  }
  if (options.media) await storeMedia(db, options.media, writable, options.onProgress);
  report.counts = countOf(report, artists);
  const all = [
    ...report.problems,
    ...report.releases.flatMap((r) => [...r.problems, ...r.tracks.flatMap((t) => t.problems)]),
  ];
  await db.asService((tx) =>
    tx.query("update internal.transfers set counts = $2, problems = $3, completed_at = now() where id = $1", [
      transferId,
      JSON.stringify(report.counts),
      JSON.stringify(
        all
          .filter((p) => p.severity === "error")
          .concat(all.filter((p) => p.severity === "warning"))
          .slice(0, RECORDED_PROBLEMS),
      ),
    ]),
  );
  report.seconds = (performance.now() - started) / 1000;
  return report;
}

/** A release the database refused: reported with the database's reason, nothing of it kept. */
function refuse(item: Item, error: unknown): void {
  const message = error instanceof Error ? error.message : String(error);
  const wasNew = item.plan.action === "create";
  item.plan.problems.push(
    problem("error", item.plan.where, "refused", `the database refused the release: ${message}`),
  );
  item.plan.action = "problem";
  if (wasNew) item.plan.release_id = undefined;
  for (const { plan: tp } of item.newTracks) {
    tp.action = "problem";
    tp.track_id = undefined;
  }
}

/** The media of what was written (new releases' covers, new tracks' audio) into storage, file by file. */
async function storeMedia(
  db: Db,
  target: MediaTarget,
  items: Item[],
  onProgress?: (p: TransferProgress) => void,
): Promise<void> {
  const files: { run: () => Promise<void>; where: string; into: TransferProblem[]; uri: string }[] = [];
  for (const item of items) {
    const releaseId = item.plan.release_id;
    if (!releaseId || item.plan.action === "problem") continue;
    const art = item.release.artwork;
    if (item.plan.action === "create" && art?.checked === "ok")
      files.push({
        run: () => storeMediaFile(db, target, { releaseId, kind: "artwork", file: art.path }),
        where: item.plan.where,
        into: item.plan.problems,
        uri: art.uri,
      });
    for (const { track, plan: tp } of item.newTracks) {
      const audio = track.audio;
      const trackId = tp.track_id;
      if (audio?.checked !== "ok" || !trackId || tp.action !== "create") continue;
      files.push({
        run: () => storeMediaFile(db, target, { releaseId, trackId, kind: "audio", file: audio.path }),
        where: tp.where,
        into: tp.problems,
        uri: audio.uri,
      });
    }
  }
  let done = 0;
  let next = 0;
  // A few at a time: each file is a copy and an fsync, then two short transactions.
  const worker = async () => {
    while (next < files.length) {
      const f = files[next++] as (typeof files)[number];
      try {
        await f.run();
      } catch (error) {
        f.into.push(
          problem(
            "warning",
            f.where,
            "media_not_stored",
            `${f.uri} was not stored (${error instanceof Error ? error.message : String(error)}): upload it before submitting`,
          ),
        );
      }
      onProgress?.({ phase: "media", done: ++done, total: files.length });
    }
  };
  await Promise.all(Array.from({ length: db.kind === "pglite" ? 2 : 6 }, worker));
}
