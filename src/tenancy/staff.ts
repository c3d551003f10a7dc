import { inviteAddress } from "../auth/invite.ts";
import { authSettings } from "../auth/settings.ts";
import type { Db } from "../db/db.ts";
import type { Tx } from "../db/types.ts";
import type { Mailer } from "../mail/mailer.ts";
import { findTenant, type Tenant } from "./tenants.ts";

/**
 * Staff (docs/console.md, "Staff roles"): who may work on a tenant, or on every tenant (platform
 * staff), from the console and /admin/v1. The rows live in internal.staff (migration 0019), whose
 * functions decide every request; this module is the operator's side (`backline staff`).
 *
 * A staff member is a user of one tenant's /auth/v1 (the tenant they sign in to, `userTenant`),
 * which may differ from the tenant they work on. The row counts only once the user's address is
 * proven: for an address with no user, or one not proven yet, `addStaff` mails an invite link
 * (the mailbox on an installation without SMTP_URL) whose use proves it and lets them choose a
 * password.
 */

export const STAFF_ROLES = ["reviewer", "operator", "admin"] as const;
export type StaffRole = (typeof STAFF_ROLES)[number];

export interface StaffMember {
  id: string;
  user_id: string;
  email: string | null;
  /** The tenant whose /auth/v1 the user signs in to. */
  user_tenant: string;
  /** The tenant worked on; null for platform staff. */
  tenant_id: string | null;
  tenant_slug: string | null;
  role: StaffRole;
  /** False until the user's e-mail address is proven (the row gives nothing before). */
  active: boolean;
  created_at: Date;
}

export class StaffError extends Error {
  override name = "StaffError";
}

const MEMBER_SELECT = `select s.id, s.user_id, u.email, ut.slug as user_tenant, s.tenant_id, t.slug as tenant_slug,
    s.role, (u.email_proven_at is not null and u.deleted_at is null) as active, s.created_at
  from internal.staff s
  join internal.users u on u.id = s.user_id
  join internal.tenants ut on ut.id = u.tenant_id
  left join internal.tenants t on t.id = s.tenant_id`;

export interface StaffTarget {
  /** The tenant worked on (id or slug); absent with `platform`. */
  tenant?: string | undefined;
  platform?: boolean | undefined;
}

async function resolveTarget(tx: Tx, target: StaffTarget): Promise<Tenant | null> {
  if (target.platform) {
    if (target.tenant !== undefined) throw new StaffError("give either --tenant or --platform, not both");
    return null;
  }
  if (target.tenant === undefined) throw new StaffError("give --tenant <slug|id> or --platform");
  const tenant = await findTenant(tx, target.tenant);
  if (!tenant) throw new StaffError(`no tenant ${target.tenant}`);
  return tenant;
}

/**
 * The tenant whose user `email` is: `userTenant` if given; else the tenant worked on; for platform
 * staff without one, the development tenant (the embedded default's), or an error.
 */
async function resolveUserTenant(
  tx: Tx,
  target: Tenant | null,
  userTenant: string | undefined,
): Promise<Tenant> {
  if (userTenant !== undefined) {
    const tenant = await findTenant(tx, userTenant);
    if (!tenant) throw new StaffError(`no tenant ${userTenant}`);
    return tenant;
  }
  if (target) return target;
  const dev = (
    await tx.query<{ id: string }>(
      "select id from internal.tenants where is_development order by created_at, id limit 1",
    )
  ).rows[0];
  const tenant = dev ? await findTenant(tx, dev.id) : undefined;
  if (!tenant) {
    throw new StaffError(
      "platform staff sign in to one tenant's /auth/v1: name it with --user-tenant <slug|id>",
    );
  }
  return tenant;
}

function normalEmail(given: string): string {
  const email = given.trim().toLowerCase();
  if (!/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(email) || email.length > 320)
    throw new StaffError(`${JSON.stringify(given)} is not an e-mail address`);
  return email;
}

export interface AddStaffResult {
  /** added: the user's address is proven, the role counts now; invited: it counts once they use the mailed link. */
  status: "added" | "invited";
  staff: StaffMember;
  /** The invite link mailed (status invited), for the CLI to show when mail stays in the local mailbox. */
  invite_link: string | null;
}

/**
 * Makes the user with this address staff of the tenant (or platform staff) with `role`, replacing
 * a role they had there. Without a proven user for the address, the address is invited (a user is
 * made if it has none) and the link goes to `redirectTo` (the console) once used.
 */
export async function addStaff(
  db: Db,
  input: StaffTarget & { email: string; role: StaffRole; userTenant?: string | undefined },
  mail: { mailer: Mailer; publicUrl: string; redirectTo?: string | undefined },
): Promise<AddStaffResult> {
  if (!(STAFF_ROLES as readonly string[]).includes(input.role))
    throw new StaffError(`role must be one of ${STAFF_ROLES.join(", ")}`);
  const email = normalEmail(input.email);
  const result = await db.asService(async (tx) => {
    const target = await resolveTarget(tx, input);
    const userTenant = await resolveUserTenant(tx, target, input.userTenant);
    let user = (
      await tx.query<{ id: string; email_proven_at: Date | null }>(
        "select id, email_proven_at from internal.users where tenant_id = $1 and email = $2 and deleted_at is null",
        [userTenant.id, email],
      )
    ).rows[0];
    let status: AddStaffResult["status"] = "added";
    if (!user?.email_proven_at) {
      const where = target ? `${target.name} (${target.slug})` : "every tenant of this installation";
      const settings = (
        await tx.query<{ settings: unknown }>("select settings from internal.tenants where id = $1", [
          userTenant.id,
        ])
      ).rows[0]?.settings;
      const made = await inviteAddress(
        tx,
        mail.mailer,
        {
          tenant: { id: userTenant.id },
          settings: authSettings(settings),
          publicUrl: mail.publicUrl,
        },
        email,
        {
          redirectTo: mail.redirectTo,
          intro: `You have been made ${input.role} of ${where} on Backline. Open the link to prove this address and choose a password; then sign in to the console.`,
        },
      );
      user = { id: made.id, email_proven_at: null };
      status = "invited";
    }
    const row = (
      await tx.query<{ id: string }>(
        `insert into internal.staff (user_id, tenant_id, role) values ($1, $2, $3)
         on conflict (user_id, tenant_id) do update set role = excluded.role
         returning id`,
        [user.id, target?.id ?? null, input.role],
      )
    ).rows[0];
    if (!row) throw new Error("insert into internal.staff returned no row");
    const staff = (await tx.query<StaffMember>(`${MEMBER_SELECT} where s.id = $1`, [row.id])).rows[0];
    if (!staff) throw new Error("the staff row vanished");
    let link: string | null = null;
    if (status === "invited") {
      const text = (
        await tx.query<{ text_body: string }>(
          `select text_body from internal.mail_outbox where tenant_id = $1 and to_address = $2 and kind = 'auth.invite'
           order by created_at desc limit 1`,
          [userTenant.id, email],
        )
      ).rows[0]?.text_body;
      link = /Open this link: (\S+)/.exec(text ?? "")?.[1] ?? null;
    }
    return { status, staff, invite_link: link };
  });
  await mail.mailer.deliver();
  return result;
}

/** Staff rows: of one tenant (with the platform staff who also reach it), or every row. */
export async function listStaff(db: Db, filter: StaffTarget = {}): Promise<StaffMember[]> {
  return db.asService(
    async (tx) => {
      if (filter.platform) {
        return (
          await tx.query<StaffMember>(`${MEMBER_SELECT} where s.tenant_id is null order by u.email, s.id`)
        ).rows;
      }
      if (filter.tenant !== undefined) {
        const tenant = await findTenant(tx, filter.tenant);
        if (!tenant) throw new StaffError(`no tenant ${filter.tenant}`);
        return (
          await tx.query<StaffMember>(
            `${MEMBER_SELECT} where s.tenant_id = $1 or s.tenant_id is null
             order by s.tenant_id nulls first, u.email, s.id`,
            [tenant.id],
          )
        ).rows;
      }
      return (await tx.query<StaffMember>(`${MEMBER_SELECT} order by t.slug nulls first, u.email, s.id`))
        .rows;
    },
    { readOnly: true },
  );
}

/**
 * Removes the staff row of this address for the tenant (or the platform row). It takes effect at
 * once: every request reads the rows again. `userTenant` as in addStaff.
 */
export async function removeStaff(
  db: Db,
  input: StaffTarget & { email: string; userTenant?: string | undefined },
): Promise<StaffMember> {
  const email = normalEmail(input.email);
  return db.asService(async (tx) => {
    const target = await resolveTarget(tx, input);
    const userTenantId =
      input.userTenant !== undefined ? (await resolveUserTenant(tx, target, input.userTenant)).id : null;
    // Platform rows: the address in any tenant unless --user-tenant narrows it; tenant rows: the
    // address of any user who is staff there (a user of another tenant included).
    const found = (
      await tx.query<StaffMember>(
        `${MEMBER_SELECT}
         where u.email = $1 and s.tenant_id is not distinct from $2::uuid
           and ($3::uuid is null or u.tenant_id = $3::uuid)
         order by (u.tenant_id = coalesce($2::uuid, u.tenant_id)) desc, s.created_at`,
        [email, target?.id ?? null, userTenantId],
      )
    ).rows;
    if (found.length === 0) {
      throw new StaffError(`${email} is not ${target ? `staff of ${target.slug}` : "platform staff"}`);
    }
    if (found.length > 1) {
      throw new StaffError(
        `${email} is the address of staff in several tenants (${found.map((f) => f.user_tenant).join(", ")}): name the one with --user-tenant`,
      );
    }
    const member = found[0] as StaffMember;
    await tx.query("delete from internal.staff where id = $1", [member.id]);
    return member;
  });
}
