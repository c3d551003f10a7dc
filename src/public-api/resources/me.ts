import { z } from "zod";
import { exportMine, PERSON_EXPORT_FORMAT, PERSON_EXPORT_VERSION } from "../../people/service.ts";
import { route } from "../route.ts";

/**
 * A person's own data (docs/privacy.md): GET /me/export, everything Backline holds about the
 * signed-in person as one JSON document (GDPR articles 15 and 20). Their access token only, never
 * an API key; the database builds it (internal.my_export, migration 0043) for the token's user.
 */

const Rows = z.array(z.record(z.string(), z.unknown()));

const PersonExport = z
  .object({
    format: z.literal(PERSON_EXPORT_FORMAT),
    version: z.literal(PERSON_EXPORT_VERSION).meta({
      description: "The shape's version: a field may be added within a version, never removed or changed.",
    }),
    exported_at: z.string().meta({ description: "When the export was made (ISO 8601)." }),
    user: z.record(z.string(), z.unknown()).meta({
      description: "The /auth/v1 user: e-mail, phone, confirmations, metadata, times. No password or hash.",
    }),
    identities: Rows,
    sessions: Rows.meta({
      description: "Sign-in sessions: client address, user agent, assurance level, times.",
    }),
    mfa_factors: Rows.meta({ description: "Second factors: name, type, status. Never the secret." }),
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

export const meRoutes = [
  route({
    tag: "Me",
    scope: "catalog:read",
    person: true,
    method: "GET",
    path: "/me/export",
    operationId: "exportMyData",
    summary: "Everything Backline holds about you, as one JSON document",
    description:
      "Your /auth/v1 user, sessions, second factors (never their secrets), memberships, invitations, notifications, tickets, " +
      "the API keys you created (never the keys), the payees you are with their statements and payouts, mail sent to you, " +
      "and the audit log's entries about you. Your access token only, never an API key, and no Backline-Account. " +
      "Saved as a file by a browser (Content-Disposition). The shape is versioned: docs/privacy.md.",
    response: {
      status: 200,
      description: "Your data.",
      schema: PersonExport,
      headers: ["Content-Disposition"],
    },
    handler: async (ctx) => {
      const doc = await ctx.read((tx) => exportMine(tx));
      const day = new Date().toISOString().slice(0, 10);
      return {
        body: doc,
        headers: { "content-disposition": `attachment; filename="backline-my-data-${day}.json"` },
      };
    },
  }),
];
