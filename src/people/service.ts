import type { Db } from "../db/db.ts";
import { asDbError } from "../db/errors.ts";
import type { Tx } from "../db/types.ts";

/**
 * People's own data (docs/privacy.md): a person's export and erasure. The database decides both
 * (migration 0043: internal.person_export, internal.person_erase); this module finds the person
 * and turns the database's refusals into PeopleError, which the admin API, the public API and the
 * CLI each show in their own way.
 */

/** The export's shape and version (docs/privacy.md, "The export"). */
export const PERSON_EXPORT_FORMAT = "backline.person-export";
export const PERSON_EXPORT_VERSION = 1;

export type PeopleErrorCode = "not_found" | "ambiguous" | "sole_owner" | "staff" | "already_erased";

export class PeopleError extends Error {
  readonly code: PeopleErrorCode;

  constructor(code: PeopleErrorCode, message: string) {
    super(message);
    this.name = "PeopleError";
    this.code = code;
  }
}

export interface PersonRef {
  tenant_id: string;
  tenant_slug: string;
  user_id: string;
  email: string | null;
}

/** One person's data as JSON (version 1). */
export type PersonExport = Record<string, unknown> & { format: string; version: number };

/** What an erasure did: for each table, how many rows it deleted or changed. */
export type ErasureReport = Record<string, number>;

/**
 * The users with this address: in the tenant `tenant` (id or slug) when given, else in every
 * tenant. An address is unique within a tenant, not across tenants.
 */
export async function findPeople(tx: Tx, email: string, tenant?: string): Promise<PersonRef[]> {
  const rows = await tx.query<PersonRef>(
    `select u.tenant_id, t.slug as tenant_slug, u.id as user_id, u.email
       from internal.users u join internal.tenants t on t.id = u.tenant_id
      where u.email = lower($1) and ($2::text is null or t.slug = $2 or t.id::text = $2)
      order by t.slug`,
    [email.trim(), tenant ?? null],
  );
  return rows.rows;
}

/** The one user with this address (in `tenant` when given), or a PeopleError. */
export async function findPerson(db: Db, email: string, tenant?: string): Promise<PersonRef> {
  const found = await db.asService((tx) => findPeople(tx, email, tenant), { readOnly: true });
  const [one] = found;
  if (!one) {
    throw new PeopleError("not_found", `no user ${email}${tenant ? ` in tenant ${tenant}` : ""}`);
  }
  if (found.length > 1) {
    throw new PeopleError(
      "ambiguous",
      `${email} is a user of ${found.length} tenants (${found.map((f) => f.tenant_slug).join(", ")}): name one with --tenant`,
    );
  }
  return one;
}

function translate(error: unknown): never {
  const e = asDbError(error);
  if (e?.sqlstate === "P0002") throw new PeopleError("not_found", e.message);
  if (e?.sqlstate === "BL044") {
    const code =
      (["sole_owner", "staff", "already_erased"] as const).find((c) => c === e.hint) ?? "sole_owner";
    throw new PeopleError(code, e.message);
  }
  throw error;
}

/** Everything Backline holds about the user `userId` of `tenantId` (operator code: asService). */
export async function exportPerson(db: Db, tenantId: string, userId: string): Promise<PersonExport> {
  return db
    .asService(
      async (tx) =>
        (
          await tx.query<{ doc: PersonExport }>("select internal.person_export($1, $2) as doc", [
            tenantId,
            userId,
          ])
        ).rows[0]?.doc as PersonExport,
      { readOnly: true },
    )
    .catch(translate);
}

/** The caller's own export, in a request's transaction as them (GET /me/export). */
export async function exportMine(tx: Tx): Promise<PersonExport> {
  const r = await tx.query<{ doc: PersonExport }>("select internal.my_export() as doc");
  return r.rows[0]?.doc as PersonExport;
}

/**
 * Erases the user `userId` of `tenantId` (docs/privacy.md, "Erasure"): one transaction, audited
 * (`person.erased`, and the audit log's own `audit.rewrite` rows). `reason` is recorded with the
 * rewrite.
 */
export async function erasePerson(
  db: Db,
  tenantId: string,
  userId: string,
  reason: string,
): Promise<ErasureReport> {
  return db
    .asService(
      async (tx) =>
        (
          await tx.query<{ done: ErasureReport }>("select internal.person_erase($1, $2, $3) as done", [
            tenantId,
            userId,
            reason,
          ])
        ).rows[0]?.done as ErasureReport,
    )
    .catch(translate);
}
