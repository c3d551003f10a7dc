import { z } from "zod";
import { Timestamp } from "../http/formats.ts";
import { PERSON_EXPORT_FORMAT, PERSON_EXPORT_VERSION } from "./service.ts";

const Rows = z.array(z.record(z.string(), z.unknown()));

/** A person's export as GET /me/export and /admin/v1/people/{id}/export answer it (docs/privacy.md). */
export const PersonExport = z
  .object({
    format: z.literal(PERSON_EXPORT_FORMAT),
    version: z.literal(PERSON_EXPORT_VERSION).meta({
      type: "integer",
      description: "The shape's version: a field may be added within a version, never removed or changed.",
    }),
    exported_at: Timestamp.meta({ description: "When the export was made." }),
    user: z.record(z.string(), z.unknown()).meta({
      description: "The /auth/v1 user: e-mail, phone, confirmations, metadata, times. No password or hash.",
    }),
    identities: Rows,
    sessions: Rows.meta({
      description: "Sign-in sessions: client address, user agent, assurance level, times.",
    }),
    mfa_factors: Rows.meta({ description: "Second factors: name, type, status. Never the secret." }),
    passkeys: Rows.meta({
      description:
        "Passkeys: name, kind of device, whether backed up, the host it belongs to, created and last used. " +
        "Never the public key or credential id.",
    }),
    memberships: Rows,
    staff_roles: Rows,
    invitations_received: Rows,
    invitations_sent: Rows,
    notifications: Rows,
    tickets: Rows.meta({ description: "Support tickets opened or answered, with their public replies." }),
    api_keys_created: Rows.meta({ description: "API keys this person created: metadata, never the key." }),
    payees: Rows.meta({
      description: "The payees this person is (by user or e-mail), without the sealed tax id.",
    }),
    statements: Rows,
    payouts: Rows,
    mail: Rows.meta({ description: "Mail sent to this person's address: subject, kind and times, no body." }),
    audit: Rows.meta({
      description: "Audit log entries about this person: as actor, as subject, or naming their address.",
    }),
  })
  .meta({ id: "PersonExport", description: "Everything Backline holds about a person (docs/privacy.md)." });
