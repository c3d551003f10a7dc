import { z } from "zod";
import { type AnyAdminRoute, adminRoute, Uuid } from "../admin/spec.ts";
import type { Db } from "../db/db.ts";
import { HttpError } from "../http/problem.ts";
import { PersonExport } from "./export-schema.ts";
import { erasePerson, exportPerson, findPeople, PeopleError } from "./service.ts";

/**
 * People's own data under /admin/v1 (docs/privacy.md), for a tenant's admins (or its service-role
 * key): find a person by address, export what Backline holds about them, erase them.
 *
 *   GET  /people?email=…                  the tenant's user with this address (0 or 1)
 *   GET  /people/{user_id}/export         their data as one JSON document (as GET /me/export)
 *   POST /people/{user_id}/erase          erasure, with the reason; answers what changed per table
 *
 * Another tenant's user is not_found exactly as a missing one is (the database reads only the
 * operator's tenant). Both acts are in the audit log (an erasure as `person.erased`).
 */

const TAG = "People";

const PersonParams = z.object({ user_id: Uuid });

const Person = z
  .object({ object: z.literal("person"), user_id: Uuid, email: z.string().nullable() })
  .meta({ id: "Person" });

const Export = PersonExport;

const Erasure = z
  .object({
    object: z.literal("erasure"),
    user_id: Uuid,
    tables: z.record(z.string(), z.number().int()).meta({
      description: "For each table, the rows deleted or anonymised (internal.audit_log: rows rewritten).",
    }),
  })
  .meta({ id: "Erasure" });

/** A PeopleError as the admin API answers it. */
export function peopleHttpError(error: unknown): never {
  if (!(error instanceof PeopleError)) throw error;
  if (error.code === "not_found") throw new HttpError(404, "not_found", error.message, "user_id");
  throw new HttpError(409, error.code, error.message, "user_id");
}

export function peopleSpecs(options: { db: Db }): AnyAdminRoute[] {
  const { db } = options;
  return [
    adminRoute({
      method: "GET",
      path: "/people",
      operationId: "findPeople",
      summary: "The tenant's user with an e-mail address",
      tag: TAG,
      staffRole: "admin",
      query: z.object({ email: z.string().min(3).max(320).meta({ description: "The address (any case)." }) }),
      response: {
        status: 200,
        description: "The user with this address, if any.",
        schema: z.object({ object: z.literal("list"), data: z.array(Person) }),
      },
      handler: async ({ tenantId, query }) => {
        const found = await db.asService((tx) => findPeople(tx, query.email, tenantId), { readOnly: true });
        return {
          object: "list",
          data: found.map((p) => ({ object: "person", user_id: p.user_id, email: p.email })),
        };
      },
    }),
    adminRoute({
      method: "GET",
      path: "/people/{user_id}/export",
      operationId: "exportPerson",
      summary: "Everything Backline holds about a person, as one JSON document",
      description:
        "The same document as the person's own GET /me/export on the public API (docs/privacy.md).",
      tag: TAG,
      staffRole: "admin",
      params: PersonParams,
      response: { status: 200, description: "Their data.", schema: Export },
      errors: [404],
      handler: async ({ tenantId, params, reply }) => {
        const doc = await exportPerson(db, tenantId, params.user_id).catch(peopleHttpError);
        reply.header("content-disposition", `attachment; filename="backline-person-${params.user_id}.json"`);
        return doc;
      },
    }),
    adminRoute({
      method: "POST",
      path: "/people/{user_id}/erase",
      operationId: "erasePerson",
      summary: "Erase a person's personal data",
      description:
        "Removes or anonymises their data everywhere it is not legally kept, in one transaction (docs/privacy.md, " +
        "table by table). Refused (409) while they are an account's only owner (`sole_owner`, naming the account) or " +
        "staff (`staff`), and for a person already erased (`already_erased`).",
      tag: TAG,
      staffRole: "admin",
      params: PersonParams,
      body: z
        .object({
          reason: z
            .string()
            .trim()
            .min(1)
            .max(1000)
            .meta({ description: "Why (the request's reference): recorded in the audit log's rewrite." }),
        })
        .strict(),
      response: { status: 200, description: "What was erased, table by table.", schema: Erasure },
      errors: [404, 409],
      handler: async ({ tenantId, params, body }) => {
        const tables = await erasePerson(db, tenantId, params.user_id, body.reason).catch(peopleHttpError);
        return { object: "erasure", user_id: params.user_id, tables };
      },
    }),
  ];
}
