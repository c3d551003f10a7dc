import { z } from "zod";
import { CONTRIBUTOR_ROLES, RELEASE_TYPES, WORLDWIDE } from "../../catalog/catalogue.ts";
import { route } from "../route.ts";

/** GET /rules: the validation catalogues, so clients can validate before they send. */

const Code = z.object({ code: z.string(), name: z.string() });

const Rules = z
  .object({
    object: z.literal("rules"),
    release_types: z.array(z.enum(RELEASE_TYPES)),
    release_statuses_on_create: z.array(z.enum(["draft", "pending"])),
    territories: z.array(Code).meta({ description: "ISO 3166-1 alpha-2 codes (and XK, Kosovo)." }),
    worldwide: z
      .literal(WORLDWIDE)
      .meta({ description: "The licensed_territories_include value for the world." }),
    stores: z.array(
      z.object({
        code: z.string(),
        name: z.string(),
        kind: z.enum(["dsp", "download", "ugc"]),
        offers_oac: z.boolean(),
      }),
    ),
    genres: z.array(Code),
    contributor_roles: z.array(z.enum(CONTRIBUTOR_ROLES)),
    release_lead_days: z
      .number()
      .int()
      .meta({ description: "Days between submission and the earliest release_date accepted." }),
    isrc_pattern: z.string(),
    upc_pattern: z.string(),
    max_tracks_on_single: z.number().int(),
    page_size: z.object({ default: z.number().int(), max: z.number().int() }),
  })
  .meta({ id: "Rules" });

export const ruleRoutes = [
  route({
    method: "GET",
    path: "/rules",
    operationId: "getRules",
    summary: "Validation catalogues",
    description:
      "Territories, stores, genres, release types, contributor roles, identifier formats and lead time.",
    tag: "Rules",
    scope: "catalog:read",
    response: { status: 200, description: "The catalogues.", schema: Rules },
    handler: async ({ services, read }) => {
      const catalogue = await services.catalogue.get();
      const leadDays = await read(
        async (tx) =>
          (await tx.query<{ days: number }>("select internal.release_lead_days() as days")).rows[0]?.days ??
          7,
      );
      return {
        body: {
          object: "rules",
          release_types: [...RELEASE_TYPES],
          release_statuses_on_create: ["draft", "pending"],
          territories: catalogue.territories,
          worldwide: WORLDWIDE,
          stores: catalogue.stores,
          genres: catalogue.genres,
          contributor_roles: [...CONTRIBUTOR_ROLES],
          release_lead_days: leadDays,
          isrc_pattern: "^[A-Z]{2}-?[A-Z0-9]{3}-?[0-9]{2}-?[0-9]{5}$",
          upc_pattern: "^[0-9]{12,14}$ with a GTIN check digit",
          max_tracks_on_single: 3,
          page_size: { default: 20, max: 100 },
        },
      };
    },
  }),
];
