import type { ImportProgress, ImportReport, ImportResult } from "./import.ts";

/**
 * The operator's words for imports (`backline royalties ...`): a progress bar for a terminal, a
 * JSON line per progress step for machines, and the import report as text.
 */

export function progressBar(p: ImportProgress, width = 30): string {
  const share = p.totalBytes > 0 ? Math.min(1, p.bytes / p.totalBytes) : 1;
  const filled = Math.round(share * width);
  return `[${"#".repeat(filled)}${"-".repeat(width - filled)}] ${(share * 100).toFixed(0).padStart(3)}%  ${p.lines.toLocaleString("en")} lines`;
}

export function progressJson(p: ImportProgress): string {
  return JSON.stringify({ event: "progress", bytes: p.bytes, total_bytes: p.totalBytes, lines: p.lines });
}

export function reportText(r: ImportReport): string {
  const out = [
    `Import ${r.id} (${r.format}${r.store ? `, store ${r.store}` : ""}${r.file_name ? `, ${r.file_name}` : ""}): ${r.status}`,
    `  lines ${r.lines_total}: ${r.lines_matched} matched, ${r.lines_unmatched} unmatched, ${r.lines_malformed} malformed`,
  ];
  if (r.status === "voided") {
    out.push(
      `  voided ${r.voided_at} (${r.voided_via}): ${r.void_reason}; its lines no longer count in any total`,
    );
  }
  if (r.period_from) out.push(`  period ${r.period_from} to ${r.period_to}`);
  for (const t of r.totals) {
    out.push(
      `  ${t.currency}: ${t.lines} lines, ${t.units} units, gross ${t.gross}, fees ${t.fees}, net ${t.net}`,
    );
  }
  if (r.account_ids.length) out.push(`  accounts: ${r.account_ids.join(", ")}`);
  if (r.unmatched.length) {
    out.push("  unmatched (ambiguous first, then most lines first):");
    for (const u of r.unmatched.slice(0, 20)) {
      // Reports recorded before the reason existed have none.
      const why = u.reason === "ambiguous" ? "  ambiguous: on delivered releases of several accounts" : "";
      out.push(`    ISRC ${u.isrc ?? "-"}  UPC ${u.upc ?? "-"}  ${u.lines} lines, ${u.units} units${why}`);
    }
    if (r.unmatched.length > 20) out.push(`    ... ${r.unmatched.length - 20} more (--json lists up to 100)`);
  }
  for (const w of r.warnings) {
    const where = w.line === null ? "" : ` line ${w.line}${w.lines > 1 ? ` (and ${w.lines - 1} more)` : ""}:`;
    out.push(`  warning:${where} ${w.message}`);
  }
  for (const e of r.errors) out.push(`  line ${e.line}: ${e.message}`);
  if (r.lines_malformed > r.errors.length)
    out.push(`  ... ${r.lines_malformed - r.errors.length} more malformed lines`);
  return out.join("\n");
}

export function resultText(r: ImportResult): string {
  if (r.status === "duplicate") {
    return `Already imported: ${r.reason === "same_file" ? "the same file" : "the same lines"} as import ${r.existing.id} (${r.existing.completed_at}). Nothing was counted again.`;
  }
  if (r.status === "rejected") {
    return `${reportText(r.report)}\nNothing was imported: fix the lines above and import the file again.`;
  }
  return reportText(r.report);
}

/** What --json prints for a result: the report, with the outcome. */
export function resultJson(r: ImportResult): Record<string, unknown> {
  if (r.status === "duplicate") return { status: "duplicate", reason: r.reason, import: r.existing };
  return { status: r.status, import: r.report, ...(r.status === "completed" ? { seconds: r.seconds } : {}) };
}
