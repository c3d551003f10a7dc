import type { Db } from "../db/db.ts";
import { bulkWorkMem } from "../db/memory.ts";
import { count, timestamp } from "../http/formats.ts";
import { reverseRollups } from "./analytics.ts";
import { findImport, type ImportReport } from "./import.ts";

/**
 * Voiding a royalty import (docs/royalties.md, "Voiding an import"): the import with the wrong
 * file, period or mapping leaves every total. Its lines stay, for audit, each answered by a
 * reversing line (the same line with units and amounts negated, reverses_line_id naming it), and
 * the reversing lines are rolled up as the lines were — so every total and analytics figure
 * returns exactly to what it was without the import, in numeric arithmetic, and nothing is deleted
 * or changed in place. In one transaction with the import's status (voided, with the reason), the
 * royalties.voided event and a notification for each account it had credited. The same file (or a
 * corrected one) can then be imported again: only completed imports count as duplicates.
 */

export type VoidErrorCode = "not_found" | "already_voided" | "not_voidable" | "reason_required";

export const VOID_ERROR_STATUS: Record<VoidErrorCode, number> = {
  not_found: 404,
  already_voided: 409,
  not_voidable: 409,
  reason_required: 400,
};

export class VoidError extends Error {
  readonly code: VoidErrorCode;

  constructor(code: VoidErrorCode, message: string) {
    super(message);
    this.name = new.target.name;
    this.code = code;
  }
}

interface AccountTotals {
  account_id: string;
  currency: string;
  lines: string;
  units: string;
  gross: string;
  fees: string;
  net: string;
}

export async function voidImport(
  db: Db,
  importId: string,
  options: { reason: string; via: "cli" | "admin_api"; tenantId?: string | undefined },
): Promise<ImportReport> {
  const reason = options.reason.trim();
  if (reason === "")
    throw new VoidError("reason_required", "a void needs a reason: it is recorded and shown");
  if (reason.length > 2000)
    throw new VoidError("reason_required", "the reason is longer than 2000 characters");
  return db.asService(async (tx) => {
    // Locked: an import is voided once, also by two operators at the same moment.
    const found = (
      await tx.query<{ status: string; tenant_id: string; voided_at: Date | null }>(
        `select status, tenant_id, voided_at from internal.royalty_imports
         where id = $1 and ($2::uuid is null or tenant_id = $2::uuid) for update`,
        [importId, options.tenantId ?? null],
      )
    ).rows[0];
    if (!found) throw new VoidError("not_found", `no royalty import ${importId}`);
    if (found.status === "voided") {
      const at = timestamp(found.voided_at);
      throw new VoidError("already_voided", `royalty import ${importId} was voided already (${at})`);
    }
    if (found.status !== "completed") {
      throw new VoidError(
        "not_voidable",
        `royalty import ${importId} is ${found.status}: it counted nothing, so there is nothing to void`,
      );
    }
    await tx.query(
      `update internal.royalty_imports set status = 'voided', voided_at = now(), void_reason = $2, voided_via = $3
       where id = $1`,
      [importId, reason, options.via],
    );
    // Every line of the import, answered by its reversal (matched or not: the import nets to zero).
    await tx.query(
      `insert into internal.royalty_lines (import_id, tenant_id, account_id, release_id, track_id, line_number,
         reporting_period, period_start, period_end, store, territory, upc, isrc, usage_type, units, gross, fees, net,
         currency, reverses_line_id)
       select import_id, tenant_id, account_id, release_id, track_id, line_number, reporting_period, period_start,
         period_end, store, territory, upc, isrc, usage_type, -units, -gross, -fees, -net, currency, id
       from internal.royalty_lines where import_id = $1 and reverses_line_id is null
       order by id`,
      [importId],
    );
    await reverseRollups(tx, importId, bulkWorkMem(db.kind));
    // And what the import had allocated to payees, fees and recoupment is reversed in the ledger.
    await tx.query("select internal.reverse_allocation($1)", [importId]);

    const report = (await findImport(tx, importId)) as ImportReport;
    // What each account no longer has, per currency, as the import had counted it.
    const perAccount = (
      await tx.query<AccountTotals>(
        `select account_id, currency, count(*)::text as lines, (-sum(units))::text as units,
           trim_scale(-sum(gross))::text as gross, trim_scale(-sum(fees))::text as fees, trim_scale(-sum(net))::text as net
         from internal.royalty_lines where import_id = $1 and reverses_line_id is not null and account_id is not null
         group by account_id, currency order by account_id, currency`,
        [importId],
      )
    ).rows;
    const accounts = new Map<string, AccountTotals[]>();
    for (const row of perAccount)
      accounts.set(row.account_id, [...(accounts.get(row.account_id) ?? []), row]);
    for (const [accountId, rows] of accounts) {
      const totals = rows.map((r) => ({
        currency: r.currency,
        lines: count(r.lines),
        units: count(r.units),
        gross: r.gross,
        fees: r.fees,
        net: r.net,
      }));
      const lines = totals.reduce((n, t) => n + t.lines, 0);
      const object = {
        id: importId,
        object: "royalty_import",
        status: "voided",
        format: report.format,
        store: report.store,
        reporting_period: report.reporting_period,
        period_from: report.period_from,
        period_to: report.period_to,
        void_reason: reason,
        voided_at: report.voided_at,
        lines,
        totals,
      };
      await tx.query(
        `insert into internal.events (tenant_id, account_id, type, data)
         values ($1, $2, 'royalties.voided', jsonb_build_object('object', $3::jsonb))`,
        [found.tenant_id, accountId, JSON.stringify(object)],
      );
      const from = report.period_from?.slice(0, 7);
      const to = report.period_to?.slice(0, 7);
      const summary = totals.map((t) => `${t.net} ${t.currency}`).join(", ");
      await tx.query("select internal.notify_members($1, 'royalties.voided', $2, $3, $4::jsonb)", [
        accountId,
        "Royalties withdrawn",
        `${lines} royalty line${lines === 1 ? "" : "s"} for ${from}${to && to !== from ? ` to ${to}` : ""} no longer count (${summary} net): ${reason}`,
        JSON.stringify({ import_id: importId, period_from: report.period_from, period_to: report.period_to }),
      ]);
    }
    return report;
  });
}
