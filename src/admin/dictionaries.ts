import type { FastifyRequest } from "fastify";
import { z } from "zod";
import type { Db } from "../db/db.ts";
import { HttpError } from "../http/problem.ts";
import { dictionaries } from "../pipeline/dictionaries.ts";
import { DictionaryError, storeDictionary, updateStoreDictionary } from "../pipeline/store-dictionary.ts";
import { FieldsError } from "./errors.ts";
import { type AnyAdminRoute, adminRoute } from "./spec.ts";

/**
 * Store dictionaries over /admin/v1 (docs/ddex.md, "Store dictionaries"), for platform staff:
 * the built-in dictionaries, and a store's dictionary with every mapping, changed as
 * `backline stores dictionary` changes it (src/pipeline/store-dictionary.ts).
 */

const STORE_CODE = z
  .string()
  .regex(/^[a-z0-9]+(_[a-z0-9]+)*$/)
  .max(64)
  .meta({ description: "A store's code.", example: "apple_music" });

const Genre = z.object({
  name: z.string(),
  code: z.string().optional(),
  parent: z.string().optional(),
});
const Source = z
  .object({
    document: z.string().meta({ description: "The store's published list it was taken from." }),
    version: z.string(),
    transcribed: z.string().meta({ description: "How it was transcribed, and what to check." }),
  })
  .meta({ id: "DictionarySource" });

const Dictionary = z
  .object({
    id: z.string(),
    name: z.string(),
    source: Source,
    genres: z.array(Genre).meta({ description: "The store's genre list." }),
    genre_map: z
      .record(z.string(), z.string())
      .meta({ description: "Backline genre code → the store's genre." }),
    roles: z
      .record(z.string(), z.string())
      .meta({ description: "Backline contributor role → the store's name." }),
  })
  .meta({ id: "Dictionary" });

const From = z.enum(["dictionary", "override"]).nullable();

const StoreDictionary = z
  .object({
    store: z.string(),
    name: z.string(),
    adapter: z.string().nullable(),
    dictionary: z
      .object({ id: z.string(), name: z.string(), source: Source, genres: z.array(Genre) })
      .nullable()
      .meta({ description: "The built-in dictionary the store uses; null: none." }),
    checks_genres: z.boolean().meta({
      description:
        "Whether submission refuses a release whose genre this store cannot name (a ddex store with a dictionary).",
    }),
    genres: z.array(
      z.object({
        genre: z.string(),
        name: z.string(),
        store_genre: z.string().nullable(),
        from: From,
      }),
    ),
    roles: z.array(
      z.object({
        role: z.string(),
        ddex_role: z.string(),
        store_role: z.string().nullable(),
        from: From,
      }),
    ),
  })
  .meta({ id: "StoreDictionary" });

const DictionaryPatch = z
  .strictObject({
    dictionary: z.string().nullable().optional().meta({
      description: "apple-music, amazon-music or beatport; null: no dictionary.",
    }),
    genres: z.record(z.string(), z.string().nullable()).optional().meta({
      description: "Backline genre code → one of the dictionary's genres; null removes the override.",
    }),
    roles: z.record(z.string(), z.string().nullable()).optional().meta({
      description: "Backline contributor role → the store's name for it; null removes the override.",
    }),
  })
  .meta({ id: "StoreDictionaryPatch" });

const refused = (what: string) =>
  new HttpError(
    403,
    "insufficient_role",
    `${what} needs platform staff with the admin role: stores belong to the installation.`,
  );

export function dictionarySpecs(options: {
  db: Db;
  isPlatformAdmin: (request: FastifyRequest) => boolean;
}): AnyAdminRoute[] {
  const { db, isPlatformAdmin } = options;
  return [
    adminRoute({
      method: "GET",
      path: "/dictionaries",
      operationId: "listDictionaries",
      summary: "The built-in store dictionaries (platform staff)",
      description:
        "Each store's genre list and role names as Backline ships them, with the published list each was transcribed from.",
      tag: "Stores",
      staffRole: "platform",
      response: {
        status: 200,
        description: "Every built-in dictionary.",
        schema: z.object({ data: z.array(Dictionary) }).meta({ id: "Dictionaries" }),
      },
      handler: async ({ request }) => {
        if (!isPlatformAdmin(request)) throw refused("Reading the store dictionaries");
        return { data: dictionaries() };
      },
    }),
    adminRoute({
      method: "GET",
      path: "/stores/{code}/dictionary",
      operationId: "getStoreDictionary",
      summary: "A store's dictionary and every mapping (platform staff)",
      description:
        "Every Backline genre with the store genre it goes as (from the dictionary, an override, or none), and every contributor role.",
      tag: "Stores",
      staffRole: "platform",
      params: z.object({ code: STORE_CODE }),
      response: { status: 200, description: "The store's dictionary.", schema: StoreDictionary },
      errors: [404],
      handler: async ({ request, params }) => {
        if (!isPlatformAdmin(request)) throw refused("Reading a store's dictionary");
        const view = await storeDictionary(db, params.code);
        if (!view) throw new HttpError(404, "not_found", `no store ${params.code}`, "code");
        return view;
      },
    }),
    adminRoute({
      method: "PATCH",
      path: "/stores/{code}/dictionary",
      operationId: "updateStoreDictionary",
      summary: "Choose a store's dictionary, or override its mappings (platform staff)",
      description:
        "What `backline stores dictionary` does. Only a store delivering through ddex (409 not_ddex otherwise). " +
        "An unknown dictionary, genre or role, or a store genre the dictionary lacks, is 422 invalid_dictionary naming each field; nothing changes.",
      tag: "Stores",
      staffRole: "platform",
      params: z.object({ code: STORE_CODE }),
      body: DictionaryPatch,
      response: { status: 200, description: "The store's dictionary as it is now.", schema: StoreDictionary },
      errors: [404, 409, 422],
      handler: async ({ request, params, body }) => {
        if (!isPlatformAdmin(request)) throw refused("Changing a store's dictionary");
        try {
          return await updateStoreDictionary(db, params.code, body);
        } catch (error) {
          if (!(error instanceof DictionaryError)) throw error;
          if (error.status === 404) throw new HttpError(404, "not_found", error.message, "code");
          if (error.errors.length > 0)
            throw new FieldsError(error.status, error.code, error.message, error.errors);
          throw new HttpError(error.status, error.code, error.message);
        }
      },
    }),
  ];
}
