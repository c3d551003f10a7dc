import { z } from "zod";
import { normaliseIsrc } from "../../catalog/identifiers.ts";
import { asDbError } from "../../db/errors.ts";
import { prepared } from "../../db/prepared.ts";
import type { Tx } from "../../db/types.ts";
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
import { findRelease, trackOut } from "./releases.ts";
import { checkTrack, TRACK_COLUMNS, Track, TrackCreate, type TrackInput, TrackUpdate } from "./schemas.ts";
import { columns, countAndPage, insertRow, updateRow } from "./sql.ts";
import { assetOut, currentMedia, TrackDetail } from "./uploads.ts";

/** Tracks of a release (seed 001): /rest/v1/tracks rows; they change only while their release is editable. */

const ofRelease = z.object({ id: Id }).strict();
const oneTrack = z.object({ id: Id, trackId: Id }).strict();

const TRACK_BY_ID = prepared(
  `select ${columns(TRACK_COLUMNS)}, ${VERSION_SQL} from public.tracks where id = $1 and release_id = $2`,
);

/** The track's database failures in the public API's words. */
async function asTrackWrite<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    const db = asDbError(error);
    if (db?.sqlstate === "23505" && db.constraint === "tracks_position") {
      throw new ApiError(
        409,
        "track_number_taken",
        "Another track of this release has that disc and track number.",
        {
          param: "track_number",
        },
      );
    }
    if (db?.sqlstate === "23505" && db.constraint === "tracks_release_isrc") {
      throw new ApiError(409, "duplicate_isrc", "Another track of this release has that ISRC.", {
        param: "isrc",
      });
    }
    if (db?.sqlstate === "BL006") throw new ApiError(409, "isrc_in_use", db.message, { param: "isrc" });
    throw error;
  }
}

async function trackExists(tx: Tx, releaseId: string, trackId: string): Promise<boolean> {
  const r = await tx.query("select 1 from public.tracks where id = $1 and release_id = $2", [
    trackId,
    releaseId,
  ]);
  return (r.rowCount ?? 0) > 0;
}

function normalised(body: TrackInput): TrackInput {
  return typeof body.isrc === "string" ? { ...body, isrc: normaliseIsrc(body.isrc) ?? body.isrc } : body;
}

async function nextTrackNumber(tx: Tx, releaseId: string, disc: number): Promise<number> {
  const r = await tx.query<{ n: number }>(
    "select coalesce(max(track_number), 0)::int + 1 as n from public.tracks where release_id = $1 and disc_number = $2",
    [releaseId, disc],
  );
  return r.rows[0]?.n ?? 1;
}

export const trackRoutes = [
  route({
    method: "GET",
    path: "/releases/{id}/tracks",
    operationId: "listTracks",
    summary: "List the tracks of a release",
    description: "In disc and track order.",
    tag: "Tracks",
    scope: "catalog:read",
    params: ofRelease,
    query: Pagination,
    response: { status: 200, description: "A page of tracks.", schema: listOf(Track, "TrackList") },
    errors: [404],
    handler: async ({ params, query, read }) => {
      const listed = await read(async (tx) => {
        await findRelease(tx, params.id);
        return countAndPage<Record<string, unknown>>(
          tx,
          {
            from: "public.tracks",
            where: "release_id = $1",
            order: "disc_number, track_number nulls last, created_at, id",
            columns: columns(TRACK_COLUMNS),
          },
          [params.id],
          query,
        );
      });
      return { body: page(listed.rows.map(trackOut), query, listed) };
    },
  }),

  route({
    method: "POST",
    path: "/releases/{id}/tracks",
    operationId: "createTrack",
    summary: "Add a track",
    description:
      "Adds a track to an editable release. track_number defaults to the next free number on the disc. " +
      "An ISRC identifies one recording: within the account it may recur only for the same title and version.",
    tag: "Tracks",
    scope: "catalog:write",
    params: ofRelease,
    body: TrackCreate,
    check: checkTrack,
    response: { status: 201, description: "The new track.", schema: Track },
    errors: [404, 409, 413, 415, 422],
    handler: async ({ params, body, write }) => {
      const row = await write(async (tx) => {
        // Locked: tracks added at once take the next numbers one after the other.
        await findRelease(tx, params.id, true);
        const values = normalised(body);
        const disc = typeof values.disc_number === "number" ? values.disc_number : 1;
        const trackNumber = values.track_number ?? (await nextTrackNumber(tx, params.id, disc));
        return asTrackWrite(() =>
          insertRow<Record<string, unknown>>(
            tx,
            "public.tracks",
            { ...values, track_number: trackNumber, release_id: params.id },
            TRACK_COLUMNS,
          ),
        );
      });
      return { status: 201, body: trackOut(row) };
    },
  }),

  route({
    method: "GET",
    path: "/releases/{id}/tracks/{trackId}",
    operationId: "getTrack",
    summary: "Get a track",
    tag: "Tracks",
    scope: "catalog:read",
    params: oneTrack,
    response: { status: 200, description: "The track, with its current audio upload.", schema: TrackDetail },
    etag: true,
    errors: [404],
    handler: async ({ params, read, request }) => {
      const found = await read(async (tx) => {
        const row = (await tx.query<Record<string, unknown>>(TRACK_BY_ID, [params.trackId, params.id]))
          .rows[0];
        return row
          ? { row, audio: (await currentMedia(tx, params.id)).audio.get(params.trackId) }
          : undefined;
      });
      if (!found) throw notFound("track", params.trackId);
      const { version, row } = splitVersion(found.row);
      return conditionalGet(request, version, {
        ...trackOut(row),
        audio: found.audio ? assetOut(found.audio) : null,
      });
    },
  }),

  route({
    method: "PATCH",
    path: "/releases/{id}/tracks/{trackId}",
    operationId: "updateTrack",
    summary: "Update a track",
    description:
      "Metadata, contributors and splits (shares total exactly 100) of a track of an editable release.",
    tag: "Tracks",
    scope: "catalog:write",
    params: oneTrack,
    body: TrackUpdate,
    check: checkTrack,
    response: { status: 200, description: "The updated track.", schema: Track },
    etag: true,
    errors: [404, 409, 413, 415, 422],
    handler: async ({ params, body, write, request }) => {
      const versions = versionsToMatch(ifMatchOf(request));
      const updated = await write(async (tx) => {
        const row = await asTrackWrite(() =>
          updateRow<Record<string, unknown>>(
            tx,
            "public.tracks",
            params.trackId,
            normalised(body),
            TRACK_COLUMNS,
            { column: "release_id", value: params.id },
            { versions },
          ),
        );
        if (!row && versions && (await trackExists(tx, params.id, params.trackId))) {
          throw preconditionFailed("track", params.trackId);
        }
        return row;
      });
      if (!updated) throw notFound("track", params.trackId);
      const { version, row } = splitVersion(updated);
      const out = trackOut(row);
      return tagged(version, out);
    },
  }),

  route({
    method: "DELETE",
    path: "/releases/{id}/tracks/{trackId}",
    operationId: "deleteTrack",
    summary: "Remove a track",
    tag: "Tracks",
    scope: "catalog:write",
    params: oneTrack,
    response: {
      status: 200,
      description: "The track is gone.",
      schema: z
        .object({ id: Id, object: z.literal("track"), deleted: z.literal(true) })
        .meta({ id: "DeletedTrack" }),
    },
    etag: true,
    errors: [404, 409],
    handler: async ({ params, write, request }) => {
      const versions = versionsToMatch(ifMatchOf(request));
      const n = await write(async (tx) => {
        const deleted = await tx.query(
          `delete from public.tracks where id = $1 and release_id = $2${versions ? ` and ${versionIn(3)}` : ""}`,
          versions ? [params.trackId, params.id, versions] : [params.trackId, params.id],
        );
        if (deleted.rowCount === 0 && versions && (await trackExists(tx, params.id, params.trackId))) {
          throw preconditionFailed("track", params.trackId);
        }
        return deleted.rowCount;
      });
      if (n === 0) throw notFound("track", params.trackId);
      return { body: { id: params.trackId, object: "track", deleted: true } };
    },
  }),
];
