import { createHash } from "node:crypto";
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { Db } from "../db/db.ts";
import { HttpError } from "../http/problem.ts";

/**
 * A tenant's brand files (docs/portal.md, "Branding"), kept in internal.brand_assets:
 *
 * - `POST /admin/v1/settings/logo` (a tenant admin; the image as the body, PNG, JPEG or WebP, at
 *   most 1 MiB, 16–4096 px a side) checks the bytes with sharp (what they are, never what the
 *   Content-Type says), stores them, and points the branding's `logo_url` at
 *   `<PUBLIC_URL>/brand/<tenant>/logo?v=<digest>`, so the console, the portal and every e-mail
 *   show it. A later `logo_url` (another address, or null) replaces it and the stored file goes.
 * - `GET /brand/<tenant>/logo` and `GET /brand/<tenant>/custom.css` answer anyone (a logo and a
 *   style sheet are public by nature): cached for five minutes, and the portal names them with a
 *   digest so a change shows at once.
 */

export const LOGO_MAX_BYTES = 1024 * 1024;
export const LOGO_TYPES = ["image/png", "image/jpeg", "image/webp"];
const FORMAT_TYPES: Record<string, string> = { png: "image/png", jpeg: "image/jpeg", webp: "image/webp" };

export const brandLogoPath = (tenantId: string) => `/brand/${tenantId}/logo`;

/** The custom CSS's address for the portal, with a digest of its text; undefined without any. */
export function customCssPath(tenantId: string, css: string | null | undefined): string | undefined {
  if (!css) return undefined;
  return `/brand/${tenantId}/custom.css?v=${createHash("sha256").update(css).digest("hex").slice(0, 12)}`;
}

// SVG (or any XML) is refused before it is decoded: served from this origin it could run script.
const LOOKS_LIKE_MARKUP = /^(\uFEFF)?\s*</;

async function inspectLogo(bytes: Buffer): Promise<{ contentType: string; width: number; height: number }> {
  if (LOOKS_LIKE_MARKUP.test(bytes.subarray(0, 256).toString("utf8"))) {
    throw new HttpError(
      415,
      "logo_format",
      "The logo is SVG or other markup, which can carry script: send a PNG, JPEG or WebP.",
      "logo",
    );
  }
  const sharp = (await import("sharp")).default;
  let meta: Awaited<ReturnType<ReturnType<typeof sharp>["metadata"]>>;
  try {
    meta = await sharp(bytes, { limitInputPixels: 4096 * 4096 }).metadata();
  } catch {
    throw new HttpError(
      422,
      "logo_unreadable",
      "The file is not an image this server can read: send a PNG, JPEG or WebP.",
      "logo",
    );
  }
  const contentType = FORMAT_TYPES[meta.format ?? ""];
  if (!contentType) {
    throw new HttpError(
      415,
      "logo_format",
      `The logo is ${meta.format ?? "an unknown format"}: send a PNG, JPEG or WebP (SVG is not accepted: it can carry script).`,
      "logo",
    );
  }
  const width = meta.width ?? 0;
  const height = meta.height ?? 0;
  if (width < 16 || height < 16 || width > 4096 || height > 4096) {
    throw new HttpError(
      422,
      "logo_dimensions",
      `The logo is ${width}×${height} pixels: each side must be 16 to 4096 pixels.`,
      "logo",
    );
  }
  return { contentType, width, height };
}

/** Stores a tenant's logo and points its branding at it; answers the new logo_url. */
export async function saveLogo(db: Db, tenantId: string, bytes: Buffer, publicUrl: string): Promise<string> {
  if (bytes.length === 0)
    throw new HttpError(400, "invalid_request", "Send the logo's bytes as the request body.", "logo");
  if (bytes.length > LOGO_MAX_BYTES) {
    throw new HttpError(
      413,
      "payload_too_large",
      `The logo is larger than ${LOGO_MAX_BYTES} bytes (1 MiB).`,
      "logo",
    );
  }
  const { contentType, width, height } = await inspectLogo(bytes);
  const sha256 = createHash("sha256").update(bytes).digest("hex");
  const url = `${publicUrl.replace(/\/+$/, "")}${brandLogoPath(tenantId)}?v=${sha256.slice(0, 12)}`;
  await db.asService(async (tx) => {
    await tx.query(
      `insert into internal.brand_assets (tenant_id, kind, content_type, data, sha256, width, height)
       values ($1, 'logo', $2, $3, $4, $5, $6)
       on conflict (tenant_id, kind) do update set content_type = excluded.content_type, data = excluded.data,
         sha256 = excluded.sha256, width = excluded.width, height = excluded.height, created_at = now()`,
      [tenantId, contentType, bytes, sha256, width, height],
    );
    await tx.query(
      `insert into internal.organization_settings (tenant_id, logo_url) values ($1, $2)
       on conflict (tenant_id) do update set logo_url = excluded.logo_url, updated_at = now()`,
      [tenantId, url],
    );
  });
  return url;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function tenantParam(request: FastifyRequest): string {
  const id = (request.params as { tenant?: string }).tenant ?? "";
  if (!UUID.test(id)) throw new HttpError(404, "not_found", "No such brand file.");
  return id.toLowerCase();
}

const PUBLIC_FILE_HEADERS = {
  "cache-control": "public, max-age=300",
  "x-content-type-options": "nosniff",
  "cross-origin-resource-policy": "cross-origin",
  "content-security-policy": "default-src 'none'",
};

/** The public routes: the logo's bytes and the custom CSS. */
export async function brandAssetRoutes(app: FastifyInstance, options: { db: Db }): Promise<void> {
  const { db } = options;
  app.get("/brand/:tenant/logo", async (request, reply) => {
    const tenantId = tenantParam(request);
    const row = (
      await db.asService(
        (tx) =>
          tx.query<{ content_type: string; data: Buffer; sha256: string }>(
            "select content_type, data, sha256 from internal.brand_assets where tenant_id = $1 and kind = 'logo'",
            [tenantId],
          ),
        { readOnly: true },
      )
    ).rows[0];
    if (!row) throw new HttpError(404, "not_found", "This tenant has no uploaded logo.");
    const etag = `"${row.sha256.slice(0, 32)}"`;
    if (request.headers["if-none-match"] === etag)
      return reply.status(304).headers(PUBLIC_FILE_HEADERS).send();
    return reply
      .headers({ ...PUBLIC_FILE_HEADERS, etag })
      .type(row.content_type)
      .send(Buffer.from(row.data));
  });
  app.get("/brand/:tenant/custom.css", async (request, reply) => {
    const tenantId = tenantParam(request);
    const css = (
      await db.asService(
        (tx) =>
          tx.query<{ custom_css: string | null }>(
            "select custom_css from internal.organization_settings where tenant_id = $1",
            [tenantId],
          ),
        { readOnly: true },
      )
    ).rows[0]?.custom_css;
    if (!css) throw new HttpError(404, "not_found", "This tenant has no custom CSS.");
    return reply.headers(PUBLIC_FILE_HEADERS).type("text/css; charset=utf-8").send(css);
  });
}
