import { z } from "zod";
import { asDbError } from "../../db/errors.ts";
import { prepared } from "../../db/prepared.ts";
import type { Tx } from "../../db/types.ts";
import { Timestamp } from "../../http/formats.ts";
import { ApiError, notFound } from "../errors.ts";
import {
  conditionalGet,
  ifMatchOf,
  preconditionFailed,
  splitVersion,
  tagged,
  VERSION_SQL,
  versionIn,
  versionsToMatch,
} from "../etag.ts";
import { Id, listOf, Pagination, page, route } from "../route.ts";
import { artistOut } from "./releases.ts";
import { ARTIST_COLUMNS, Artist, ArtistCreate, ArtistUpdate, checkArtistCodes } from "./schemas.ts";
import { columns, countAndPage, insertRow, updateRow } from "./sql.ts";

/** Artist profiles (seed 001): the rows of /rest/v1/artist_profiles; and Official Artist Channel requests. */

const withId = z.object({ id: Id }).strict();

const ARTIST_BY_ID = prepared(
  `select ${columns(ARTIST_COLUMNS)}, ${VERSION_SQL} from public.artist_profiles where id = $1`,
);

const OacRequest = z
  .object({
    id: Id,
    object: z.literal("oac_request"),
    artist_id: Id,
    store: z.string().meta({ description: "The store asked, youtube_music." }),
    channel_url: z.string().nullable(),
    note: z.string().nullable(),
    status: z
      .enum(["requested", "processing", "approved", "rejected", "cancelled"])
      .meta({ description: "requested, then processing, then approved or rejected by the operator." }),
    status_reason: z.string().nullable(),
    created_at: Timestamp,
    updated_at: Timestamp,
    completed_at: Timestamp.nullable(),
  })
  .meta({ id: "OacRequest" });

const OacCreate = z
  .object({
    channel_url: z
      .url({ protocol: /^https$/ })
      .max(500)
      .optional()
      .meta({ description: "The artist's existing channel, to be merged into the official one." }),
    note: z.string().max(2000).optional(),
  })
  .strict()
  .meta({ id: "OacRequestCreate" });

const OAC_COLUMNS = [
  "id",
  "artist_id",
  "store",
  "channel_url",
  "note",
  "status",
  "status_reason",
  "created_at",
  "updated_at",
  "completed_at",
];

async function artistExists(tx: Tx, id: string): Promise<boolean> {
  return ((await tx.query("select 1 from public.artist_profiles where id = $1", [id])).rowCount ?? 0) > 0;
}

const oacOut = (row: Record<string, unknown>) => ({ id: row.id, object: "oac_request", ...row });

export const artistRoutes = [
  route({
    method: "GET",
    path: "/artists",
    operationId: "listArtists",
    summary: "List artists",
    description: "The account's artist profiles, by name.",
    tag: "Artists",
    scope: "catalog:read",
    query: Pagination,
    response: { status: 200, description: "A page of artists.", schema: listOf(Artist, "ArtistList") },
    handler: async ({ query, read }) => {
      const listed = await read((tx) =>
        countAndPage<Record<string, unknown>>(
          tx,
          {
            from: "public.artist_profiles",
            where: "true",
            order: "name, id",
            columns: columns(ARTIST_COLUMNS),
          },
          [],
          query,
        ),
      );
      return { body: page(listed.rows.map(artistOut), query, listed) };
    },
  }),

  route({
    method: "POST",
    path: "/artists",
    operationId: "createArtist",
    summary: "Create an artist profile",
    tag: "Artists",
    scope: "catalog:write",
    body: ArtistCreate,
    check: checkArtistCodes,
    response: { status: 201, description: "The new artist.", schema: Artist },
    errors: [413, 415, 422],
    handler: async ({ body, write }) => {
      const row = await write((tx) =>
        insertRow<Record<string, unknown>>(tx, "public.artist_profiles", body, ARTIST_COLUMNS),
      );
      return { status: 201, body: artistOut(row) };
    },
  }),

  route({
    method: "GET",
    path: "/artists/{id}",
    operationId: "getArtist",
    summary: "Get an artist profile",
    tag: "Artists",
    scope: "catalog:read",
    params: withId,
    response: { status: 200, description: "The artist.", schema: Artist },
    etag: true,
    errors: [404],
    handler: async ({ params, read, request }) => {
      const found = await read(
        async (tx) => (await tx.query<Record<string, unknown>>(ARTIST_BY_ID, [params.id])).rows[0],
      );
      if (!found) throw notFound("artist", params.id);
      const { version, row } = splitVersion(found);
      return conditionalGet(request, version, artistOut(row));
    },
  }),

  route({
    method: "PATCH",
    path: "/artists/{id}",
    operationId: "updateArtist",
    summary: "Update an artist profile",
    description: "Names, bio, platform links and store identifiers.",
    tag: "Artists",
    scope: "catalog:write",
    params: withId,
    body: ArtistUpdate,
    check: checkArtistCodes,
    response: { status: 200, description: "The updated artist.", schema: Artist },
    etag: true,
    errors: [404, 413, 415, 422],
    handler: async ({ params, body, write, request }) => {
      const versions = versionsToMatch(ifMatchOf(request));
      const updated = await write(async (tx) => {
        const row = await updateRow<Record<string, unknown>>(
          tx,
          "public.artist_profiles",
          params.id,
          body,
          ARTIST_COLUMNS,
          undefined,
          { versions },
        );
        if (!row && versions && (await artistExists(tx, params.id))) {
          throw preconditionFailed("artist", params.id);
        }
        return row;
      });
      if (!updated) throw notFound("artist", params.id);
      const { version, row } = splitVersion(updated);
      const out = artistOut(row);
      return tagged(version, out);
    },
  }),

  route({
    method: "DELETE",
    path: "/artists/{id}",
    operationId: "deleteArtist",
    summary: "Delete an artist not linked to a release",
    description: "An artist that a release names answers 409 artist_in_use.",
    tag: "Artists",
    scope: "catalog:write",
    params: withId,
    response: {
      status: 200,
      description: "The artist is gone.",
      schema: z
        .object({ id: Id, object: z.literal("artist"), deleted: z.literal(true) })
        .meta({ id: "DeletedArtist" }),
    },
    etag: true,
    errors: [404, 409],
    handler: async ({ params, write, request }) => {
      const versions = versionsToMatch(ifMatchOf(request));
      const n = await write(async (tx) => {
        try {
          const deleted = versions
            ? await tx.query(`delete from public.artist_profiles where id = $1 and ${versionIn(2)}`, [
                params.id,
                versions,
              ])
            : await tx.query("delete from public.artist_profiles where id = $1", [params.id]);
          if (deleted.rowCount === 0 && versions && (await artistExists(tx, params.id))) {
            throw preconditionFailed("artist", params.id);
          }
          return deleted.rowCount;
        } catch (error) {
          const db = asDbError(error);
          if (db?.sqlstate === "23001" || db?.sqlstate === "23503") {
            throw new ApiError(
              409,
              "artist_in_use",
              `Artist ${params.id} is linked to a release and cannot be deleted.`,
            );
          }
          throw error;
        }
      });
      if (n === 0) throw notFound("artist", params.id);
      return { body: { id: params.id, object: "artist", deleted: true } };
    },
  }),

  route({
    method: "POST",
    path: "/artists/{id}/oac-request",
    operationId: "requestOfficialArtistChannel",
    summary: "Request an Official Artist Channel",
    description:
      "Asks YouTube Music for an Official Artist Channel for the artist. Needs a delivered release of the " +
      "artist (else 409 oac_not_eligible); one open request per artist (else 409 oac_already_requested).",
    tag: "Artists",
    scope: "catalog:write",
    params: withId,
    body: OacCreate,
    bodyOptional: true,
    response: { status: 201, description: "The request.", schema: OacRequest },
    errors: [404, 409, 413, 415, 422],
    handler: async ({ params, body, write }) => {
      const row = await write(async (tx) => {
        const artist = await tx.query("select 1 from public.artist_profiles where id = $1", [params.id]);
        if (artist.rowCount === 0) throw notFound("artist", params.id);
        try {
          return await insertRow<Record<string, unknown>>(
            tx,
            "internal.oac_requests",
            { artist_id: params.id, channel_url: body.channel_url, note: body.note },
            OAC_COLUMNS,
          );
        } catch (error) {
          const db = asDbError(error);
          if (db?.sqlstate === "23505") {
            throw new ApiError(
              409,
              "oac_already_requested",
              "This artist already has an open channel request.",
            );
          }
          throw error;
        }
      });
      return { status: 201, body: oacOut(row) };
    },
  }),

  route({
    method: "GET",
    path: "/artists/{id}/oac-request",
    operationId: "getOfficialArtistChannelRequest",
    summary: "The artist's latest Official Artist Channel request",
    tag: "Artists",
    scope: "catalog:read",
    params: withId,
    response: { status: 200, description: "The latest request and its status.", schema: OacRequest },
    errors: [404],
    handler: async ({ params, read }) => {
      const row = await read(async (tx) => {
        const artist = await tx.query("select 1 from public.artist_profiles where id = $1", [params.id]);
        if (artist.rowCount === 0) throw notFound("artist", params.id);
        return (
          await tx.query<Record<string, unknown>>(
            `select ${columns(OAC_COLUMNS)} from internal.oac_requests where artist_id = $1
             order by created_at desc, id limit 1`,
            [params.id],
          )
        ).rows[0];
      });
      if (!row) {
        throw new ApiError(
          404,
          "resource_missing",
          `Artist ${params.id} has no Official Artist Channel request.`,
        );
      }
      return { body: oacOut(row) };
    },
  }),
];
