import type { Db } from "../db/db.ts";
import { statementCsv } from "./statement-csv.ts";
import { statementPdf } from "./statement-pdf.ts";
import type { StatementDocument } from "./types.ts";

/**
 * A statement as a file: its CSV, or its PDF in the tenant's branding (display name, primary
 * colour, and the logo when it is PNG or JPEG — the PDF library reads no WebP). Named
 * `statement-<period>-<payee id's first 8>.{csv,pdf}`.
 */
export interface StatementFile {
  contentType: string;
  fileName: string;
  body: Buffer | string;
}

export async function statementFile(
  db: Db,
  tenantId: string,
  doc: StatementDocument,
  format: "csv" | "pdf",
): Promise<StatementFile> {
  const name = `statement-${doc.period}-${doc.payee.id.slice(0, 8)}`;
  if (format === "csv") {
    return { contentType: "text/csv; charset=utf-8", fileName: `${name}.csv`, body: statementCsv(doc) };
  }
  const brand = await db.asService(
    async (tx) => {
      const row = (
        await tx.query<{ name: string; color: string | null; logo: Buffer | null; logo_type: string | null }>(
          `select coalesce(o.display_name, t.name) as name, o.primary_color as color, b.data as logo,
           b.content_type as logo_type
         from internal.tenants t left join internal.organization_settings o on o.tenant_id = t.id
         left join internal.brand_assets b on b.tenant_id = t.id and b.kind = 'logo'
         where t.id = $1`,
          [tenantId],
        )
      ).rows[0];
      return {
        name: row?.name ?? doc.tenant_name,
        primaryColor: row?.color ?? null,
        logo:
          row?.logo && (row.logo_type === "image/png" || row.logo_type === "image/jpeg") ? row.logo : null,
      };
    },
    { readOnly: true },
  );
  return { contentType: "application/pdf", fileName: `${name}.pdf`, body: await statementPdf(doc, brand) };
}

/** The headers a statement file is answered with. */
export const fileHeaders = (file: StatementFile) => ({
  "content-type": file.contentType,
  "content-disposition": `attachment; filename="${file.fileName}"`,
});
