import type { Db } from "../db/db.ts";
import type { Handlers } from "../jobs/worker.ts";
import type { ObjectStore } from "../storage/driver.ts";
import { LocalMedia, type MediaSource } from "../storage/media.ts";
import { type UploadLimits, validateAsset } from "../storage/uploads.ts";
import { runTransferJob, TRANSFER_JOB_KIND } from "../transfer/job.ts";
import { ddexStore } from "./ddex/adapter.ts";
import {
  deliverRelease,
  deliveryLive,
  deliveryRemoved,
  processTakedown,
  redeliverRelease,
  sendDelivery,
} from "./delivery.ts";
import { processOacRequest } from "./oac.ts";
import { reviewRelease } from "./review.ts";
import { POLL_KIND, runStorePoll } from "./store-inbox.ts";

/** The operator backend's job handlers by kind (docs/operator.md). */
export function pipelineHandlers(
  db: Db,
  options: {
    media?: MediaSource;
    store?: ObjectStore;
    uploadLimits?: UploadLimits;
    ddexErncSchemaDir?: string | undefined;
  } = {},
): Handlers {
  const id = (value: unknown) => String(value);
  // The store adapters beside the built-in sandbox, by the name a store's settings.adapter gives.
  const adapters = { ddex: ddexStore(options.media ?? new LocalMedia(".backline/storage")) };
  return {
    "release.review": async (job) => {
      await reviewRelease(db, id(job.payload.release_id));
    },
    "release.deliver": async (job) => deliverRelease(db, id(job.payload.release_id)),
    "release.update_delivery": async (job) => redeliverRelease(db, id(job.payload.release_id)),
    "delivery.send": async (job, ctx) =>
      sendDelivery(db, id(job.payload.delivery_id), { signal: ctx.signal, adapters }),
    "delivery.live": async (job) => {
      await deliveryLive(db, id(job.payload.delivery_id));
    },
    "delivery.removed": async (job) => {
      await deliveryRemoved(
        db,
        id(job.payload.delivery_id),
        job.payload.by === "sandbox" ? "sandbox" : "store",
      );
    },
    "takedown.process": async (job) => processTakedown(db, id(job.payload.takedown_request_id)),
    "oac.request": async (job) => processOacRequest(db, id(job.payload.oac_request_id)),
    // A store's recurring poll of its answer and report folders (store-inbox.ts).
    [POLL_KIND]: async (job) =>
      runStorePoll(db, id(job.payload.store), { schemaDir: options.ddexErncSchemaDir }),
    // A catalogue transfer asked for through the public API (src/transfer/job.ts).
    [TRANSFER_JOB_KIND]: async (job) =>
      runTransferJob(db, id(job.payload.transfer_job_id), {
        lastAttempt: job.attempts >= job.max_attempts,
        // An archive's audio and artwork go into storage as uploads do.
        media:
          options.store && options.uploadLimits
            ? { store: options.store, limits: options.uploadLimits }
            : undefined,
      }),
    ...(options.store
      ? {
          "media.validate": async (job, ctx) => {
            await validateAsset(db, options.store as ObjectStore, id(job.payload.asset_id), ctx.signal);
          },
        }
      : {}),
  };
}
