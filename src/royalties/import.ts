import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import { z } from "zod";
import type { Db } from "../db/db.ts";
import { asDbError } from "../db/errors.ts";
import { bulkWorkMem } from "../db/memory.ts";
import type { Tx } from "../db/types.ts";
import { Count, Currency, count, Money, timestamp } from "../http/formats.ts";
import { updateRollups } from "./analytics.ts";
import { readRecords } from "./csv.ts";
import { FORMAT_NAMES, FormatError, formatNamed, LineError } from "./formats/index.ts";
import { type Codes, formatAmount, monthProblem, type NormalLine, normalise } from "./normalise.ts";

/**
 * The import of one store report (docs/royalties.md): the file is read as a stream, each line is
 * parsed by its format, checked, matched to the tenant's delivered tracks (ISRC) and releases (UPC), and
 * bulk loaded with COPY (on PGlite through '/dev/blob', src/db/pglite.ts) in ONE transaction with the
 * per-account totals, the analytics, the royalties.imported events and the notifications.
 *
 * Malformed lines: the whole report is refused, nothing is loaded, and the refusal is recorded
 * with every malformed line's number and reason (the first 100), so the operator fixes the file
 * and imports it again. What is read past without refusing (a UPC with a wrong check digit on a
 * line matched otherwise, a DSR footer that disagrees with the body) is a warning on the import.
 * Idempotency: a report whose bytes (SHA-256), or whose normalised lines, were already imported
 * for the tenant is refused as a duplicate and counts nothing.
 */

export interface ImportOptions {
  tenantId: string;
  format: string;
  /** Path of the report file. */
  file: string;
  /** The name to record (defaults to the path's base name; null records none). */
  fileName?: string | null | undefined;
  /** YYYY-MM. */
  period?: string | undefined;
  /**
   * The store, for formats whose lines do not name it. A DSR without it is from the store whose
   * `ddex.recipient.dpid` is the sender's party id in its HEAD record.
   */
  store?: string | undefined;
  source?: "cli" | "admin_api" | "store";
  /** The id the import gets (the admin API's upload lets a client choose it, to poll its progress). */
  importId?: string | undefined;
  onProgress?: (progress: ImportProgress) => void;
  /** How often onProgress is called, at most (ms). */
  progressEveryMs?: number;
  /** Called as each phase ends (hash, load, rollups, events) with its duration, for benchmarks. */
  onPhase?: (phase: string, ms: number) => void;
}

export interface ImportProgress {
  bytes: number;
  totalBytes: number;
  lines: number;
}

export interface CurrencyTotal {
  currency: string;
  lines: number;
  /** A count: a JSON integer (docs/public-api.md, "Formats"). Imports before 1.1.0 stored it as text. */
  units: number;
  gross: string;
  fees: string;
  net: string;
}

/** CurrencyTotal's schema, for the documents that describe it (the admin API, webhook payloads). */
export const CurrencyTotalSchema = z
  .object({
    currency: Currency,
    lines: Count,
    units: Count,
    gross: Money.meta({ description: "Revenue before store fees." }),
    fees: Money.meta({ description: "Fees the store kept." }),
    net: Money.meta({ description: "Revenue after store fees." }),
  })
  .meta({ id: "RoyaltyImportTotal", description: "A royalty import's sums in one currency." });

export type UnmatchedReason = "no_match" | "ambiguous";

export interface UnmatchedEntry {
  isrc: string | null;
  upc: string | null;
  reason: UnmatchedReason;
  lines: number;
  units: number;
}

/**
 * What an import read past without refusing the report, once per distinct message: the line it was
 * first seen on (null: the file as a whole) and on how many lines.
 */
export interface ImportWarning {
  line: number | null;
  message: string;
  lines: number;
}

export interface ImportReport {
  id: string;
  object: "royalty_import";
  tenant_id: string;
  format: string;
  file_name: string | null;
  file_sha256: string;
  content_sha256: string | null;
  reporting_period: string | null;
  store: string | null;
  /** completed, rejected, or voided (its lines no longer count: void_reason says why). */
  status: "completed" | "rejected" | "voided";
  lines_total: number;
  lines_matched: number;
  lines_unmatched: number;
  lines_malformed: number;
  errors: { line: number; message: string }[];
  /** What was read past without refusing the report (the first 100 distinct messages). */
  warnings: ImportWarning[];
  totals: CurrencyTotal[];
  /**
   * Unmatched identifiers, ambiguous ones first, then most lines first (at most 100). reason:
   * "no_match" (no delivered release of the tenant carries them) or "ambiguous" (they lead to
   * delivered releases of more than one account: nobody is credited until the catalog is fixed).
   */
  unmatched: UnmatchedEntry[];
  period_from: string | null;
  period_to: string | null;
  account_ids: string[];
  source: string;
  started_at: string;
  completed_at: string | null;
  voided_at: string | null;
  void_reason: string | null;
  /** How the void was made: cli or admin_api. */
  voided_via: string | null;
}

export type ImportResult =
  | { status: "completed"; report: ImportReport; seconds: number }
  | { status: "duplicate"; reason: "same_file" | "same_lines"; existing: ImportReport }
  | { status: "rejected"; report: ImportReport };

/** The request cannot be carried out as asked (unknown format, bad period, unknown store, no file). */
export class ImportError extends Error {}

const MAX_ERRORS = 100;
const MAX_WARNINGS = 100;

/** The warnings of one import, once per message (the first MAX_WARNINGS; the rest counted in a last entry). */
class Warnings {
  private readonly byMessage = new Map<string, ImportWarning>();
  private leftOff = 0;

  add(line: number | null, message: string): void {
    const w = this.byMessage.get(message);
    if (w) {
      w.lines++;
      if (w.line === null) w.line = line;
    } else if (this.byMessage.size < MAX_WARNINGS) {
      this.byMessage.set(message, { line, message, lines: 1 });
    } else this.leftOff++;
  }

  list(): ImportWarning[] {
    const out = [...this.byMessage.values()];
    if (this.leftOff > 0) {
      out.push({ line: null, message: `${this.leftOff} more warnings, not listed`, lines: this.leftOff });
    }
    return out;
  }
}

/**
 * The store a report is from, for a format whose lines do not name it: --store, else the store
 * whose `ddex.recipient.dpid` (its DDEX party id, docs/ddex.md) is the sender's party id in the
 * file (a DSR's HEAD SenderPartyId). ImportError when neither says.
 */
async function storeOfReport(
  db: Db,
  format: NonNullable<ReturnType<typeof formatNamed>>,
  options: ImportOptions,
  warnings: Warnings,
): Promise<string | undefined> {
  if (format.storeInFile) return undefined;
  const sender = format.senderPartyId ? await format.senderPartyId(options.file) : undefined;
  if (!sender) {
    const store = options.store ?? format.defaultStore;
    if (store) return store;
    throw new ImportError(
      format.senderPartyId
        ? `the file names no sender (no SenderPartyId in a HEAD record at its start), so the store cannot be found by its DDEX party id: say --store (admin API: store=)`
        : `the ${format.name} format does not name the store in Backline's codes: say --store`,
    );
  }
  const found = await db.asService(
    async (tx) =>
      (
        await tx.query<{ code: string; dpid: string | null }>(
          `select code, settings -> 'ddex' -> 'recipient' ->> 'dpid' as dpid from internal.stores
           where upper(btrim(settings -> 'ddex' -> 'recipient' ->> 'dpid')) = upper($1)
              or code = $2
           order by code`,
          [sender, options.store ?? null],
        )
      ).rows,
    { readOnly: true },
  );
  const isSender = (dpid: string | null) => dpid?.trim().toUpperCase() === sender.toUpperCase();
  const senders = found.filter((s) => isSender(s.dpid)).map((s) => s.code);
  if (options.store) {
    // --store wins; a file from another store's party id is said on the import.
    const named = found.find((s) => s.code === options.store);
    if (named && !isSender(named.dpid) && (senders.length > 0 || named.dpid)) {
      warnings.add(
        null,
        `the file's sender (SenderPartyId ${sender}) is ${
          senders.length > 0
            ? `the DDEX party id of store ${senders.join(", ")}`
            : "not this store's DDEX party id"
        }${named.dpid ? ` (${options.store}: ${named.dpid})` : ""}: imported as ${options.store}, as --store says`,
      );
    }
    return options.store;
  }
  if (senders.length === 1) return senders[0];
  if (senders.length === 0) {
    throw new ImportError(
      `no store has the DDEX party id ${sender}, the sender in the file's HEAD record (SenderPartyId): set it as the store's ddex.recipient.dpid, or say --store (admin API: store=)`,
    );
  }
  throw new ImportError(
    `stores ${senders.join(", ")} all have the DDEX party id ${sender}, the sender in the file's HEAD record: say --store (admin API: store=)`,
  );
}

export const IMPORT_COLUMNS = `id, tenant_id, format, file_name, file_sha256, content_sha256,
  to_char(reporting_period, 'YYYY-MM') as reporting_period, store, status, lines_total,
  lines_matched, lines_unmatched, lines_malformed, errors, totals, unmatched,
  period_from::text as period_from, period_to::text as period_to, account_ids, source, started_at, completed_at,
  voided_at, void_reason, voided_via, warnings`;

type ImportRow = Omit<
  ImportReport,
  | "object"
  | "lines_total"
  | "lines_matched"
  | "lines_unmatched"
  | "lines_malformed"
  | "started_at"
  | "completed_at"
  | "voided_at"
> & {
  lines_total: string;
  lines_matched: string;
  lines_unmatched: string;
  lines_malformed: string;
  started_at: Date | string;
  completed_at: Date | string | null;
  voided_at: Date | string | null;
};

export function importOut(row: ImportRow): ImportReport {
  const iso = timestamp;
  return {
    ...row,
    object: "royalty_import",
    // Counts are integers; reports stored before 1.1.0 kept units as text in their jsonb.
    totals: row.totals.map((t) => ({ ...t, lines: count(t.lines), units: count(t.units) })),
    unmatched: row.unmatched.map((u) => ({ ...u, lines: count(u.lines), units: count(u.units) })),
    lines_total: Number(row.lines_total),
    lines_matched: Number(row.lines_matched),
    lines_unmatched: Number(row.lines_unmatched),
    lines_malformed: Number(row.lines_malformed),
    started_at: iso(row.started_at) ?? "",
    completed_at: iso(row.completed_at),
    voided_at: iso(row.voided_at),
  };
}

export async function findImport(tx: Tx, id: string, tenantId?: string): Promise<ImportReport | undefined> {
  const r = await tx.query<ImportRow>(
    `select ${IMPORT_COLUMNS} from internal.royalty_imports where id = $1 and ($2::uuid is null or tenant_id = $2)`,
    [id, tenantId ?? null],
  );
  return r.rows[0] ? importOut(r.rows[0]) : undefined;
}

export async function listImports(
  db: Db,
  options: { tenantId?: string | undefined; limit?: number },
): Promise<ImportReport[]> {
  return db.asService(
    async (tx) =>
      (
        await tx.query<ImportRow>(
          `select ${IMPORT_COLUMNS} from internal.royalty_imports where ($1::uuid is null or tenant_id = $1)
           order by started_at desc, id limit $2`,
          [options.tenantId ?? null, options.limit ?? 50],
        )
      ).rows.map(importOut),
    { readOnly: true },
  );
}

interface TrackRef {
  trackId: string;
  releaseId: string;
  accountId: string;
  upc: string | null;
}

interface ReleaseRef {
  releaseId: string;
  accountId: string;
}

interface Sums {
  lines: number;
  units: bigint;
  gross: bigint;
  fees: bigint;
  net: bigint;
}

/** UPC-A, EAN-13 and GTIN-14 of one product compare equal. */
const gtinKey = (code: string) => code.padStart(14, "0");

class Rejected extends Error {
  readonly errors: { line: number; message: string }[];
  readonly malformed: number;
  readonly lines: number;

  constructor(errors: { line: number; message: string }[], malformed: number, lines: number) {
    super(`${malformed} malformed line${malformed === 1 ? "" : "s"}`);
    this.errors = errors;
    this.malformed = malformed;
    this.lines = lines;
  }
}

class Duplicate extends Error {}

async function sha256File(file: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(file, { highWaterMark: 1 << 20 })) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

async function existingImport(
  db: Db,
  tenantId: string,
  column: "file_sha256" | "content_sha256",
  hash: string,
) {
  return db.asService(
    async (tx) => {
      const r = await tx.query<ImportRow>(
        `select ${IMPORT_COLUMNS} from internal.royalty_imports
         where tenant_id = $1 and ${column} = $2 and status = 'completed'`,
        [tenantId, hash],
      );
      return r.rows[0] ? importOut(r.rows[0]) : undefined;
    },
    { readOnly: true },
  );
}

export async function importRoyalties(db: Db, options: ImportOptions): Promise<ImportResult> {
  const format = formatNamed(options.format);
  if (!format) throw new ImportError(`unknown format ${options.format}: one of ${FORMAT_NAMES.join(", ")}`);
  const periodProblem = options.period === undefined ? undefined : monthProblem(options.period);
  if (periodProblem) throw new ImportError(`--period ${options.period} ${periodProblem}`);
  if (options.store !== undefined && format.storeInFile) {
    throw new ImportError(`the ${format.name} format names the store on each line: leave out --store`);
  }
  let size: number;
  try {
    const s = await stat(options.file);
    if (!s.isFile()) throw new Error("not a file");
    size = s.size;
  } catch {
    throw new ImportError(`cannot read ${options.file}`);
  }
  const warnings = new Warnings();
  const store = await storeOfReport(db, format, options, warnings);

  const tenantOk = await db.asService(
    async (tx) => {
      const t = await tx.query("select 1 from internal.tenants where id = $1", [options.tenantId]);
      const s = store
        ? await tx.query("select 1 from internal.stores where code = $1", [store])
        : { rowCount: 1 };
      return { tenant: t.rowCount > 0, store: s.rowCount > 0 };
    },
    { readOnly: true },
  );
  if (!tenantOk.tenant) throw new ImportError(`no tenant ${options.tenantId}`);
  if (!tenantOk.store) throw new ImportError(`unknown store ${store}`);

  let mark = performance.now();
  const phase = (name: string) => {
    const now = performance.now();
    options.onPhase?.(name, now - mark);
    mark = now;
  };
  const fileSha = await sha256File(options.file);
  phase("hash");
  const already = await existingImport(db, options.tenantId, "file_sha256", fileSha);
  if (already) return { status: "duplicate", reason: "same_file", existing: already };

  const started = Date.now();
  const fileName =
    options.fileName === undefined ? (options.file.split(/[\\/]/).pop() ?? null) : options.fileName;
  const base = {
    tenantId: options.tenantId,
    format: format.name,
    fileName,
    fileSha,
    period: options.period ? `${options.period}-01` : null,
    store: store ?? null,
    source: options.source ?? "cli",
  };
  let importId = "";
  try {
    const report = await db.asService(async (tx) => {
      const inserted = await tx
        .query<{ id: string }>(
          `insert into internal.royalty_imports (id, tenant_id, format, file_name, file_sha256, reporting_period, store, status, source)
           values (coalesce($8::uuid, gen_random_uuid()), $1, $2, $3, $4, $5, $6, 'completed', $7) returning id`,
          [
            base.tenantId,
            base.format,
            base.fileName,
            base.fileSha,
            base.period,
            base.store,
            base.source,
            options.importId ?? null,
          ],
        )
        .catch((error: unknown) => {
          // The same file, imported at this moment by someone else.
          if (asDbError(error)?.sqlstate === "23505") throw new Duplicate("same_file");
          throw error;
        });
      importId = inserted.rows[0]?.id ?? "";
      return load(tx, importId, format, store, options, size, phase, warnings, bulkWorkMem(db.kind));
    });
    return { status: "completed", report, seconds: (Date.now() - started) / 1000 };
  } catch (error) {
    if (error instanceof DuplicateContent) {
      const existing = await existingImport(db, options.tenantId, "content_sha256", error.hash);
      if (existing) return { status: "duplicate", reason: "same_lines", existing };
    } else if (error instanceof Duplicate) {
      const existing = await existingImport(db, options.tenantId, "file_sha256", fileSha);
      if (existing) return { status: "duplicate", reason: "same_file", existing };
    }
    if (error instanceof Rejected || error instanceof FormatError) {
      const errors =
        error instanceof Rejected ? error.errors : [{ line: error.line, message: error.message }];
      const report = await db.asService(async (tx) => {
        const r = await tx.query<ImportRow>(
          `insert into internal.royalty_imports (id, tenant_id, format, file_name, file_sha256, reporting_period, store, status,
             source, lines_total, lines_malformed, errors, completed_at, warnings)
           values (coalesce($11::uuid, gen_random_uuid()), $1, $2, $3, $4, $5, $6, 'rejected', $7, $8, $9, $10, now(), $12)
           returning ${IMPORT_COLUMNS}`,
          [
            base.tenantId,
            base.format,
            base.fileName,
            base.fileSha,
            base.period,
            base.store,
            base.source,
            error instanceof Rejected ? error.lines : 0,
            error instanceof Rejected ? error.malformed : 1,
            JSON.stringify(errors),
            options.importId ?? null,
            JSON.stringify(warnings.list()),
          ],
        );
        return importOut(r.rows[0] as ImportRow);
      });
      return { status: "rejected", report };
    }
    throw error;
  }
}

class DuplicateContent extends Duplicate {
  readonly hash: string;

  constructor(hash: string) {
    super("same_lines");
    this.hash = hash;
  }
}

/**
 * The statuses whose releases went to the stores, and so are the only ones a store can report on.
 * A draft (or anything before delivery) is never matched: an account could otherwise copy another
 * account's ISRC or UPC into a release it never delivers and receive that account's royalties.
 */
export const MATCHABLE_STATUSES = ["delivered", "live", "takedown_requested", "taken_down"] as const;

/** The tenant's matchable catalog; by `store`'s own ids too when given (formats whose lines carry them). */
async function loadCatalog(tx: Tx, tenantId: string, store: string | undefined) {
  const isrcs = new Map<string, TrackRef[]>();
  const upcs = new Map<string, ReleaseRef[]>();
  // Oldest release first (then by id): within one account, the first candidate wins (see match).
  const tracks = await tx.query<{
    id: string;
    release_id: string;
    account_id: string;
    isrc: string;
    upc: string | null;
  }>(
    `select t.id, t.release_id, t.account_id, t.isrc, r.upc
     from public.tracks t join public.releases r on r.id = t.release_id join internal.accounts a on a.id = r.account_id
     where a.tenant_id = $1 and t.isrc is not null and r.status = any ($2::text[])
     order by r.created_at, r.id, t.created_at, t.id`,
    [tenantId, [...MATCHABLE_STATUSES]],
  );
  for (const t of tracks.rows) {
    const ref: TrackRef = {
      trackId: t.id,
      releaseId: t.release_id,
      accountId: t.account_id,
      upc: t.upc ? gtinKey(t.upc) : null,
    };
    const list = isrcs.get(t.isrc);
    if (list) list.push(ref);
    else isrcs.set(t.isrc, [ref]);
  }
  const releases = await tx.query<{ id: string; account_id: string; upc: string }>(
    `select r.id, r.account_id, r.upc from public.releases r join internal.accounts a on a.id = r.account_id
     where a.tenant_id = $1 and r.upc is not null and r.status = any ($2::text[])
     order by r.created_at, r.id`,
    [tenantId, [...MATCHABLE_STATUSES]],
  );
  for (const r of releases.rows) {
    const ref: ReleaseRef = { releaseId: r.id, accountId: r.account_id };
    const key = gtinKey(r.upc);
    const list = upcs.get(key);
    if (list) list.push(ref);
    else upcs.set(key, [ref]);
  }
  const storeIds = store ? await loadStoreIds(tx, tenantId, store) : undefined;
  const stores = await tx.query<{ code: string }>("select code from internal.stores");
  const territories = await tx.query<{ code: string }>("select code from internal.territories");
  const codes: Codes = {
    stores: new Set(stores.rows.map((r) => r.code)),
    territories: new Set(territories.rows.map((r) => r.code)),
  };
  return { isrcs, upcs, codes, storeIds };
}

/** The catalog by the store's own ids (for formats that carry them, such as a DSR's DspResourceId). */
interface StoreIds {
  tracks: Map<string, TrackRef[]>;
  releases: Map<string, ReleaseRef[]>;
}

/**
 * The tenant's delivered releases and tracks by the ids one store knows them by: the release's
 * `store_reference` of its deliveries to the store (what the store answered), and a transferred
 * release's `store_ids` and `track_store_ids` under the store's code or its DDEX party id.
 */
async function loadStoreIds(tx: Tx, tenantId: string, store: string): Promise<StoreIds> {
  const params = [tenantId, [...MATCHABLE_STATUSES], store];
  const dpid = `(select settings -> 'ddex' -> 'recipient' ->> 'dpid' from internal.stores where code = $3)`;
  const releases = await tx.query<{ ref: string; id: string; account_id: string }>(
    `select x.ref, r.id, r.account_id from (
       select d.release_id, d.store_reference as ref from internal.release_deliveries d
       where d.store = $3 and d.store_reference is not null
       union
       select tr.release_id, coalesce(tr.store_ids ->> $3, tr.store_ids ->> ${dpid}) from internal.transferred_releases tr
     ) x
     join public.releases r on r.id = x.release_id join internal.accounts a on a.id = r.account_id
     where x.ref is not null and a.tenant_id = $1 and r.status = any ($2::text[])
     order by r.created_at, r.id`,
    params,
  );
  const tracks = await tx.query<{
    ref: string;
    id: string;
    release_id: string;
    account_id: string;
    upc: string | null;
  }>(
    `select coalesce(ids.value ->> $3, ids.value ->> ${dpid}) as ref, t.id, t.release_id, t.account_id, r.upc
     from internal.transferred_releases tr
     cross join lateral jsonb_each(tr.track_store_ids) as ids(isrc, value)
     join public.tracks t on t.release_id = tr.release_id and t.isrc = ids.isrc
     join public.releases r on r.id = t.release_id join internal.accounts a on a.id = r.account_id
     where a.tenant_id = $1 and r.status = any ($2::text[]) and jsonb_typeof(ids.value) = 'object'
       and coalesce(ids.value ->> $3, ids.value ->> ${dpid}) is not null
     order by r.created_at, r.id, t.created_at, t.id`,
    params,
  );
  const out: StoreIds = { tracks: new Map(), releases: new Map() };
  const push = <T>(m: Map<string, T[]>, key: string, v: T) => {
    const list = m.get(key);
    if (list) list.push(v);
    else m.set(key, [v]);
  };
  for (const r of releases.rows) push(out.releases, r.ref, { releaseId: r.id, accountId: r.account_id });
  for (const t of tracks.rows) {
    push(out.tracks, t.ref, {
      trackId: t.id,
      releaseId: t.release_id,
      accountId: t.account_id,
      upc: t.upc ? gtinKey(t.upc) : null,
    });
  }
  return out;
}

type MatchResult = { accountId: string; releaseId: string; trackId: string | null } | "ambiguous" | undefined;

function oneAccount(refs: readonly { accountId: string }[]): boolean {
  const first = refs[0]?.accountId;
  for (let i = 1; i < refs.length; i++) if (refs[i]?.accountId !== first) return false;
  return true;
}

/**
 * The track or release a line is about, among delivered releases (MATCHABLE_STATUSES) only
 * (docs/royalties.md, "Matching"): ISRC first, then UPC, then the store's own ids of the resource
 * and of the release.
 *
 * - Several releases carry the ISRC: the ones whose UPC is on the line, else the ones of the
 *   account(s) owning the line's UPC, else all of them.
 * - If those candidates still belong to more than one account, the line is "ambiguous": it stays
 *   unmatched (nobody gets it) and the report says so.
 * - Within one account, the oldest release (created_at, then id) wins.
 */
function match(
  line: NormalLine,
  isrcs: Map<string, TrackRef[]>,
  upcs: Map<string, ReleaseRef[]>,
  storeIds?: StoreIds,
): MatchResult {
  const found = matchByCodes(line, isrcs, upcs);
  if (found !== undefined || !storeIds) return found;
  const tracks = line.storeResourceId ? storeIds.tracks.get(line.storeResourceId) : undefined;
  if (tracks) {
    if (!oneAccount(tracks)) return "ambiguous";
    const t = tracks[0];
    if (t) return { accountId: t.accountId, releaseId: t.releaseId, trackId: t.trackId };
  }
  const releases = line.storeReleaseId ? storeIds.releases.get(line.storeReleaseId) : undefined;
  if (releases) {
    if (!oneAccount(releases)) return "ambiguous";
    const r = releases[0];
    if (r) return { accountId: r.accountId, releaseId: r.releaseId, trackId: null };
  }
  return undefined;
}

function matchByCodes(
  line: NormalLine,
  isrcs: Map<string, TrackRef[]>,
  upcs: Map<string, ReleaseRef[]>,
): MatchResult {
  const upc = line.upc ? gtinKey(line.upc) : null;
  const releases = upc ? upcs.get(upc) : undefined;
  if (line.isrc) {
    let candidates = isrcs.get(line.isrc);
    if (candidates) {
      if (candidates.length > 1 && upc) {
        const onRelease = candidates.filter((c) => c.upc === upc);
        if (onRelease.length > 0) candidates = onRelease;
        else if (releases) {
          const owners = candidates.filter((c) => releases.some((r) => r.accountId === c.accountId));
          if (owners.length > 0) candidates = owners;
        }
      }
      if (!oneAccount(candidates)) return "ambiguous";
      const t = candidates[0];
      if (t) return { accountId: t.accountId, releaseId: t.releaseId, trackId: t.trackId };
    }
  }
  if (releases) {
    if (!oneAccount(releases)) return "ambiguous";
    const r = releases[0];
    if (r) return { accountId: r.accountId, releaseId: r.releaseId, trackId: null };
  }
  return undefined;
}

const COPY_COLUMNS = `import_id, tenant_id, account_id, release_id, track_id, line_number, reporting_period,
  period_start, period_end, store, territory, upc, isrc, usage_type, units, gross, fees, net, currency`;

interface Matched {
  line: NormalLine;
  accountId: string | null;
  releaseId: string | null;
  trackId: string | null;
}

async function load(
  tx: Tx,
  importId: string,
  format: NonNullable<ReturnType<typeof formatNamed>>,
  store: string | undefined,
  options: ImportOptions,
  totalBytes: number,
  phase: (name: string) => void,
  warnings: Warnings,
  workMem: string,
): Promise<ImportReport> {
  const { isrcs, upcs, codes, storeIds } = await loadCatalog(
    tx,
    options.tenantId,
    format.storeIds ? store : undefined,
  );
  const parser = format.create({
    period: options.period,
    store,
    warn: (line, message) => warnings.add(line, message),
  });
  const contentHash = createHash("sha256");
  const errors: { line: number; message: string }[] = [];
  let malformed = 0;
  let linesTotal = 0;
  let matchedCount = 0;
  let bytes = 0;
  let periodFrom: string | null = null;
  let periodTo: string | null = null;
  const perAccount = new Map<string, Map<string, Sums>>();
  // Only the ambiguous codes are tallied here (they are few: a catalog conflict per code); the
  // lines that matched nothing are counted in the database once loaded (see unmatchedReport).
  const ambiguous = new Map<
    string,
    { isrc: string | null; upc: string | null; lines: number; units: bigint }
  >();
  const progressEvery = options.progressEveryMs ?? 250;
  let lastProgress = 0;
  const progress = (force: boolean) => {
    if (!options.onProgress) return;
    const now = Date.now();
    if (!force && now - lastProgress < progressEvery) return;
    lastProgress = now;
    options.onProgress({ bytes, totalBytes, lines: linesTotal + malformed });
  };

  async function* fileChunks(): AsyncGenerator<Buffer> {
    for await (const chunk of createReadStream(options.file, { highWaterMark: 256 * 1024 })) {
      bytes += (chunk as Buffer).length;
      yield chunk as Buffer;
    }
  }

  /** Batches of matched lines; malformed lines are collected, and reading goes on to list them all. */
  async function* batches(): AsyncGenerator<Matched[]> {
    for await (const records of readRecords(fileChunks(), format.delimiter, format.quoting ?? true)) {
      const out: Matched[] = [];
      let hashText = "";
      for (const record of records) {
        let line: NormalLine;
        try {
          if (record.error) throw new LineError(record.error);
          const raw = parser.record(record.fields, record.line);
          if (!raw) continue;
          line = normalise(raw, record.line, codes, (message) => warnings.add(record.line, message));
        } catch (error) {
          if (!(error instanceof LineError)) throw error;
          malformed++;
          if (errors.length < MAX_ERRORS) errors.push({ line: record.line, message: error.message });
          continue;
        }
        linesTotal++;
        if (malformed > 0) continue;
        const found = match(line, isrcs, upcs, storeIds);
        const m = found === "ambiguous" ? undefined : found;
        hashText += `${line.reportingPeriod}\t${line.periodStart}\t${line.store}\t${line.territory ?? ""}\t${line.upc ?? ""}\t${
          line.isrc ?? ""
        }\t${line.usageType}\t${line.units}\t${line.grossScaled}\t${line.feesScaled}\t${line.netScaled}\t${line.currency}\n`;
        if (periodFrom === null || line.periodStart < periodFrom) periodFrom = line.periodStart;
        if (periodTo === null || line.periodEnd > periodTo) periodTo = line.periodEnd;
        const accountKey = m ? m.accountId : "";
        let currencies = perAccount.get(accountKey);
        if (!currencies) {
          currencies = new Map();
          perAccount.set(accountKey, currencies);
        }
        let sums = currencies.get(line.currency);
        if (!sums) {
          sums = { lines: 0, units: 0n, gross: 0n, fees: 0n, net: 0n };
          currencies.set(line.currency, sums);
        }
        sums.lines++;
        sums.units += BigInt(line.units);
        sums.gross += line.grossScaled;
        sums.fees += line.feesScaled;
        sums.net += line.netScaled;
        if (m) matchedCount++;
        else if (found === "ambiguous") {
          const key = `${line.isrc ?? ""}|${line.upc ?? ""}`;
          const u = ambiguous.get(key);
          if (u) {
            u.lines++;
            u.units += BigInt(line.units);
          } else ambiguous.set(key, { isrc: line.isrc, upc: line.upc, lines: 1, units: BigInt(line.units) });
        }
        out.push({
          line,
          accountId: m?.accountId ?? null,
          releaseId: m?.releaseId ?? null,
          trackId: m?.trackId ?? null,
        });
      }
      if (hashText) contentHash.update(hashText);
      progress(false);
      if (out.length > 0) yield out;
    }
    parser.finish();
    progress(true);
    if (malformed > 0) throw new Rejected(errors, malformed, linesTotal + malformed);
  }

  const tenantId = options.tenantId;
  const text = async function* (): AsyncGenerator<Buffer> {
    for await (const batch of batches()) {
      let s = "";
      for (const b of batch) {
        const l = b.line;
        s += `${importId}\t${tenantId}\t${b.accountId ?? "\\N"}\t${b.releaseId ?? "\\N"}\t${b.trackId ?? "\\N"}\t${l.line}\t${
          l.reportingPeriod
        }\t${l.periodStart}\t${l.periodEnd}\t${l.store}\t${l.territory ?? "\\N"}\t${l.upc ?? "\\N"}\t${l.isrc ?? "\\N"}\t${
          l.usageType
        }\t${l.units}\t${l.gross}\t${l.fees}\t${l.net}\t${l.currency}\n`;
      }
      // As bytes at once: a batch's text is a rope of thousands of pieces, which would otherwise
      // wait on the socket long enough to be promoted to V8's old space (measured: −30%).
      yield Buffer.from(s);
    }
  };
  await tx.copyFrom(`copy internal.royalty_lines (${COPY_COLUMNS}) from stdin`, text());

  phase("load");
  // (Assigned inside the generator: TypeScript's narrowing cannot see it.)
  const from = periodFrom as string | null;
  const to = periodTo as string | null;
  const content = contentHash.digest("hex");
  const accountIds = [...perAccount.keys()].filter((k) => k !== "");
  const totals = currencyTotals([...perAccount.values()]);
  const unmatchedList = await unmatchedReport(tx, importId, ambiguous);

  const updated = await tx
    .query<ImportRow>(
      `update internal.royalty_imports set content_sha256 = $2, lines_total = $3, lines_matched = $4,
         lines_unmatched = $5, totals = $6, unmatched = $7, period_from = $8, period_to = $9, account_ids = $10,
         warnings = $11, completed_at = now()
       where id = $1 returning ${IMPORT_COLUMNS}`,
      [
        importId,
        content,
        linesTotal,
        matchedCount,
        linesTotal - matchedCount,
        JSON.stringify(totals),
        JSON.stringify(unmatchedList),
        periodFrom,
        periodTo,
        accountIds,
        JSON.stringify(warnings.list()),
      ],
    )
    .catch((error: unknown) => {
      if (asDbError(error)?.sqlstate === "23505") throw new DuplicateContent(content);
      throw error;
    });
  const report = importOut(updated.rows[0] as ImportRow);

  await updateRollups(tx, importId, workMem).catch((error: unknown) => {
    // Each line is under 10^12, but many of them summed into one analytics or totals row can
    // overflow its numeric column: refuse the import (rolled back whole) rather than fail with a trace.
    if (asDbError(error)?.sqlstate === "22003") {
      throw new ImportError(
        "the report's amounts or units, summed per release, month, store and currency, are too large for the analytics totals: nothing was imported",
      );
    }
    throw error;
  });
  phase("rollups");

  // The money reaches the payees (docs/payouts.md, "Allocation"), in the import's transaction.
  await tx.query("select internal.allocate_import($1)", [importId]);
  phase("allocation");

  for (const accountId of accountIds) {
    const currencies = perAccount.get(accountId);
    if (!currencies) continue;
    const accountTotals = currencyTotals([currencies]);
    const lines = accountTotals.reduce((n, t) => n + t.lines, 0);
    const object = {
      id: importId,
      object: "royalty_import",
      format: format.name,
      store: store ?? null,
      reporting_period: options.period ?? null,
      period_from: periodFrom,
      period_to: periodTo,
      lines,
      totals: accountTotals,
      imported_at: report.completed_at,
    };
    await tx.query(
      `insert into internal.events (tenant_id, account_id, type, data)
       values ($1, $2, 'royalties.imported', jsonb_build_object('object', $3::jsonb))`,
      [options.tenantId, accountId, JSON.stringify(object)],
    );
    const summary = accountTotals.map((t) => `${t.net} ${t.currency}`).join(", ");
    await tx.query("select internal.notify_members($1, 'royalties.imported', $2, $3, $4::jsonb)", [
      accountId,
      "New royalties imported",
      `${lines} royalty line${lines === 1 ? "" : "s"} for ${from?.slice(0, 7)}${
        to && to.slice(0, 7) !== from?.slice(0, 7) ? ` to ${to.slice(0, 7)}` : ""
      }: ${summary} net.`,
      JSON.stringify({ import_id: importId, period_from: periodFrom, period_to: periodTo }),
    ]);
  }
  phase("events");
  return report;
}

const UNMATCHED_LISTED = 100;

/**
 * The import report's `unmatched`: the ambiguous codes first, then the codes that matched nothing,
 * most lines first (then by ISRC and UPC), at most 100 in all. The latter are counted by the
 * database over the lines just loaded (the partial index royalty_lines_unmatched), exactly and in
 * constant memory however many distinct codes a report has.
 */
async function unmatchedReport(
  tx: Tx,
  importId: string,
  ambiguous: Map<string, { isrc: string | null; upc: string | null; lines: number; units: bigint }>,
): Promise<UnmatchedEntry[]> {
  const byLines = (a: { isrc: string | null; upc: string | null; lines: number }, b: typeof a) =>
    b.lines - a.lines || byText(a.isrc, b.isrc) || byText(a.upc, b.upc);
  const listed: UnmatchedEntry[] = [...ambiguous.values()]
    .sort(byLines)
    .slice(0, UNMATCHED_LISTED)
    .map((u) => ({
      isrc: u.isrc,
      upc: u.upc,
      reason: "ambiguous",
      lines: u.lines,
      units: unitsCount(u.units),
    }));
  const room = UNMATCHED_LISTED - listed.length;
  if (room === 0) return listed;
  const r = await tx.query<{ isrc: string | null; upc: string | null; lines: number; units: string }>(
    `select isrc, upc, count(*)::int as lines, sum(units)::text as units
     from internal.royalty_lines where import_id = $1 and account_id is null
     group by isrc, upc
     order by count(*) desc, isrc collate "C" nulls last, upc collate "C" nulls last
     limit $2`,
    [importId, room + ambiguous.size],
  );
  for (const u of r.rows) {
    if (listed.length === UNMATCHED_LISTED) break;
    if (ambiguous.has(`${u.isrc ?? ""}|${u.upc ?? ""}`)) continue;
    listed.push({
      isrc: u.isrc,
      upc: u.upc,
      reason: "no_match",
      lines: u.lines,
      units: unitsCount(BigInt(u.units)),
    });
  }
  return listed;
}

/** Plain text order, nulls last. */
function byText(a: string | null, b: string | null): number {
  if (a === b) return 0;
  if (a === null) return 1;
  if (b === null) return -1;
  return a < b ? -1 : 1;
}

function currencyTotals(maps: Map<string, Sums>[]): CurrencyTotal[] {
  const all = new Map<string, Sums>();
  for (const m of maps) {
    for (const [currency, s] of m) {
      const t = all.get(currency);
      if (!t) all.set(currency, { ...s });
      else {
        t.lines += s.lines;
        t.units += s.units;
        t.gross += s.gross;
        t.fees += s.fees;
        t.net += s.net;
      }
    }
  }
  return [...all.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([currency, s]) => ({
      currency,
      lines: s.lines,
      units: unitsCount(s.units),
      gross: formatAmount(s.gross),
      fees: formatAmount(s.fees),
      net: formatAmount(s.net),
    }));
}

/**
 * A sum of units as a count (a JSON integer, exact up to 2^53 − 1). A report whose units add up past
 * that in one currency (or one unmatched code) is refused whole, as one too large for the analytics is.
 */
function unitsCount(units: bigint): number {
  if (units > BigInt(Number.MAX_SAFE_INTEGER) || units < -BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new ImportError(
      `the report's units add up to ${units}, past the largest exact count (${Number.MAX_SAFE_INTEGER}): nothing was imported`,
    );
  }
  return Number(units);
}
