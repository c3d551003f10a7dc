import { randomUUID } from "node:crypto";
import { asDbError } from "../db/errors.ts";
import type { Tx } from "../db/types.ts";
import type { BucketRow } from "./buckets.ts";
import { STORAGE_ERRORS, validKey } from "./errors.ts";

/**
 * Objects of a tenant's own buckets (storage.objects, migration 0046; docs/uploads.md, "Objects"),
 * read and written as the caller under the installation's fixed policies, which read the bucket's
 * rules. The bytes are in the storage driver at `objects/<tenant>/<id>` (`newObjectKey`): a name
 * is never a path, so a move renames a row and no name can reach another object's bytes.
 */

export interface ObjectRow {
  id: string;
  bucket_id: string;
  name: string;
  owner: string | null;
  object_key: string;
  metadata: ObjectMetadata;
  user_metadata: Record<string, unknown> | null;
  created_at: Date | string;
  updated_at: Date | string;
  last_accessed_at: Date | string;
}

export interface ObjectMetadata {
  eTag: string;
  size: number;
  mimetype: string;
  cacheControl: string;
  lastModified: string;
  contentLength: number;
  httpStatusCode: number;
}

const COLUMNS =
  "id, bucket_id, name, owner, object_key, metadata, user_metadata, created_at, updated_at, last_accessed_at";

export const newObjectKey = (tenantId: string) => `objects/${tenantId}/${randomUUID()}`;

export function checkKey(name: string): string {
  if (!validKey(name)) throw STORAGE_ERRORS.invalidKey(name);
  return name;
}

/** The object as the caller sees it, or NoSuchKey (missing and forbidden look the same). */
export async function findObject(tx: Tx, tenantId: string, bucket: string, name: string): Promise<ObjectRow> {
  const row = (
    await tx.query<ObjectRow>(
      `select ${COLUMNS} from storage.objects where tenant_id = $1 and bucket_id = $2 and name = $3`,
      [tenantId, bucket, name],
    )
  ).rows[0];
  if (!row) throw STORAGE_ERRORS.noSuchKey();
  return row;
}

/** Whether the caller may write this name in this bucket (asked before any byte is stored). */
export async function mayWrite(tx: Tx, tenantId: string, bucket: string, name: string): Promise<boolean> {
  const r = await tx.query<{ ok: boolean }>(
    `select coalesce(auth.role() = 'tenant_service' or auth.has_staff_role($1, 'admin'), false)
       or internal.storage_object_allowed($1, $2, $3, true) as ok`,
    [tenantId, bucket, name],
  );
  return r.rows[0]?.ok === true;
}

/**
 * The bucket as the caller sees it (NoSuchBucket otherwise) and whether the caller may write
 * this name there (`mayWrite`), in one statement: an upload asks both before any byte is stored.
 */
export async function bucketForWrite(
  tx: Tx,
  tenantId: string,
  bucket: string,
  name: string,
): Promise<{ bucket: BucketRow; mayWrite: boolean }> {
  const row = (
    await tx.query<BucketRow & { may_write: boolean }>(
      `select id, public, file_size_limit, allowed_mime_types, folder_per_account, read_roles, write_roles,
         owner, created_at, updated_at,
         coalesce(auth.role() = 'tenant_service' or auth.has_staff_role($1, 'admin'), false)
           or internal.storage_object_allowed($1, $2, $3, true) as may_write
       from storage.buckets where tenant_id = $1 and id = $2`,
      [tenantId, bucket, name],
    )
  ).rows[0];
  if (!row) throw STORAGE_ERRORS.noSuchBucket();
  const { may_write, ...found } = row;
  return { bucket: found, mayWrite: may_write === true };
}

/**
 * Records stored bytes under `name`: a new row, or with `upsert` the existing one's bytes replaced.
 * Returns the row and the key of the bytes it replaced (to remove once committed).
 */
export async function saveObject(
  tx: Tx,
  input: {
    tenantId: string;
    bucket: string;
    name: string;
    owner: string | undefined;
    objectKey: string;
    metadata: ObjectMetadata;
    userMetadata?: Record<string, unknown> | undefined;
    upsert: boolean;
  },
): Promise<{ row: ObjectRow; replacedKey: string | undefined }> {
  // A new name is one statement: the unique (tenant, bucket, name) refuses one that exists (also
  // one the caller cannot see, as Storage does). Only an upsert reads the row it replaces first.
  const existing = input.upsert
    ? (
        await tx.query<{ id: string; object_key: string }>(
          "select id, object_key from storage.objects where tenant_id = $1 and bucket_id = $2 and name = $3 for update",
          [input.tenantId, input.bucket, input.name],
        )
      ).rows[0]
    : undefined;
  if (existing) {
    const row = (
      await tx.query<ObjectRow>(
        `update storage.objects set object_key = $2, metadata = $3, owner = coalesce($4, owner), user_metadata = $5,
           updated_at = now(), last_accessed_at = now()
         where id = $1 returning ${COLUMNS}`,
        [
          existing.id,
          input.objectKey,
          JSON.stringify(input.metadata),
          input.owner ?? null,
          input.userMetadata ? JSON.stringify(input.userMetadata) : null,
        ],
      )
    ).rows[0];
    // A row the caller may see but not write stays as it was (the policy's USING hides it from the update).
    if (!row) throw STORAGE_ERRORS.accessDenied("new row violates row-level security policy");
    return { row, replacedKey: existing.object_key };
  }
  let row: ObjectRow;
  try {
    row = (
      await tx.query<ObjectRow>(
        `insert into storage.objects (tenant_id, bucket_id, name, owner, object_key, metadata, user_metadata)
         values ($1, $2, $3, $4, $5, $6, $7) returning ${COLUMNS}`,
        [
          input.tenantId,
          input.bucket,
          input.name,
          input.owner ?? null,
          input.objectKey,
          JSON.stringify(input.metadata),
          input.userMetadata ? JSON.stringify(input.userMetadata) : null,
        ],
      )
    ).rows[0] as ObjectRow;
  } catch (error) {
    if (asDbError(error)?.sqlstate === "23505") throw STORAGE_ERRORS.keyExists();
    throw error;
  }
  return { row, replacedKey: undefined };
}

export interface ListOptions {
  prefix: string;
  limit: number;
  offset: number;
  search: string;
  column: "name" | "created_at" | "updated_at" | "last_accessed_at";
  order: "asc" | "desc";
}

export function listOptions(body: Record<string, unknown>): ListOptions {
  const prefix = body.prefix ?? "";
  if (typeof prefix !== "string" || prefix.length > 1024) throw STORAGE_ERRORS.invalidParameter("prefix");
  const whole = (v: unknown, name: string, fallback: number, max: number) => {
    if (v === undefined || v === null) return fallback;
    const n = Number(v);
    if (!Number.isSafeInteger(n) || n < 0 || n > max) throw STORAGE_ERRORS.invalidParameter(name);
    return n;
  };
  const sortBy = (body.sortBy ?? {}) as Record<string, unknown>;
  const column = sortBy.column ?? "name";
  if (!["name", "created_at", "updated_at", "last_accessed_at"].includes(String(column))) {
    throw STORAGE_ERRORS.invalidParameter("sortBy.column");
  }
  const order = String(sortBy.order ?? "asc").toLowerCase();
  if (order !== "asc" && order !== "desc") throw STORAGE_ERRORS.invalidParameter("sortBy.order");
  const search = body.search ?? "";
  if (typeof search !== "string") throw STORAGE_ERRORS.invalidParameter("search");
  return {
    // "folder" and "folder/" name the same folder; "" the bucket's top.
    prefix: prefix === "" || prefix.endsWith("/") ? prefix : `${prefix}/`,
    limit: whole(body.limit, "limit", 100, 1000),
    offset: whole(body.offset, "offset", 0, 1_000_000),
    search,
    column: column as ListOptions["column"],
    order,
  };
}

/** A timestamptz column as JSON text of the same form as Date#toISOString (UTC, milliseconds). */
const isoSql = (column: string) => `to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/** `like` for names starting with `prefix`, its `%`, `_` and `\\` taken literally (an index range, unlike left()). */
export const prefixPattern = (prefix: string) => `${prefix.replace(/[\\%_]/g, "\\$&")}%`;

/** A nullable SQL value as JSON text: `text` (already JSON) or null. */
const orNull = (text: string) => `coalesce(${text}, 'null')`;

/**
 * Storage's list (v1): one level under the prefix, folders (id null) and files, the objects the
 * caller may read only (the query runs under the policies), or NoSuchBucket. One statement: the
 * bucket's check and the page, whose JSON text the database writes (compact, by concatenation:
 * cheaper than json_build_object, and one string to carry and send instead of a thousand rows to
 * convert twice).
 */
export async function listObjects(tx: Tx, tenantId: string, bucket: string, o: ListOptions): Promise<string> {
  const r = await tx.query<{ found: boolean; body: string | null }>(
    `with under as (
       select id, created_at, updated_at, last_accessed_at, metadata, substr(name, length($3) + 1) as rest
       from storage.objects
       where tenant_id = $1 and bucket_id = $2 and name like $4
     ), items as (
       select distinct split_part(rest, '/', 1) as name, null::uuid as id, null::timestamptz as created_at,
         null::timestamptz as updated_at, null::timestamptz as last_accessed_at, null::jsonb as metadata
       from under where strpos(rest, '/') > 0
       union all
       select rest, id, created_at, updated_at, last_accessed_at, metadata from under where strpos(rest, '/') = 0
     ), page as (
       select * from items where $5 = '' or starts_with(lower(name), lower($5))
       order by ${o.column} ${o.order} nulls first, name ${o.order}
       limit $6 offset $7
     )
     select exists (select from storage.buckets where tenant_id = $1 and id = $2) as found,
       (select '[' || string_agg(
          '{"name":' || to_json(name)::text
          || ',"id":' || ${orNull(`'"' || id || '"'`)}
          || ',"updated_at":' || ${orNull(`'"' || ${isoSql("updated_at")} || '"'`)}
          || ',"created_at":' || ${orNull(`'"' || ${isoSql("created_at")} || '"'`)}
          || ',"last_accessed_at":' || ${orNull(`'"' || ${isoSql("last_accessed_at")} || '"'`)}
          || ',"metadata":' || ${orNull("metadata::text")} || '}', ',') || ']'
        from page) as body`,
    [tenantId, bucket, o.prefix, prefixPattern(o.prefix), o.search, o.limit, o.offset],
  );
  const row = r.rows[0];
  if (!row?.found) throw STORAGE_ERRORS.noSuchBucket();
  return row.body ?? "[]";
}

const iso = (v: unknown) => (v === null || v === undefined ? null : new Date(v as string).toISOString());

/** Storage's object info (`/object/info/...`). */
export function infoJson(row: ObjectRow): Record<string, unknown> {
  return {
    id: row.id,
    name: row.name,
    version: row.id,
    bucket_id: row.bucket_id,
    size: row.metadata.size,
    content_type: row.metadata.mimetype,
    cache_control: row.metadata.cacheControl,
    etag: row.metadata.eTag,
    metadata: row.user_metadata ?? {},
    last_modified: iso(row.updated_at),
    created_at: iso(row.created_at),
  };
}

/** A row as Storage's remove answers it. */
export function removedJson(row: ObjectRow): Record<string, unknown> {
  return {
    id: row.id,
    name: row.name,
    bucket_id: row.bucket_id,
    owner: row.owner,
    metadata: row.metadata,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
    last_accessed_at: iso(row.last_accessed_at),
  };
}

export async function removeObjects(
  tx: Tx,
  tenantId: string,
  bucket: string,
  names: string[],
): Promise<ObjectRow[]> {
  return (
    await tx.query<ObjectRow>(
      `delete from storage.objects where tenant_id = $1 and bucket_id = $2 and name = any ($3::text[])
       returning ${COLUMNS}`,
      [tenantId, bucket, names],
    )
  ).rows;
}

/** Renames (and maybe re-buckets) an object; the bytes stay where they are. */
export async function moveObject(
  tx: Tx,
  tenantId: string,
  from: { bucket: string; name: string },
  to: { bucket: string; name: string },
): Promise<void> {
  await findObject(tx, tenantId, from.bucket, from.name);
  const r = await tx.query(
    `update storage.objects set bucket_id = $4, name = $5, updated_at = now()
     where tenant_id = $1 and bucket_id = $2 and name = $3`,
    [tenantId, from.bucket, from.name, to.bucket, to.name],
  );
  if (r.rowCount === 0) throw STORAGE_ERRORS.accessDenied("new row violates row-level security policy");
}

export interface ListV2Options {
  prefix: string;
  delimiter: boolean;
  limit: number;
  column: "name" | "created_at" | "updated_at";
  order: "asc" | "desc";
  /** Where the previous page ended: the sort column's value and the name. */
  after: { value: string; name: string } | undefined;
}

/** The body of list-v2, with its cursor (opaque to clients: base64url JSON this module writes). */
export function listV2Options(body: Record<string, unknown>): ListV2Options {
  const prefix = body.prefix ?? "";
  if (typeof prefix !== "string" || prefix.length > 1024) throw STORAGE_ERRORS.invalidParameter("prefix");
  const limit = body.limit === undefined ? 1000 : Number(body.limit);
  if (!Number.isSafeInteger(limit) || limit < 1) throw STORAGE_ERRORS.invalidParameter("limit");
  const sortBy = (body.sortBy ?? {}) as Record<string, unknown>;
  let column = String(sortBy.column ?? "name");
  let order = String(sortBy.order ?? "asc").toLowerCase();
  let after: ListV2Options["after"];
  if (body.cursor !== undefined) {
    try {
      const c = JSON.parse(Buffer.from(String(body.cursor), "base64url").toString("utf8")) as Record<
        string,
        unknown
      >;
      if (typeof c.v !== "string" || typeof c.n !== "string") throw new Error("cursor");
      column = String(c.c);
      order = String(c.o);
      after = { value: c.v, name: c.n };
    } catch {
      throw STORAGE_ERRORS.invalidParameter("cursor");
    }
  }
  if (!["name", "created_at", "updated_at"].includes(column))
    throw STORAGE_ERRORS.invalidParameter("sortBy.column");
  if (order !== "asc" && order !== "desc") throw STORAGE_ERRORS.invalidParameter("sortBy.order");
  return {
    prefix,
    delimiter: body.with_delimiter === true,
    limit: Math.min(limit, 1000),
    column: column as ListV2Options["column"],
    order,
    after,
  };
}

/**
 * Storage's list-v2: objects whose names start with the prefix (full names), or with the
 * delimiter one level of them and their folders (`<prefix><segment>/`), in pages with a cursor.
 */
export async function listObjectsV2(
  tx: Tx,
  tenantId: string,
  bucket: string,
  o: ListV2Options,
): Promise<Record<string, unknown>> {
  const sortValue = o.column === "name" ? "name" : `${o.column}`;
  const cmp = o.order === "asc" ? ">" : "<";
  // The sort value as text: names compare as text, times as ISO strings of the same form.
  const valueText =
    o.column === "name" ? "name" : `to_char(${sortValue} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US')`;
  const r = await tx.query<Record<string, unknown>>(
    `with under as (
       select id, name, created_at, updated_at, last_accessed_at, metadata, substr(name, length($3) + 1) as rest
       from storage.objects
       where tenant_id = $1 and bucket_id = $2 and name like $8
     ), entries as (
       select null::uuid as id, $3 || split_part(rest, '/', 1) || '/' as name, max(created_at) as created_at,
         max(updated_at) as updated_at, null::timestamptz as last_accessed_at, null::jsonb as metadata
       from under where $4 and strpos(rest, '/') > 0 group by 2
       union all
       select id, name, created_at, updated_at, last_accessed_at, metadata from under
       where not $4 or strpos(rest, '/') = 0
     )
     select *, ${valueText} as sort_value from entries
     where $5::text is null or (${valueText}, name) ${cmp} ($5::text, $6::text)
     order by ${sortValue} ${o.order}, name ${o.order}
     limit $7`,
    [
      tenantId,
      bucket,
      o.prefix,
      o.delimiter,
      o.after?.value ?? null,
      o.after?.name ?? null,
      o.limit + 1,
      prefixPattern(o.prefix),
    ],
  );
  const rows = r.rows.slice(0, o.limit);
  const last = rows[rows.length - 1];
  const hasNext = r.rows.length > o.limit && last !== undefined;
  const folders: Record<string, unknown>[] = [];
  const objects: Record<string, unknown>[] = [];
  for (const row of rows) {
    if (row.id === null) {
      const name = String(row.name);
      folders.push({ key: name.slice(0, -1), name });
    } else {
      objects.push({
        id: row.id,
        name: row.name,
        updated_at: iso(row.updated_at),
        created_at: iso(row.created_at),
        last_accessed_at: iso(row.last_accessed_at),
        metadata: row.metadata,
      });
    }
  }
  const nextCursor = hasNext
    ? Buffer.from(
        JSON.stringify({ c: o.column, o: o.order, v: String(last.sort_value), n: String(last.name) }),
      ).toString("base64url")
    : undefined;
  return { hasNext, ...(nextCursor ? { nextCursor, nextCursorKey: last?.name } : {}), folders, objects };
}
