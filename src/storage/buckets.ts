import { asDbError } from "../db/errors.ts";
import type { Tx } from "../db/types.ts";
import { STORAGE_ERRORS, type StorageError, validBucketName } from "./errors.ts";
import { CONTENT_TYPES } from "./keys.ts";
import type { UploadLimits } from "./uploads.ts";

/**
 * A tenant's buckets (storage.buckets, migration 0046; docs/uploads.md, "Buckets"), read and
 * changed as the caller: the policies decide who manages them (the tenant's service-role key, its
 * admin staff). `artwork` and `audio` are Backline's media slots, shown as built-in buckets whose
 * rules are the media checks; they are not rows and cannot be changed or deleted.
 */

export const BUILT_IN = ["artwork", "audio"] as const;
export const MEMBER_ROLES = ["owner", "admin", "member", "viewer"] as const;

export interface BucketRow {
  id: string;
  public: boolean;
  file_size_limit: string | number | null;
  allowed_mime_types: string[] | null;
  folder_per_account: boolean;
  read_roles: string[];
  write_roles: string[];
  owner: string | null;
  created_at: Date | string;
  updated_at: Date | string;
}

const COLUMNS =
  "id, public, file_size_limit, allowed_mime_types, folder_per_account, read_roles, write_roles, owner, created_at, updated_at";

/** A bucket as storage-js reads it, with Backline's rules beside Storage's fields. */
export function bucketJson(row: BucketRow, builtIn = false): Record<string, unknown> {
  return {
    id: row.id,
    name: row.id,
    owner: row.owner ?? "",
    public: row.public,
    type: "STANDARD",
    file_size_limit: row.file_size_limit === null ? null : Number(row.file_size_limit),
    allowed_mime_types: row.allowed_mime_types,
    folder_per_account: row.folder_per_account,
    read_roles: row.read_roles,
    write_roles: row.write_roles,
    built_in: builtIn,
    created_at: new Date(row.created_at).toISOString(),
    updated_at: new Date(row.updated_at).toISOString(),
  };
}

const EPOCH = new Date("2026-01-01T00:00:00Z");

export function builtInBucket(id: (typeof BUILT_IN)[number], limits: UploadLimits): BucketRow {
  return {
    id,
    public: false,
    file_size_limit: limits.maxBytes[id],
    allowed_mime_types: Object.entries(CONTENT_TYPES)
      .filter(([, v]) => v.kind === id)
      .map(([type]) => type),
    folder_per_account: false,
    read_roles: [...MEMBER_ROLES],
    write_roles: ["owner", "admin", "member"],
    owner: null,
    created_at: EPOCH,
    updated_at: EPOCH,
  };
}

export const isBuiltIn = (id: string): id is (typeof BUILT_IN)[number] =>
  (BUILT_IN as readonly string[]).includes(id);

function builtInRefusal(id: string): StorageError {
  return STORAGE_ERRORS.invalidRequest(
    `${id} is a built-in bucket: its rules are Backline's media checks, and it cannot be changed or deleted`,
  );
}

/** The bucket as the caller sees it, or NoSuchBucket. */
export async function findBucket(tx: Tx, tenantId: string, id: string): Promise<BucketRow> {
  const row = (
    await tx.query<BucketRow>(`select ${COLUMNS} from storage.buckets where tenant_id = $1 and id = $2`, [
      tenantId,
      id,
    ])
  ).rows[0];
  if (!row) throw STORAGE_ERRORS.noSuchBucket();
  return row;
}

export async function listBuckets(
  tx: Tx,
  tenantId: string,
  limits: UploadLimits,
  query: Record<string, unknown>,
): Promise<Record<string, unknown>[]> {
  const rows = (
    await tx.query<BucketRow>(`select ${COLUMNS} from storage.buckets where tenant_id = $1 order by id`, [
      tenantId,
    ])
  ).rows;
  let all = [
    ...BUILT_IN.map((id) => bucketJson(builtInBucket(id, limits), true)),
    ...rows.map((r) => bucketJson(r)),
  ];
  const search = typeof query.search === "string" ? query.search.toLowerCase() : "";
  if (search) all = all.filter((b) => String(b.name).toLowerCase().includes(search));
  const column = ["id", "name", "created_at", "updated_at"].includes(String(query.sortColumn))
    ? String(query.sortColumn)
    : "name";
  const desc = String(query.sortOrder).toLowerCase() === "desc";
  all.sort((a, b) => String(a[column]).localeCompare(String(b[column])) * (desc ? -1 : 1));
  const offset = wholeNumber(query.offset, "offset") ?? 0;
  const limit = wholeNumber(query.limit, "limit");
  return all.slice(offset, limit === undefined ? undefined : offset + limit);
}

function wholeNumber(value: unknown, name: string): number | undefined {
  if (value === undefined || value === "") return undefined;
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 0) throw STORAGE_ERRORS.invalidParameter(name);
  return n;
}

/** The settable fields of a bucket, checked; `partial` for an update (absent fields stay). */
export function bucketSettings(
  body: Record<string, unknown>,
  maxObjectBytes: number,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (body.public !== undefined) {
    if (typeof body.public !== "boolean") throw STORAGE_ERRORS.invalidParameter("public");
    out.public = body.public;
  }
  if (body.file_size_limit !== undefined) {
    const limit = body.file_size_limit === null ? null : parseSize(body.file_size_limit);
    if (limit !== null && limit > maxObjectBytes) {
      throw STORAGE_ERRORS.invalidRequest(
        `file_size_limit is at most ${maxObjectBytes} bytes on this server (STORAGE object limit)`,
      );
    }
    out.file_size_limit = limit;
  }
  if (body.allowed_mime_types !== undefined) {
    const types = body.allowed_mime_types;
    if (
      types !== null &&
      (!Array.isArray(types) ||
        types.length > 100 ||
        !types.every((t) => typeof t === "string" && /^[\w.+-]+\/([\w.+-]+|\*)$/.test(t)))
    ) {
      throw STORAGE_ERRORS.invalidParameter(
        "allowed_mime_types",
        "allowed_mime_types is a list of media types such as image/png or image/*",
      );
    }
    out.allowed_mime_types = types === null || (types as string[]).length === 0 ? null : types;
  }
  if (body.folder_per_account !== undefined) {
    if (typeof body.folder_per_account !== "boolean")
      throw STORAGE_ERRORS.invalidParameter("folder_per_account");
    out.folder_per_account = body.folder_per_account;
  }
  for (const field of ["read_roles", "write_roles"] as const) {
    const roles = body[field];
    if (roles === undefined) continue;
    if (
      !Array.isArray(roles) ||
      !roles.every((r) => (MEMBER_ROLES as readonly string[]).includes(r as string))
    ) {
      throw STORAGE_ERRORS.invalidParameter(field, `${field} is a list of: ${MEMBER_ROLES.join(", ")}`);
    }
    out[field] = [...new Set(roles as string[])];
  }
  return out;
}

/** Storage's size forms: a number of bytes, or a string such as "20MB", "30KB", "3B". */
export function parseSize(value: unknown): number {
  if (typeof value === "number" && Number.isSafeInteger(value) && value > 0) return value;
  if (typeof value === "string") {
    const m = /^\s*(\d+(?:\.\d+)?)\s*(B|KB|MB|GB)?\s*$/i.exec(value);
    if (m?.[1]) {
      const unit = { B: 1, KB: 1024, MB: 1024 ** 2, GB: 1024 ** 3 }[(m[2] ?? "B").toUpperCase() as "B"];
      const n = Math.floor(Number(m[1]) * unit);
      if (n > 0) return n;
    }
  }
  throw STORAGE_ERRORS.invalidRequest("Invalid file size format, hint: use 20GB / 20MB / 30KB / 3B");
}

export async function createBucket(
  tx: Tx,
  tenantId: string,
  owner: string | undefined,
  body: Record<string, unknown>,
  maxObjectBytes: number,
): Promise<string> {
  const id = body.id ?? body.name;
  if (isBuiltIn(String(id))) throw STORAGE_ERRORS.bucketExists();
  if (!validBucketName(id)) throw STORAGE_ERRORS.invalidBucketName();
  if (body.type !== undefined && body.type !== "STANDARD")
    throw STORAGE_ERRORS.notSupported(`bucket type ${String(body.type)}`);
  const settings = bucketSettings(body, maxObjectBytes);
  const columns = Object.keys(settings);
  await tx
    .query(
      `insert into storage.buckets (tenant_id, id, owner${columns.map((c) => `, ${c}`).join("")})
     values ($1, $2, $3${columns.map((_, i) => `, $${i + 4}`).join("")})`,
      [tenantId, id, owner ?? null, ...columns.map((c) => settings[c])],
    )
    .catch((error: unknown) => {
      throw asDbError(error)?.sqlstate === "23505" ? STORAGE_ERRORS.bucketExists() : error;
    });
  return id;
}

export async function updateBucket(
  tx: Tx,
  tenantId: string,
  id: string,
  body: Record<string, unknown>,
  maxObjectBytes: number,
): Promise<void> {
  if (isBuiltIn(id)) throw builtInRefusal(id);
  await findBucket(tx, tenantId, id);
  const settings = bucketSettings(body, maxObjectBytes);
  const columns = Object.keys(settings);
  const r = await tx.query(
    `update storage.buckets set updated_at = now()${columns.map((c, i) => `, ${c} = $${i + 3}`).join("")}
     where tenant_id = $1 and id = $2`,
    [tenantId, id, ...columns.map((c) => settings[c])],
  );
  if (r.rowCount === 0) throw STORAGE_ERRORS.accessDenied("new row violates row-level security policy");
}

/** Deletes the bucket; Storage's rule (and the database's foreign key): only when empty. */
export async function deleteBucket(tx: Tx, tenantId: string, id: string): Promise<void> {
  if (isBuiltIn(id)) throw builtInRefusal(id);
  await findBucket(tx, tenantId, id);
  const r = await tx
    .query("delete from storage.buckets where tenant_id = $1 and id = $2", [tenantId, id])
    .catch((error: unknown) => {
      const sqlstate = asDbError(error)?.sqlstate;
      // The objects' foreign key (ON DELETE RESTRICT): 23001 on PostgreSQL 18, 23503 before.
      throw sqlstate === "23001" || sqlstate === "23503" ? STORAGE_ERRORS.bucketNotEmpty() : error;
    });
  if (r.rowCount === 0) throw STORAGE_ERRORS.accessDenied("new row violates row-level security policy");
}

/** Only those who manage the bucket empty it: its objects' keys, for the caller to remove. */
export async function emptyBucket(tx: Tx, tenantId: string, id: string): Promise<string[]> {
  if (isBuiltIn(id)) throw builtInRefusal(id);
  await findBucket(tx, tenantId, id);
  const may = (await tx.query<{ ok: boolean }>("select auth.has_staff_role($1, 'admin') as ok", [tenantId]))
    .rows[0];
  if (!may?.ok)
    throw STORAGE_ERRORS.accessDenied("Only the tenant's service-role key or admin staff empty a bucket");
  const r = await tx.query<{ object_key: string }>(
    "delete from storage.objects where tenant_id = $1 and bucket_id = $2 returning object_key",
    [tenantId, id],
  );
  return r.rows.map((row) => row.object_key);
}
