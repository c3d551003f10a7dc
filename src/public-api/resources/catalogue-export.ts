import { z } from "zod";
import { Timestamp } from "../../http/formats.ts";
import { storagePathOf } from "../../storage/keys.ts";
import { route } from "../route.ts";
import { artistOut, ReleaseDetail, releaseDetail } from "./releases.ts";
import { ARTIST_COLUMNS, Artist } from "./schemas.ts";
import { columns, withDates } from "./sql.ts";

/**
 * GET /catalogue/export (docs/privacy.md, "The account's catalogue"): the account's whole
 * catalogue as one JSON document — every artist, every release as GET /releases/{id} answers it
 * (tracks, artists, artwork and audio with their checks), and where each current media file is in
 * /storage/v1 (bucket and path, for storage-js `createSignedUrl` or `download`). Read as the caller,
 * under row security, with the same serializers as the single reads.
 */

export const CATALOGUE_EXPORT_FORMAT = "backline.catalogue-export";

const MediaFile = z
  .object({
    asset_id: z.string(),
    kind: z.enum(["artwork", "audio"]),
    release_id: z.string(),
    track_id: z.string().nullable(),
    bucket: z.enum(["artwork", "audio"]).meta({ description: "The /storage/v1 bucket." }),
    path: z.string().meta({
      description:
        "The object's path in the bucket: `createSignedUrl(path)` or `download(path)` with storage-js.",
      example: "3f2b6a5e-8c1d-4e7a-9b0f-2a6c5d4e3f21/cover.jpg",
    }),
    content_type: z.string(),
    bytes: z.number().int().nullable(),
    sha256: z.string().nullable(),
  })
  .meta({ id: "CatalogueMediaFile" });

const CatalogueExport = z
  .object({
    format: z.literal(CATALOGUE_EXPORT_FORMAT),
    version: z.literal(1).meta({
      type: "integer",
      description: "The shape's version: a field may be added within a version, never removed or changed.",
    }),
    exported_at: Timestamp,
    account_id: z.string(),
    artists: z.array(Artist),
    releases: z.array(ReleaseDetail),
    media_files: z.array(MediaFile),
  })
  .meta({ id: "CatalogueExport", description: "An account's catalogue (docs/privacy.md)." });

interface FileRow {
  id: string;
  kind: "artwork" | "audio";
  release_id: string;
  track_id: string | null;
  object_key: string;
  content_type: string;
  bytes: string | number | null;
  sha256: string | null;
}

export const catalogueExportRoutes = [
  route({
    method: "GET",
    path: "/catalogue/export",
    operationId: "exportCatalogue",
    summary: "The account's whole catalogue, as one JSON document",
    description:
      "Every artist; every release with its tracks, artists, artwork and audio (as GET /releases/{id}); and where each " +
      "current media file is in /storage/v1 (bucket and path), to download with storage-js. Saved as a file by a " +
      "browser (Content-Disposition).",
    tag: "Releases",
    scope: "catalog:read",
    response: {
      status: 200,
      description: "The catalogue.",
      schema: CatalogueExport,
      headers: ["Content-Disposition"],
    },
    handler: async (ctx) => {
      const accountId = ctx.caller.accountId ?? "";
      const body = await ctx.read(async (tx) => {
        const artists = (
          await tx.query<Record<string, unknown>>(
            `select ${columns(ARTIST_COLUMNS)} from public.artist_profiles where account_id = $1 order by name, id`,
            [accountId],
          )
        ).rows.map((row) => artistOut(withDates(row, ["created_at", "updated_at"])));
        const ids = (
          await tx.query<{ id: string }>(
            "select id from public.releases where account_id = $1 order by created_at, id",
            [accountId],
          )
        ).rows;
        const releases: Record<string, unknown>[] = [];
        for (const { id } of ids) {
          const detail = await releaseDetail(tx, id);
          if (detail) releases.push(detail.body);
        }
        const files = (
          await tx.query<FileRow>(
            `select id, kind, release_id, track_id, object_key, content_type, bytes, sha256 from public.media_assets
              where account_id = $1 and status <> 'pending' and superseded_at is null order by release_id, kind, id`,
            [accountId],
          )
        ).rows.map((f) => {
          const [bucket, ...path] = storagePathOf(f.object_key).split("/");
          return {
            asset_id: f.id,
            kind: f.kind,
            release_id: f.release_id,
            track_id: f.track_id,
            bucket: bucket as "artwork" | "audio",
            path: path.join("/"),
            content_type: f.content_type,
            bytes: f.bytes === null ? null : Number(f.bytes),
            sha256: f.sha256,
          };
        });
        return {
          format: CATALOGUE_EXPORT_FORMAT,
          version: 1,
          exported_at: new Date().toISOString(),
          account_id: accountId,
          artists,
          releases,
          media_files: files,
        };
      });
      const day = new Date().toISOString().slice(0, 10);
      return {
        body,
        headers: { "content-disposition": `attachment; filename="backline-catalogue-${day}.json"` },
      };
    },
  }),
];
