import { PersonExport } from "../../people/export-schema.ts";
import { exportMine } from "../../people/service.ts";
import { route } from "../route.ts";

/**
 * A person's own data (docs/privacy.md): GET /me/export, everything Backline holds about the
 * signed-in person as one JSON document (GDPR articles 15 and 20). Their access token only, never
 * an API key; the database builds it (internal.my_export, migration 0043) for the token's user.
 */

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
