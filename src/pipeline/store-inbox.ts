import { createHash } from "node:crypto";
import { mkdir, readdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Db } from "../db/db.ts";
import { enqueue } from "../jobs/queue.ts";
import { ImportError, importRoyalties } from "../royalties/import.ts";
import { ddexSettingsOf, type InboxSettings } from "./ddex/adapter.ts";
import {
  ChoreographySchemaMissing,
  choreographyErrors,
  isChoreographyAck,
  readChoreographyAck,
  releaseOutcome,
} from "./ddex/choreography.ts";
import type { Destination } from "./ddex/drop.ts";
import { openSftp, type SftpSession } from "./ddex/sftp.ts";
import { reportDelivery } from "./delivery.ts";
import { OperatorError } from "./errors.ts";
import { storeSettingsOf } from "./stores.ts";

/**
 * What a store says back, fetched on a schedule (docs/ddex.md, "Acknowledgements and reports"):
 * its acknowledgement files, applied to the deliveries as a manual store report is
 * (reportDelivery), and its sales reports, imported (importRoyalties). Each file is recorded by
 * its SHA-256 in internal.store_inbox_files, so a file read twice changes nothing; a file done
 * with is moved into the folder's `processed/`; an unreadable one is kept where it is and
 * reported (once per content) in the poll's result and `stores show`.
 */

/**
 * ok: live, or a takedown confirmed; gone: the store no longer has the release (confirms a
 * takedown, an error for anything else); noted: a step on the way (received, staged): no change.
 */
export type AckStatus = "ok" | "live" | "error" | "taken_down" | "gone" | "noted";
export interface AckEntry {
  /** A delivery id without dashes (a MessageId, or the id in a file name). */
  ref?: string | undefined;
  /** The choreography's BatchId (YYYYMMDDhhmmssnnn), or a UPC/EAN (ICPN): when no delivery id is given. */
  batchId?: string | undefined;
  icpn?: string | undefined;
  releaseId?: string | undefined;
  status: AckStatus;
  message?: string | undefined;
  /** The store's own status words (a choreography ReleaseStatus), kept in the file's record. */
  store_status?: string | undefined;
}

/** An acknowledgement file that cannot be read: kept and reported. */
export class AckFormatError extends Error {}

/** A choreography acknowledgement that is not valid against DDEX's schema: kept, with the errors. */
export class AckInvalidError extends AckFormatError {
  readonly errors: string[];
  /** The schema itself could not be read: the file is read again once it can. */
  readonly schemaMissing: boolean;
  constructor(errors: string[], options: { schemaMissing?: boolean; what?: string } = {}) {
    const what = options.what ?? "not valid against DDEX's ERN choreography 1.8 schema";
    super(`${what}: ${errors.slice(0, 3).join("; ")}`);
    this.errors = errors;
    this.schemaMissing = options.schemaMissing ?? false;
  }
}

/**
 * Reads an acknowledgement file. A DDEX choreography 1.8 `AcknowledgementMessage` is validated
 * against DDEX's schema (in `schemaDir`) before anything in it is believed; every other form is
 * read as parseAcknowledgement says.
 */
export async function readAcknowledgement(
  name: string,
  data: Buffer,
  schemaDir: string | undefined,
  /** The store's DDEX Party ID and ours: a message from another party, or for another, is not read. */
  parties?: { store: string; us: string },
): Promise<{ form: "ern-c-sftp/18" | "legacy"; entries: AckEntry[] }> {
  const xml = data.toString("utf8").replace(/^\uFEFF/, "");
  if (!isChoreographyAck(xml)) return { form: "legacy", entries: parseAcknowledgement(name, data) };
  let errors: string[];
  try {
    if (!schemaDir) throw new ChoreographySchemaMissing("DDEX_ERNC_SCHEMA_DIR is not set");
    errors = await choreographyErrors(xml, schemaDir);
  } catch (error) {
    if (error instanceof ChoreographySchemaMissing)
      throw new AckInvalidError([error.message], { schemaMissing: true });
    throw error;
  }
  if (errors.length > 0) throw new AckInvalidError(errors);
  const ack = readChoreographyAck(xml);
  if (parties && ack.sender !== parties.store) {
    throw new AckInvalidError([`sent by ${ack.sender}, not by the store (${parties.store})`], {
      what: "not from this store",
    });
  }
  if (parties && !ack.recipients.includes(parties.us)) {
    throw new AckInvalidError([`addressed to ${ack.recipients.join(", ")}, not to us (${parties.us})`], {
      what: "not for us",
    });
  }
  const entries: AckEntry[] = [];
  for (const r of ack.releases) {
    // The release as the message named it: its UPC (ICPN), or the release id Backline writes as
    // its ProprietaryId, when the store echoes it.
    const releaseId = r.proprietaryIds.map((p) => UUID.exec(p)).find((u) => u);
    const ids = {
      icpn: r.icpn,
      releaseId: releaseId ? dashed(releaseId.slice(1).join("").toLowerCase()) : undefined,
    };
    const per = r.messages.length > 0 ? r.messages : [undefined];
    for (const m of per) {
      const outcome = releaseOutcome(r, m);
      const uuid = m ? UUID.exec(m.messageId) : null;
      entries.push({
        ref: uuid ? uuid.slice(1).join("").toLowerCase() : undefined,
        batchId: m?.batchId,
        ...ids,
        status: outcome.kind === "ok" ? "ok" : outcome.kind,
        message: outcome.kind === "error" ? outcome.message : undefined,
        store_status: [r.status, ...(m?.statuses.map((s) => s.status) ?? [])].join(" / "),
      });
    }
  }
  if (entries.length === 0) throw new AckFormatError("the acknowledgement has no ReleaseStatus");
  return { form: "ern-c-sftp/18", entries };
}

const UUID = /\b([0-9a-f]{8})-?([0-9a-f]{4})-?([0-9a-f]{4})-?([0-9a-f]{4})-?([0-9a-f]{12})\b/i;
const OK_STATUSES = new Set(["fileok", "fileokwithwarnings", "successfullyingested", "ok", "success"]);

function texts(xml: string, element: string): string[] {
  const re = new RegExp(`<(?:[\\w.-]+:)?${element}(?:\\s[^>]*)?>([^<]*)</(?:[\\w.-]+:)?${element}>`, "g");
  return [...xml.matchAll(re)].map((m) => decode((m[1] ?? "").trim()));
}
const decode = (s: string) =>
  s
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&quot;/g, '"')
    .replace(/&apos;/g, "'")
    .replace(/&amp;/g, "&");

function normaliseStatus(value: string): AckStatus | undefined {
  const v = value.trim().toLowerCase();
  if (v === "live" || v === "error" || v === "taken_down") return v;
  if (OK_STATUSES.has(v)) return "ok";
  return undefined;
}

/**
 * Reads an acknowledgement file other than a choreography 1.8 one: an older DDEX ERN
 * choreography acknowledgement (an XML message whose root names Acknowledgement, e.g. ERN-C
 * 1.4's FtpAcknowledgementMessage, whose schema Backline does not have: read by element name,
 * not validated: the batch or message it answers in
 * AcknowledgedFile/FileName or MessageId outside the MessageHeader, FileStatus FileOK or an
 * error status with ErrorText), or Backline's own JSON or CSV form (docs/ddex.md).
 */
export function parseAcknowledgement(name: string, data: Buffer): AckEntry[] {
  const text = data.toString("utf8").replace(/^\uFEFF/, "");
  const trimmed = text.trim();
  if (trimmed.startsWith("<")) {
    if (!/<(?:[\w.-]+:)?\w*Acknowledgement\w*[\s>]/.test(trimmed)) {
      throw new AckFormatError("an XML file that is not a DDEX acknowledgement message");
    }
    const body = trimmed.replace(
      /<(?:[\w.-]+:)?MessageHeader[\s>][\s\S]*?<\/(?:[\w.-]+:)?MessageHeader>/,
      "",
    );
    const candidates = [...texts(body, "FileName"), ...texts(body, "MessageId"), ...texts(body, "BatchId")];
    const ref = candidates.map((c) => UUID.exec(c)).find((m) => m);
    // A batch is named by its time (YYYYMMDDhhmmssnnn) since choreography 1.8 batches; older
    // ones by the delivery id without dashes.
    const batch = ref
      ? undefined
      : candidates.map((c) => /(?<![0-9])[0-9]{17}(?![0-9])/.exec(c)).find((m) => m);
    if (!ref && !batch) throw new AckFormatError("the acknowledgement names no Backline batch or message id");
    const statusText = texts(body, "FileStatus")[0] ?? texts(body, "MessageStatus")[0] ?? "";
    const status = OK_STATUSES.has(statusText.toLowerCase()) ? "ok" : "error";
    if (!statusText) throw new AckFormatError("the acknowledgement has no FileStatus");
    const errors = texts(body, "ErrorText");
    return [
      {
        ref: ref ? ref.slice(1).join("").toLowerCase() : undefined,
        batchId: batch?.[0],
        status,
        message: status === "error" ? [statusText, ...errors].join(": ") : undefined,
      },
    ];
  }
  if (trimmed.startsWith("{") || trimmed.startsWith("[")) {
    let value: unknown;
    try {
      value = JSON.parse(trimmed);
    } catch {
      throw new AckFormatError("the file is not valid JSON");
    }
    const list = Array.isArray(value)
      ? value
      : Array.isArray((value as { acknowledgements?: unknown }).acknowledgements)
        ? (value as { acknowledgements: unknown[] }).acknowledgements
        : [value];
    return list.map((item, i) => entry(item as Record<string, unknown>, `entry ${i + 1}`));
  }
  if (/\.csv$/i.test(name) || /^delivery_id\s*,/i.test(trimmed)) {
    const lines = trimmed.split(/\r?\n/).filter((l) => l.trim() !== "");
    const header = (lines.shift() ?? "").split(",").map((h) => h.trim().toLowerCase());
    const at = (h: string) => header.indexOf(h);
    if (at("status") < 0 || (at("delivery_id") < 0 && at("batch_id") < 0)) {
      throw new AckFormatError("the CSV header needs delivery_id (or batch_id) and status columns");
    }
    return lines.map((line, i) => {
      // The message is the last column and may hold commas.
      const cells = line.split(",");
      const messageAt = at("message");
      const get = (h: string) => (at(h) < 0 ? "" : (cells[at(h)] ?? "").trim());
      return entry(
        {
          delivery_id: get("delivery_id") || undefined,
          batch_id: get("batch_id") || undefined,
          status: get("status"),
          message: messageAt < 0 ? undefined : cells.slice(messageAt).join(",").trim() || undefined,
        },
        `line ${i + 2}`,
      );
    });
  }
  throw new AckFormatError("not a DDEX acknowledgement, nor Backline's JSON or CSV form");
}

function entry(item: Record<string, unknown>, where: string): AckEntry {
  const ref = String(item.delivery_id ?? item.batch_id ?? "");
  const m = UUID.exec(ref);
  if (!m) throw new AckFormatError(`${where}: delivery_id or batch_id is not a Backline delivery id`);
  const status = normaliseStatus(String(item.status ?? ""));
  if (!status) throw new AckFormatError(`${where}: status is not live, error, taken_down or ok`);
  const message = typeof item.message === "string" && item.message.trim() ? item.message.trim() : undefined;
  if (status === "error" && !message) throw new AckFormatError(`${where}: an error needs a message`);
  return { ref: m.slice(1).join(""), status, message };
}

export interface AppliedEntry {
  delivery_id: string | null;
  /** waiting: the delivery it names is not recorded as sent yet (read again at the next poll). */
  result: "applied" | "unchanged" | "refused" | "noted" | "waiting";
  status?: string;
  message?: string;
  store_status?: string;
}

const dashed = (hex: string) =>
  `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;

type Found = { id: string; action: string; status: string };

/** The delivery an entry names: by delivery id, else batch id, else the release's latest sent one by UPC. */
async function deliveryFor(db: Db, store: string, e: AckEntry): Promise<Found | undefined> {
  return db.asService(
    async (tx) => {
      const one = async (sql: string, value: string) => (await tx.query<Found>(sql, [value, store])).rows[0];
      const cols = "select id::text as id, action, status from internal.release_deliveries";
      if (e.ref) return one(`${cols} where id = $1 and store = $2`, dashed(e.ref));
      if (e.batchId) {
        const found = await one(`${cols} where batch_id = $1 and store = $2`, e.batchId);
        if (found || !e.icpn) return found;
      }
      if (e.icpn) {
        const found = await one(
          `${cols} d where store = $2 and release_id = (select r.id from public.releases r where r.upc = $1
             and exists (select 1 from internal.release_deliveries o where o.release_id = r.id and o.store = $2)
             order by r.created_at desc limit 1)
           order by d.created_at desc, d.id desc limit 1`,
          e.icpn,
        );
        if (found || !e.releaseId) return found;
      }
      if (e.releaseId)
        return one(
          `${cols} d where release_id = $1 and store = $2 order by d.created_at desc, d.id desc limit 1`,
          e.releaseId,
        );
      return undefined;
    },
    { readOnly: true },
  );
}

const NOT_SENT = new Set(["pending", "in_progress"]);

/**
 * Applies one file's entries as store reports; an entry already applied is "unchanged"; one
 * whose delivery is not recorded as sent yet is "waiting" (pollStore reads the file again).
 */
export async function applyAcknowledgement(
  db: Db,
  store: string,
  fileName: string,
  entries: AckEntry[],
): Promise<AppliedEntry[]> {
  const out: AppliedEntry[] = [];
  for (const e of entries) {
    const found = await deliveryFor(db, store, e);
    const words = e.store_status ? { store_status: e.store_status } : {};
    if (!found || NOT_SENT.has(found.status)) {
      const named = e.ref
        ? `delivery ${dashed(e.ref)}`
        : e.batchId
          ? `batch ${e.batchId}`
          : e.icpn
            ? `UPC ${e.icpn}`
            : `release ${e.releaseId}`;
      out.push({
        delivery_id: found?.id ?? (e.ref ? dashed(e.ref) : null),
        result: "waiting",
        message: found ? `${named} is not sent yet` : `no ${named} to store ${store} yet`,
        ...words,
      });
      continue;
    }
    const id = found.id;
    if (e.status === "noted") {
      out.push({ delivery_id: id, result: "noted", status: found.status, ...words });
      continue;
    }
    const takedown = found.action === "takedown";
    const target =
      e.status === "ok"
        ? takedown
          ? "taken_down"
          : "live"
        : e.status === "gone"
          ? takedown
            ? "taken_down"
            : "error"
          : e.status;
    const message = e.status === "gone" ? "ReleaseNotAvailable" : e.message;
    if (found.status === target) {
      out.push({ delivery_id: id, result: "unchanged", status: target, ...words });
      continue;
    }
    try {
      await reportDelivery(
        db,
        id,
        target === "live"
          ? { status: "live" }
          : target === "taken_down"
            ? { status: "taken_down", note: `acknowledgement file ${fileName}` }
            : { status: "error", message: `${store}: ${message ?? "refused"}` },
        { via: "store" },
      );
      out.push({ delivery_id: id, result: "applied", status: target, ...words });
    } catch (error) {
      if (!(error instanceof OperatorError)) throw error;
      out.push({ delivery_id: id, result: "refused", message: error.message, ...words });
    }
  }
  return out;
}

/** The deliveries of this store an unreadable file seems to be about (ids and batch ids in it). */
async function deliveriesNamedIn(db: Db, store: string, name: string, data: Buffer): Promise<string[]> {
  const text = `${name}\n${data.toString("utf8").slice(0, 200_000)}`;
  const ids = [...text.matchAll(new RegExp(UUID.source, "gi"))].map((m) =>
    dashed(m.slice(1).join("").toLowerCase()),
  );
  const batches = [...text.matchAll(/\b[0-9]{17}\b/g)].map((m) => m[0]);
  if (ids.length === 0 && batches.length === 0) return [];
  return db.asService(
    async (tx) =>
      (
        await tx.query<{ id: string }>(
          `select id::text as id from internal.release_deliveries
           where store = $1 and (id::text = any($2::text[]) or batch_id = any($3::text[])) order by id`,
          [store, [...new Set(ids)], [...new Set(batches)]],
        )
      ).rows.map((r) => r.id),
    { readOnly: true },
  );
}

interface FolderEntry {
  name: string;
}

/** A folder of the store's server: listed, read, and files moved into a subfolder. */
interface Folder {
  list(dir: string): Promise<FolderEntry[]>;
  fetch(dir: string, name: string, local: string): Promise<void>;
  moveAside(dir: string, name: string, sub: string): Promise<void>;
  close(): void;
}

async function openFolder(source: Destination, store: string): Promise<Folder> {
  if (source.type === "directory") {
    const full = (dir: string, ...rest: string[]) => path.join(source.path, ...dir.split("/"), ...rest);
    return {
      async list(dir) {
        const names = await readdir(full(dir), { withFileTypes: true }).catch((e: { code?: string }) => {
          if (e.code === "ENOENT") return [];
          throw e;
        });
        return names
          .filter((n) => n.isFile() && !n.name.startsWith("."))
          .map((n) => ({ name: n.name }))
          .sort(byName);
      },
      async fetch(dir, name, local) {
        await writeFile(local, await readFile(full(dir, name)));
      },
      async moveAside(dir, name, sub) {
        await mkdir(full(dir, sub), { recursive: true });
        await rename(full(dir, name), full(dir, sub, name));
      },
      close() {},
    };
  }
  if (source.type === "sftp") {
    const session: SftpSession = await openSftp(source, undefined, `store:${store}`);
    return {
      async list(dir) {
        const entries = await session.list(session.at(dir)).catch((e: { code?: unknown }) => {
          if (e.code === 2) return [];
          throw e;
        });
        return entries
          .filter((e) => !e.isDirectory && !e.name.startsWith("."))
          .map((e) => ({ name: e.name }));
      },
      async fetch(dir, name, local) {
        await session.download(session.at(dir, name), local);
      },
      async moveAside(dir, name, sub) {
        await session.mkdirp(session.at(dir, sub));
        await session.move(session.at(dir, name), session.at(dir, sub, name));
      },
      close() {
        session.close();
      },
    };
  }
  // The AWS SDK is loaded by the first S3 folder polled, not by every process.
  const { CopyObjectCommand, DeleteObjectCommand, GetObjectCommand, ListObjectsV2Command, S3Client } =
    await import("@aws-sdk/client-s3");
  const client = new S3Client({
    region: source.region ?? "us-east-1",
    ...(source.endpoint ? { endpoint: source.endpoint } : {}),
    forcePathStyle: source.force_path_style ?? false,
    ...(source.access_key_id && source.secret_access_key
      ? { credentials: { accessKeyId: source.access_key_id, secretAccessKey: source.secret_access_key } }
      : {}),
    requestChecksumCalculation: "WHEN_REQUIRED",
  });
  const prefix = source.prefix ? `${source.prefix.replace(/\/+$/, "")}/` : "";
  const key = (dir: string, ...rest: string[]) =>
    [`${prefix}${dir.replace(/^\/+|\/+$/g, "")}`, ...rest].join("/");
  return {
    async list(dir) {
      const out: FolderEntry[] = [];
      let token: string | undefined;
      do {
        const r = await client.send(
          new ListObjectsV2Command({
            Bucket: source.bucket,
            Prefix: `${key(dir)}/`,
            Delimiter: "/",
            ContinuationToken: token,
          }),
        );
        for (const o of r.Contents ?? []) {
          const name = (o.Key ?? "").slice(key(dir).length + 1);
          if (name && !name.startsWith(".")) out.push({ name });
        }
        token = r.IsTruncated ? r.NextContinuationToken : undefined;
      } while (token);
      return out.sort(byName);
    },
    async fetch(dir, name, local) {
      const r = await client.send(new GetObjectCommand({ Bucket: source.bucket, Key: key(dir, name) }));
      await writeFile(local, Buffer.from((await r.Body?.transformToByteArray()) ?? []));
    },
    async moveAside(dir, name, sub) {
      await client.send(
        new CopyObjectCommand({
          Bucket: source.bucket,
          CopySource: `${source.bucket}/${encodeURIComponent(key(dir, name)).replace(/%2F/g, "/")}`,
          Key: key(dir, sub, name),
        }),
      );
      await client.send(new DeleteObjectCommand({ Bucket: source.bucket, Key: key(dir, name) }));
    },
    close() {
      client.destroy();
    },
  };
}

const byName = (a: FolderEntry, b: FolderEntry) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

export interface PollResult {
  store: string;
  files: {
    kind: "acknowledgement" | "report";
    name: string;
    outcome: string;
    detail: Record<string, unknown>;
  }[];
}

/** The store's inbox settings (undefined: none, or the store does not use the ddex adapter). */
export async function inboxOf(
  db: Db,
  code: string,
): Promise<
  { inbox: InboxSettings; source: Destination; parties: { store: string; us: string } } | undefined
> {
  const row = await db.asService(
    async (tx) =>
      (
        await tx.query<{ settings: Record<string, unknown>; credentials_sealed: string | null }>(
          "select settings, credentials_sealed from internal.stores where code = $1",
          [code],
        )
      ).rows[0],
    { readOnly: true },
  );
  if (!row) return undefined;
  const settings = storeSettingsOf(db, row);
  if (settings.adapter !== "ddex") return undefined;
  const ddex = ddexSettingsOf({ code, settings });
  if (!ddex.inbox) return undefined;
  return {
    inbox: ddex.inbox,
    source: (ddex.inbox.source ?? ddex.destination) as Destination,
    // Who the store's messages come from (its Party ID) and are for (ours).
    parties: { store: ddex.recipient.dpid, us: ddex.sender.dpid },
  };
}

/**
 * One poll of a store's folders: every new acknowledgement applied, every new report imported.
 * Files already seen (by content) are moved aside without effect; unreadable ones stay.
 */
export async function pollStore(
  db: Db,
  code: string,
  options: { schemaDir?: string | undefined } = {},
): Promise<PollResult> {
  const found = await inboxOf(db, code);
  const result: PollResult = { store: code, files: [] };
  if (!found) return result;
  const { inbox, source } = found;
  const folder = await openFolder(source, code);
  const work = path.join(tmpdir(), `backline-inbox-${process.pid}-${Date.now()}`);
  await mkdir(work, { recursive: true });
  try {
    const seen = async (kind: string, sha: string) =>
      db.asService(
        async (tx) =>
          (
            await tx.query<{ outcome: string; detail: Record<string, unknown>; age_s: number }>(
              `select outcome, detail, extract(epoch from now() - received_at)::float8 as age_s
               from internal.store_inbox_files where store = $1 and kind = $2 and sha256 = $3`,
              [code, kind, sha],
            )
          ).rows[0],
        { readOnly: true },
      );
    const record = async (
      kind: "acknowledgement" | "report",
      name: string,
      sha: string,
      outcome: string,
      detail: Record<string, unknown>,
      deliveryIds: string[] = [],
    ) => {
      // A file read again (waiting for its delivery, or kept until the schema is there) updates
      // its record; any other is recorded once.
      await db.asService((tx) =>
        tx.query(
          `insert into internal.store_inbox_files (store, kind, name, sha256, outcome, detail, delivery_ids)
           values ($1, $2, $3, $4, $5, $6, $7::uuid[])
           on conflict (store, kind, sha256) do update
             set outcome = excluded.outcome, detail = excluded.detail, delivery_ids = excluded.delivery_ids,
                 name = excluded.name, tries = internal.store_inbox_files.tries + 1, last_tried_at = now()
             where internal.store_inbox_files.outcome = 'waiting'
                or (internal.store_inbox_files.outcome = 'invalid' and internal.store_inbox_files.detail ? 'schema_missing')`,
          [code, kind, name, sha, outcome, JSON.stringify(detail), [...new Set(deliveryIds)]],
        ),
      );
      result.files.push({ kind, name, outcome, detail });
    };

    for (const [kind, dir] of [
      ["acknowledgement", inbox.acknowledgements],
      ["report", inbox.reports?.path],
    ] as const) {
      if (!dir) continue;
      for (const { name } of await folder.list(dir)) {
        const local = path.join(
          work,
          `${kind}-${createHash("sha256").update(name).digest("hex").slice(0, 16)}`,
        );
        await folder.fetch(dir, name, local);
        const data = await readFile(local);
        const sha = createHash("sha256").update(data).digest("hex");
        const before = await seen(kind, sha);
        // Read again: an acknowledgement waiting for its delivery, or one kept only because the
        // schema could not be read. Any other file read before is moved aside if it was done
        // with, else (unreadable, invalid, rejected) left alone.
        const again =
          before?.outcome === "waiting" ||
          (before?.outcome === "invalid" && "schema_missing" in before.detail);
        if (before && !again) {
          if (!["unreadable", "rejected", "invalid"].includes(before.outcome))
            await folder.moveAside(dir, name, before.outcome === "expired" ? "unmatched" : "processed");
          continue;
        }
        if (kind === "acknowledgement") {
          let read: Awaited<ReturnType<typeof readAcknowledgement>>;
          try {
            read = await readAcknowledgement(name, data, options.schemaDir, found.parties);
          } catch (error) {
            if (!(error instanceof AckFormatError)) throw error;
            const named = await deliveriesNamedIn(db, code, name, data);
            if (error instanceof AckInvalidError) {
              await record(
                kind,
                name,
                sha,
                "invalid",
                {
                  error: error.message,
                  errors: error.errors.slice(0, 20),
                  ...(error.schemaMissing ? { schema_missing: true } : {}),
                },
                named,
              );
            } else {
              await record(kind, name, sha, "unreadable", { error: error.message }, named);
            }
            continue;
          }
          const applied = await applyAcknowledgement(db, code, name, read.entries);
          const ids = applied.map((a) => a.delivery_id).filter((id): id is string => id !== null);
          const waiting = applied.some((a) => a.result === "waiting");
          const waitedS = before?.outcome === "waiting" ? before.age_s : 0;
          if (waiting && waitedS < inbox.unmatched_after_s) {
            // Early: its delivery is not recorded as sent yet. Kept in the folder, read again.
            await record(kind, name, sha, "waiting", { form: read.form, entries: applied }, ids);
            continue;
          }
          if (waiting) {
            await record(
              kind,
              name,
              sha,
              "expired",
              { form: read.form, entries: applied, waited_s: Math.round(waitedS) },
              ids,
            );
            await folder.moveAside(dir, name, "unmatched");
            continue;
          }
          await record(kind, name, sha, "applied", { form: read.form, entries: applied }, ids);
          await folder.moveAside(dir, name, "processed");
        } else {
          const reports = inbox.reports;
          if (!reports) continue;
          try {
            const r = await importRoyalties(db, {
              tenantId: reports.tenant,
              format: reports.format,
              file: local,
              fileName: name,
              store: code,
              source: "store",
            });
            const id = r.status === "duplicate" ? r.existing.id : r.report.id;
            const outcome = r.status === "completed" ? "imported" : r.status;
            await record(kind, name, sha, outcome, {
              import_id: id,
              ...(r.status === "rejected" ? { errors: r.report.errors.slice(0, 5) } : {}),
            });
            if (r.status !== "rejected") await folder.moveAside(dir, name, "processed");
          } catch (error) {
            if (!(error instanceof ImportError)) throw error;
            await record(kind, name, sha, "unreadable", { error: error.message });
          }
        }
        await rm(local, { force: true });
      }
    }
  } finally {
    folder.close();
    await rm(work, { recursive: true, force: true });
  }
  return result;
}

export const POLL_KIND = "store.poll";

/**
 * Makes sure every store with an enabled inbox has its recurring poll job (one per store: the
 * queue's dedupe key keeps it single across processes; it re-queues itself after each run).
 * Run at start-up and after a store's settings change.
 */
export async function scheduleStorePolls(db: Db): Promise<string[]> {
  const stores = await db.asService(
    async (tx) =>
      (
        await tx.query<{ code: string }>(
          "select code from internal.stores where settings ? 'ddex' order by code",
        )
      ).rows,
    { readOnly: true },
  );
  const scheduled: string[] = [];
  for (const { code } of stores) {
    let found: Awaited<ReturnType<typeof inboxOf>>;
    try {
      found = await inboxOf(db, code);
    } catch {
      continue;
    }
    if (!found?.inbox.enabled) continue;
    const every = found.inbox.every_s;
    await db.asService(async (tx) => {
      await enqueue(tx, POLL_KIND, { store: code }, { dedupeKey: `store:${code}` });
      // A shorter interval than before takes effect now, not after the old one.
      await tx.query(
        `update internal.jobs set run_at = least(run_at, now() + make_interval(secs => $3))
         where kind = $1 and dedupe_key = $2 and status = 'queued'`,
        [POLL_KIND, `store:${code}`, every],
      );
    });
    scheduled.push(code);
  }
  return scheduled;
}

/** The `store.poll` job: one poll, then the next run's time (undefined: the schedule is off). */
export async function runStorePoll(
  db: Db,
  code: string,
  options: { schemaDir?: string | undefined } = {},
): Promise<Date | undefined> {
  const found = await inboxOf(db, code).catch(() => undefined);
  if (!found?.inbox.enabled) return undefined;
  await pollStore(db, code, options);
  return new Date(Date.now() + found.inbox.every_s * 1000);
}

/**
 * For `stores show`: the store's schedule (interval, enabled, its job's state and next run) and
 * the files last read from its folders, unreadable ones included. Null: no inbox configured.
 */
export async function inboxStatus(db: Db, code: string, limit = 10) {
  const found = await inboxOf(db, code).catch(() => undefined);
  if (!found) return null;
  return db.asService(
    async (tx) => {
      const job = (
        await tx.query<{ id: string; status: string; run_at: Date; last_error: string | null }>(
          `select id::text as id, status, run_at, last_error from internal.jobs
           where kind = $1 and dedupe_key = $2 order by created_at desc limit 1`,
          [POLL_KIND, `store:${code}`],
        )
      ).rows[0];
      const files = (
        await tx.query(
          `select kind, name, outcome, detail, received_at from internal.store_inbox_files where store = $1
           order by received_at desc limit $2`,
          [code, limit],
        )
      ).rows;
      return {
        every_s: found.inbox.every_s,
        enabled: found.inbox.enabled,
        acknowledgements: found.inbox.acknowledgements ?? null,
        reports: found.inbox.reports ?? null,
        job: job ?? null,
        recent_files: files,
      };
    },
    { readOnly: true },
  );
}

export interface DeliveryAcknowledgement {
  delivery_id: string;
  file: string;
  /** applied, waiting (early: read again at each poll), expired, invalid or unreadable (kept aside). */
  outcome: string;
  /** Why a file was kept aside: its validation errors against DDEX's schema, or why it is unreadable. */
  error: string | null;
  errors: string[];
  tries: number;
  received_at: string;
  last_tried_at: string;
}

/** The acknowledgement files read about these deliveries, newest first (set-aside ones included). */
export async function acknowledgementsOf(db: Db, deliveryIds: string[]): Promise<DeliveryAcknowledgement[]> {
  if (deliveryIds.length === 0) return [];
  const rows = await db.asService(
    async (tx) =>
      (
        await tx.query<{
          id: string;
          name: string;
          outcome: string;
          detail: { error?: string; errors?: string[] };
          tries: number;
          received_at: Date;
          last_tried_at: Date;
        }>(
          `select d.id::text as id, f.name, f.outcome, f.detail, f.tries, f.received_at, f.last_tried_at
           from internal.store_inbox_files f cross join lateral unnest(f.delivery_ids) as d(id)
           where f.kind = 'acknowledgement' and d.id = any($1::uuid[])
           order by f.last_tried_at desc, f.id limit 500`,
          [deliveryIds],
        )
      ).rows,
    { readOnly: true },
  );
  return rows.map((r) => ({
    delivery_id: r.id,
    file: r.name,
    outcome: r.outcome,
    error: r.detail.error ?? null,
    errors: Array.isArray(r.detail.errors) ? r.detail.errors : [],
    tries: r.tries,
    received_at: new Date(r.received_at).toISOString(),
    last_tried_at: new Date(r.last_tried_at).toISOString(),
  }));
}
