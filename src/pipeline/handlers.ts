import type { Db } from "../db/db.ts";
import type { Handlers } from "../jobs/worker.ts";
import { reviewRelease } from "./review.ts";

/** The operator backend's job handlers by kind (docs/operator.md). */
export function pipelineHandlers(db: Db): Handlers {
  return {
    "release.review": async (job) => {
      await reviewRelease(db, String(job.payload.release_id));
    },
  };
}
