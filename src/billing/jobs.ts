import type { Logger } from "pino";
import type { Db } from "../db/db.ts";
import { enqueue } from "../jobs/queue.ts";
import type { Handlers } from "../jobs/worker.ts";
import { getIssuer, issueDueInvoices, previousMonth } from "./invoices.ts";

/**
 * The monthly invoice run (docs/operator.md, "Plans and invoices"): the worker's recurring job
 * `invoices.monthly` (one row, dedupe key `invoices-monthly`, so one run at a time across every
 * worker process) issues last month's invoice for every tenant with a plan that has none yet,
 * then is queued again for the first of next month, 06:00 UTC. It is queued to run at once when
 * a worker starts, so a month missed while no worker ran is caught up; issuing is idempotent (a
 * month is invoiced once). Nothing is issued until the installation's legal details are set.
 */
export const INVOICE_JOB_KIND = "invoices.monthly";
const DEDUPE = "invoices-monthly";

/** The first of the month after `now`'s, 06:00 UTC. */
export function nextInvoiceRun(now: Date = new Date()): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1, 6, 0, 0));
}

export function invoiceHandlers(db: Db, logger?: Pick<Logger, "info" | "warn" | "error">): Handlers {
  return {
    [INVOICE_JOB_KIND]: async () => {
      if (await getIssuer(db)) {
        const result = await issueDueInvoices(db, previousMonth(), "system:invoices.monthly");
        if (result.issued.length > 0 || result.failed.length > 0)
          logger?.info(
            { month: result.month, issued: result.issued, failed: result.failed },
            "monthly invoices issued",
          );
        for (const f of result.failed) logger?.warn(f, "a tenant's invoice was not issued");
      }
      return nextInvoiceRun();
    },
  };
}

/** Makes sure the recurring job exists (at a worker's start; idempotent across processes). */
export async function scheduleInvoices(db: Db): Promise<void> {
  await db.asService(async (tx) => {
    await enqueue(tx, INVOICE_JOB_KIND, {}, { dedupeKey: DEDUPE });
  });
}
