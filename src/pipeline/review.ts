import type { Db } from "../db/db.ts";
import type { Tx } from "../db/types.ts";
import { enqueue } from "../jobs/queue.ts";
import { OperatorError } from "./errors.ts";

/**
 * Review (docs/operator.md, "Review"): every submitted release gets the `release.review` job
 * (queued by the database when the status becomes submitted, through either interface). The job
 * moves it to in_review and runs the completeness checks (internal.release_problems): a release
 * with problems is rejected with them as its reason; a clean one is approved at once when the
 * tenant reviews automatically (settings.auto_review, as the development tenant does) or the
 * account is a sandbox; otherwise it waits in the review queue for the operator
 * (`backline releases review`). An approved release gets the `release.deliver` job.
 */

export interface Problem {
  param: string;
  code: string;
  message: string;
}

interface Reviewed {
  id: string;
  status: string;
  is_sandbox: boolean;
  auto_review: boolean;
}

/** What keeps the release from going to the stores (internal.release_problems): submit's and review's one list. */
export async function releaseProblems(tx: Tx, releaseId: string): Promise<Problem[]> {
  const r = await tx.query<{ problems: Problem[] | null }>(
    "select internal.release_problems($1) as problems",
    [releaseId],
  );
  return r.rows[0]?.problems ?? [];
}

function rejectionReason(problems: Problem[]): string {
  const text = `Automatic checks: ${problems.map((p) => p.message).join("; ")}`;
  return text.length > 2000 ? `${text.slice(0, 1997)}...` : text;
}

async function approve(tx: Tx, releaseId: string): Promise<void> {
  await tx.query("update public.releases set status = 'approved', status_reason = null where id = $1", [
    releaseId,
  ]);
  await enqueue(tx, "release.deliver", { release_id: releaseId }, { dedupeKey: releaseId });
}

/** The `release.review` job. Idempotent: a release no longer submitted (moved on, deleted) is left alone. */
export async function reviewRelease(
  db: Db,
  releaseId: string,
): Promise<"approved" | "rejected" | "in_review" | "skipped"> {
  return db.asService(async (tx) => {
    const release = (
      await tx.query<Reviewed>(
        `select r.id, r.status, a.is_sandbox, coalesce((t.settings ->> 'auto_review')::boolean, false) as auto_review
         from public.releases r
         join internal.accounts a on a.id = r.account_id
         join internal.tenants t on t.id = a.tenant_id
         where r.id = $1
         for update of r`,
        [releaseId],
      )
    ).rows[0];
    if (release?.status !== "submitted") return "skipped";
    await tx.query("update public.releases set status = 'in_review' where id = $1", [releaseId]);
    const problems = await releaseProblems(tx, releaseId);
    if (problems.length > 0) {
      await tx.query("update public.releases set status = 'rejected', status_reason = $2 where id = $1", [
        releaseId,
        rejectionReason(problems),
      ]);
      return "rejected";
    }
    if (release.auto_review || release.is_sandbox) {
      await approve(tx, releaseId);
      return "approved";
    }
    return "in_review";
  });
}

export class ReviewError extends OperatorError {}

/** The operator's decision on a release in review (or still waiting for its review job). */
export async function decideReview(
  db: Db,
  releaseId: string,
  decision: { approve: true } | { approve: false; reason: string },
  scope: { tenantId?: string } = {},
): Promise<{ id: string; status: string; status_reason: string | null }> {
  if (!decision.approve && decision.reason.trim() === "") {
    throw new ReviewError("reason_required", "a rejection needs a reason: the account sees it");
  }
  return db.asService(async (tx) => {
    const current = (
      await tx.query<{ status: string }>(
        `select r.status from public.releases r join internal.accounts a on a.id = r.account_id
         where r.id = $1 and ($2::uuid is null or a.tenant_id = $2::uuid) for update of r`,
        [releaseId, scope.tenantId ?? null],
      )
    ).rows[0];
    if (!current) throw new ReviewError("not_found", `no release ${releaseId}`);
    if (current.status !== "submitted" && current.status !== "in_review") {
      throw new ReviewError(
        "invalid_state",
        `release ${releaseId} is ${current.status}; only submitted and in_review releases are reviewed`,
      );
    }
    if (current.status === "submitted") {
      await tx.query("update public.releases set status = 'in_review' where id = $1", [releaseId]);
    }
    if (decision.approve) {
      const problems = await releaseProblems(tx, releaseId);
      if (problems.length > 0) {
        throw new ReviewError(
          "release_incomplete",
          `release ${releaseId} cannot be approved: ${problems.map((p) => p.message).join("; ")}`,
          problems,
        );
      }
      await approve(tx, releaseId);
    } else {
      await tx.query("update public.releases set status = 'rejected', status_reason = $2 where id = $1", [
        releaseId,
        decision.reason.trim(),
      ]);
    }
    return (
      await tx.query<{ id: string; status: string; status_reason: string | null }>(
        "select id, status, status_reason from public.releases where id = $1",
        [releaseId],
      )
    ).rows[0] as { id: string; status: string; status_reason: string | null };
  });
}

export interface QueuedRelease {
  id: string;
  tenant: string;
  account_id: string;
  title: string;
  artist_name: string | null;
  status: string;
  submitted_at: Date | null;
  /** A priority_review add-on was bought for it (migration 0051): it comes first. */
  priority: boolean;
  problems: Problem[];
}

/** The review queue: submitted and in-review releases, priority review first, then oldest first, with what the checks say now. */
export async function reviewQueue(db: Db, tenantId?: string): Promise<QueuedRelease[]> {
  return db.asService(
    async (tx) =>
      (
        await tx.query<QueuedRelease>(
          `select r.id, t.slug as tenant, r.account_id, r.title, r.artist_name, r.status, r.submitted_at,
                  exists (select 1 from internal.add_on_orders o where o.release_id = r.id
                    and o.effect = 'priority_review' and (o.expires_at is null or o.expires_at > now())) as priority,
                  coalesce(internal.release_problems(r.id), '[]'::jsonb) as problems
           from public.releases r
           join internal.accounts a on a.id = r.account_id
           join internal.tenants t on t.id = a.tenant_id
           where r.status in ('submitted', 'in_review') and ($1::uuid is null or t.id = $1::uuid)
           order by priority desc, r.submitted_at nulls last, r.id`,
          [tenantId ?? null],
        )
      ).rows,
    { readOnly: true },
  );
}
