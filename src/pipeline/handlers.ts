import type { Db } from "../db/db.ts";
import type { Handlers } from "../jobs/worker.ts";
import { deliverRelease, deliveryLive, processTakedown, redeliverRelease, sendDelivery } from "./delivery.ts";
import { processOacRequest } from "./oac.ts";
import { reviewRelease } from "./review.ts";

/** The operator backend's job handlers by kind (docs/operator.md). */
export function pipelineHandlers(db: Db): Handlers {
  const id = (value: unknown) => String(value);
  return {
    "release.review": async (job) => {
      await reviewRelease(db, id(job.payload.release_id));
    },
    "release.deliver": async (job) => deliverRelease(db, id(job.payload.release_id)),
    "release.update_delivery": async (job) => redeliverRelease(db, id(job.payload.release_id)),
    "delivery.send": async (job, ctx) => sendDelivery(db, id(job.payload.delivery_id), ctx.signal),
    "delivery.live": async (job) => {
      await deliveryLive(db, id(job.payload.delivery_id));
    },
    "takedown.process": async (job) => processTakedown(db, id(job.payload.takedown_request_id)),
    "oac.request": async (job) => processOacRequest(db, id(job.payload.oac_request_id)),
  };
}
