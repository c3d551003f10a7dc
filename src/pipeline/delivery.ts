import { lockedStores } from "../add-ons/add-ons.ts";
import type { Db } from "../db/db.ts";
import type { Tx } from "../db/types.ts";
import { enqueue } from "../jobs/queue.ts";
import { OperatorError } from "./errors.ts";
import {
  adapterFor,
  type DeliveryAction,
  DeliveryConfigError,
  type DeliveryResult,
  type StoreAdapter,
  storeSettingsOf,
} from "./stores.ts";

/**
 * Delivery and takedown (docs/operator.md, "Delivery"). One delivery record per release, store
 * and action (internal.release_deliveries), each sent by its own `delivery.send` job, so a store
 * that fails is retried on its own while the others go on. The release follows its stores:
 * delivering -> delivered when every store has it -> live when every store has it live; a
 * takedown completes when every store has confirmed the removal (a takedown delivery goes
 * takedown_sent when its message reaches the store, taken_down when the store confirms it: the
 * sandbox store by itself, any other through its report, `reportDelivery`). Every step is
 * idempotent: a job that runs again after a crash finds the work done and moves on.
 */

interface Release {
  id: string;
  account_id: string;
  status: string;
  services: string[];
  is_sandbox: boolean;
  tenant_adapter: unknown;
}

async function lockRelease(tx: Tx, releaseId: string): Promise<Release | undefined> {
  return (
    await tx.query<Release>(
      `select r.id, r.account_id, r.status, r.services, a.is_sandbox, t.settings -> 'delivery_adapter' #>> '{}' as tenant_adapter
       from public.releases r join internal.accounts a on a.id = r.account_id join internal.tenants t on t.id = a.tenant_id
       where r.id = $1 for update of r`,
      [releaseId],
    )
  ).rows[0];
}

/** New delivery records (unless one is open for that store and action) and their send jobs. */
async function startDeliveries(
  tx: Tx,
  release: Pick<Release, "id" | "account_id">,
  stores: string[],
  action: DeliveryAction,
  correctionVersion: number | null = null,
): Promise<number> {
  let started = 0;
  for (const store of stores) {
    const inserted = await tx.query<{ id: string }>(
      `insert into internal.release_deliveries (release_id, account_id, store, action, correction_version)
       values ($1, $2, $3, $4, $5) on conflict do nothing returning id`,
      [release.id, release.account_id, store, action, correctionVersion],
    );
    const id = inserted.rows[0]?.id;
    if (id) {
      // The store rides along so a worker caps its sends per store (docs/operations.md).
      await enqueue(tx, "delivery.send", { delivery_id: id, store }, { dedupeKey: id });
      started++;
    }
  }
  return started;
}

/** `release.deliver`: an approved release goes to each of its stores (none named: every enabled store). */
export async function deliverRelease(db: Db, releaseId: string): Promise<void> {
  await db.asService(async (tx) => {
    const release = await lockRelease(tx, releaseId);
    if (release?.status !== "approved") return;
    const offered = (
      await tx.query<{ code: string }>(
        `select code from internal.stores where enabled and (cardinality($1::text[]) = 0 or code = any ($1::text[]))
         order by sort, code`,
        [release.services],
      )
    ).rows.map((s) => s.code);
    // A store an add-on unlocks goes only to releases that have that add-on (src/add-ons/add-ons.ts).
    const locked = await lockedStores(tx, releaseId);
    const stores = offered.filter((code) => !locked.has(code));
    await tx.query("update public.releases set status = 'delivering' where id = $1", [releaseId]);
    await startDeliveries(tx, release, stores, "insert");
    if (stores.length === 0) {
      await tx.query("update public.releases set status_reason = $2 where id = $1", [
        releaseId,
        offered.length > 0
          ? "Each of the release's stores is unlocked by an add-on it does not have; buy one, or name other stores, and deliver again."
          : "None of the release's stores is enabled; the operator must enable one and deliver again.",
      ]);
    }
  });
}

/** The release fields a metadata correction may change (internal.correct_release_metadata). */
export const CORRECTABLE_FIELDS = [
  "title",
  "version",
  "artist_name",
  "primary_genre",
  "secondary_genre",
  "genres",
  "label_name",
  "copyright",
  "copyright_year",
  "phonographic_copyright",
  "phonographic_year",
  "explicit",
  "language",
  "original_release_date",
] as const;

/** The correctable fields of a release row, as JSON (dates as YYYY-MM-DD whichever driver read them). */
export function correctableMetadata(release: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const field of CORRECTABLE_FIELDS) {
    const v = release[field];
    out[field] = v instanceof Date ? v.toISOString().slice(0, 10) : (v ?? null);
  }
  return out;
}

async function correctionVersion(tx: Tx, releaseId: string): Promise<number> {
  const r = await tx.query<{ version: number }>(
    "select version from internal.release_corrections where release_id = $1",
    [releaseId],
  );
  return r.rows[0]?.version ?? 0;
}

/**
 * `release.update_delivery`: a corrected release goes again to every store that has it — once per
 * correction: a store that already has (or is getting) an update of this correction is skipped,
 * so the job can run again after a crash without sending twice.
 */
export async function redeliverRelease(db: Db, releaseId: string): Promise<void> {
  await db.asService(async (tx) => {
    const release = await lockRelease(tx, releaseId);
    if (!release || !["delivered", "live"].includes(release.status)) return;
    const version = await correctionVersion(tx, releaseId);
    if (version === 0) return;
    const sent = new Set(
      (
        await tx.query<{ store: string }>(
          `select distinct store from internal.release_deliveries
           where release_id = $1 and action = 'update' and correction_version >= $2`,
          [releaseId, version],
        )
      ).rows.map((r) => r.store),
    );
    const stores = (await storesHolding(tx, releaseId)).filter((store) => !sent.has(store));
    await startDeliveries(tx, release, stores, "update", version);
  });
}

/** Stores whose latest delivery of the release put it there (and no takedown sent since). */
async function storesHolding(tx: Tx, releaseId: string): Promise<string[]> {
  return (
    await tx.query<{ store: string }>(
      `select store from (
         select distinct on (store) store, action, status from internal.release_deliveries
         where release_id = $1 and status in ('delivered', 'live', 'takedown_sent', 'taken_down')
         order by store, created_at desc, id) latest
       where action <> 'takedown' order by store`,
      [releaseId],
    )
  ).rows.map((r) => r.store);
}

/** `takedown.process`: a takedown request removes the release from every store that has it. */
export async function processTakedown(db: Db, takedownId: string): Promise<void> {
  await db.asService(async (tx) => {
    // The release first, then its request: the order every step that settles a release keeps
    // (a store's confirmation updates the request's per-store states with the release locked).
    const owner = (
      await tx.query<{ release_id: string }>(
        "select release_id from public.takedown_requests where id = $1",
        [takedownId],
      )
    ).rows[0];
    if (!owner) return;
    const release = await lockRelease(tx, owner.release_id);
    if (!release) return;
    const request = (
      await tx.query<{ status: string }>(
        "select status from public.takedown_requests where id = $1 for update",
        [takedownId],
      )
    ).rows[0];
    if (!request || (request.status !== "pending" && request.status !== "processing")) return;
    await tx.query(
      "update public.takedown_requests set status = 'processing' where id = $1 and status = 'pending'",
      [takedownId],
    );
    await startDeliveries(tx, release, await storesHolding(tx, release.id), "takedown");
    await settle(tx, release.id);
  });
}

interface Sending {
  id: string;
  release_id: string;
  action: DeliveryAction;
  status: string;
  store: string;
  store_name: string;
  store_settings: Record<string, unknown>;
  credentials_sealed: string | null;
  is_sandbox: boolean;
  tenant_adapter: unknown;
}

/** `delivery.send`: one delivery to one store. A store's failure is recorded and retried by the queue. */
export async function sendDelivery(
  db: Db,
  deliveryId: string,
  options: { signal?: AbortSignal | undefined; adapters?: Record<string, StoreAdapter> } = {},
): Promise<void> {
  const { signal } = options;
  const sending = await db.asService(async (tx) => {
    const d = (
      await tx.query<Sending>(
        `select d.id, d.release_id, d.action, d.status, d.store, s.name as store_name, s.settings as store_settings, s.credentials_sealed,
                a.is_sandbox, t.settings -> 'delivery_adapter' #>> '{}' as tenant_adapter
         from internal.release_deliveries d
         join internal.stores s on s.code = d.store
         join internal.accounts a on a.id = d.account_id
         join internal.tenants t on t.id = a.tenant_id
         where d.id = $1 for update of d`,
        [deliveryId],
      )
    ).rows[0];
    if (!d || ["delivered", "live", "takedown_sent", "taken_down"].includes(d.status)) return undefined;
    if (d.action !== "takedown") {
      const state = (
        await tx.query<{ status: string }>("select status from public.releases where id = $1", [d.release_id])
      ).rows[0]?.status;
      if (state === "takedown_requested" || state === "taken_down") {
        await tx.query(
          "update internal.release_deliveries set status = 'error', message = 'Cancelled: the release is being taken down.' where id = $1",
          [deliveryId],
        );
        return undefined;
      }
    }
    // An update sends the release as it is now: it carries the latest correction.
    const version = d.action === "update" ? await correctionVersion(tx, d.release_id) : null;
    // A DDEX batch's name (YYYYMMDDhhmmssnnn, DDEX's SFTP choreography) is given at the first
    // attempt and kept, so a retry writes the same batch; one store's batches never share a name
    // (the lock serialises the choice per store, a name taken moves on by a millisecond).
    const ddex = d.store_settings?.adapter === "ddex";
    if (ddex) await tx.query("select pg_advisory_xact_lock(hashtext('ddex-batch:' || $1))", [d.store]);
    const batchId =
      (
        await tx.query<{ batch_id: string | null }>(
          `update internal.release_deliveries d
           set status = 'in_progress', attempts = attempts + 1, message = null, correction_version = coalesce($2, correction_version),
               batch_id = case when $3::boolean then coalesce(d.batch_id, (
                 select greatest(to_char(clock_timestamp() at time zone 'UTC', 'YYYYMMDDHH24MISSMS')::bigint,
                                 coalesce(max(o.batch_id::bigint) + 1, 0))::text
                 from internal.release_deliveries o where o.store = d.store and o.batch_id is not null)) else d.batch_id end
           where d.id = $1 returning d.batch_id`,
          [deliveryId, version, ddex],
        )
      ).rows[0]?.batch_id ?? undefined;
    const release = (
      await tx.query<Record<string, unknown>>(
        // With its genres' display names, which the DDEX messages carry (docs/ddex.md).
        `select r.*, pg.name as primary_genre_name, sg.name as secondary_genre_name from public.releases r
           left join internal.genres pg on pg.code = r.primary_genre
           left join internal.genres sg on sg.code = r.secondary_genre
          where r.id = $1`,
        [d.release_id],
      )
    ).rows[0];
    const tracks = (
      await tx.query<Record<string, unknown>>(
        "select * from public.tracks where release_id = $1 order by disc_number, track_number, id",
        [d.release_id],
      )
    ).rows;
    // What this delivery sends of the metadata a correction may change: the desk shows a later
    // correction's difference against it (GET /admin/v1/releases/{id}, `correction`).
    if (d.action !== "takedown" && release) {
      await tx.query("update internal.release_deliveries set sent_metadata = $2 where id = $1", [
        deliveryId,
        JSON.stringify(correctableMetadata(release)),
      ]);
    }
    return { d, release: release ?? {}, tracks, version, batchId };
  });
  if (!sending) return;
  const { d } = sending;
  let result: DeliveryResult;
  try {
    // The store's credentials are opened here, outside any transaction, for this delivery only.
    const settings = storeSettingsOf(db, {
      settings: d.store_settings,
      credentials_sealed: d.credentials_sealed,
    });
    const adapter = adapterFor(
      { code: d.store, settings },
      { sandboxAccount: d.is_sandbox, tenantAdapter: d.tenant_adapter },
      options.adapters ?? {},
    );
    result = await adapter.deliver({
      deliveryId,
      batchId: sending.batchId,
      action: d.action,
      store: { code: d.store, name: d.store_name, settings },
      release: sending.release,
      tracks: sending.tracks,
      signal,
    });
    // This worker lost the job (its lease ran out): whoever holds it now records the outcome.
    signal?.throwIfAborted();
  } catch (error) {
    if (signal?.aborted) throw error;
    const message = error instanceof Error ? error.message : String(error);
    await db.asService((tx) =>
      tx.query("update internal.release_deliveries set status = 'error', message = $2 where id = $1", [
        deliveryId,
        message.slice(0, 2000),
      ]),
    );
    // A missing configuration waits for the operator; anything else is retried with backoff.
    if (error instanceof DeliveryConfigError) return;
    throw error;
  }
  await db.asService(async (tx) => {
    // The release first: every step that settles a release locks it before its deliveries.
    await lockRelease(tx, d.release_id);
    // A takedown at the store is sent, not done: done is when the store confirms it.
    await tx.query(
      `update internal.release_deliveries set status = $3, delivered_at = now(), store_reference = $2, message = null
       where id = $1`,
      [deliveryId, result.reference, d.action === "takedown" ? "takedown_sent" : "delivered"],
    );
    // A store that reports back itself (a DDEX drop) is marked live, or its takedown confirmed,
    // by its report (reportDelivery); the others by these jobs, when they say.
    if (result.liveAfterMs !== null) {
      const takedown = d.action === "takedown";
      await enqueue(
        tx,
        takedown ? "delivery.removed" : "delivery.live",
        takedown
          ? { delivery_id: deliveryId, by: result.confirmedBy ?? "store" }
          : { delivery_id: deliveryId },
        { dedupeKey: deliveryId, runAt: new Date(Date.now() + result.liveAfterMs) },
      );
    }
    // Corrected again while this update was on its way: the store gets the newer one too.
    if (d.action === "update" && sending.version !== null) {
      const latest = await correctionVersion(tx, d.release_id);
      if (latest > sending.version) {
        const owner = (
          await tx.query<{ account_id: string }>("select account_id from public.releases where id = $1", [
            d.release_id,
          ])
        ).rows[0];
        if (owner) {
          await startDeliveries(
            tx,
            { id: d.release_id, account_id: owner.account_id },
            [d.store],
            "update",
            latest,
          );
        }
      }
    }
    await settle(tx, d.release_id);
  });
}

/**
 * `delivery.live`: the store reports the delivery live — unless the release is being (or was)
 * taken down from it since, when the report is stale.
 */
export async function deliveryLive(db: Db, deliveryId: string): Promise<boolean> {
  return db.asService((tx) => markLive(tx, deliveryId));
}

async function markLive(tx: Tx, deliveryId: string): Promise<boolean> {
  const owner = (
    await tx.query<{ release_id: string }>(
      "select release_id from internal.release_deliveries where id = $1",
      [deliveryId],
    )
  ).rows[0];
  if (!owner) return false;
  const release = await lockRelease(tx, owner.release_id);
  if (!release || release.status === "takedown_requested" || release.status === "taken_down") return false;
  const d = (
    await tx.query<{ release_id: string }>(
      `select d.release_id from internal.release_deliveries d
       where d.id = $1 and d.status = 'delivered' and d.action <> 'takedown'
         and not exists (select 1 from internal.release_deliveries t
                         where t.release_id = d.release_id and t.store = d.store and t.action = 'takedown'
                           and t.created_at >= d.created_at)
       for update`,
      [deliveryId],
    )
  ).rows[0];
  if (!d) return false;
  await tx.query("update internal.release_deliveries set status = 'live', live_at = now() where id = $1", [
    deliveryId,
  ]);
  await settle(tx, d.release_id);
  return true;
}

export type TakedownConfirmation =
  | { by: "sandbox" | "store"; via: "sandbox" | "store"; note?: string | null }
  | { by: "operator"; via: "cli" | "admin_api"; note: string };

/**
 * `delivery.removed`: the store confirms a takedown it was sent (the sandbox store by itself);
 * false when there is nothing to confirm (not a takedown, not sent yet, or confirmed already).
 */
export async function deliveryRemoved(
  db: Db,
  deliveryId: string,
  by: "sandbox" | "store" = "store",
): Promise<boolean> {
  return db.asService((tx) => markTakenDown(tx, deliveryId, { by, via: by }));
}

async function markTakenDown(
  tx: Tx,
  deliveryId: string,
  confirmation: TakedownConfirmation,
): Promise<boolean> {
  const owner = (
    await tx.query<{ release_id: string }>(
      "select release_id from internal.release_deliveries where id = $1",
      [deliveryId],
    )
  ).rows[0];
  if (!owner) return false;
  await lockRelease(tx, owner.release_id);
  const confirmed = await tx.query(
    `update internal.release_deliveries
     set status = 'taken_down', taken_down_at = now(), confirmed_by = $2, confirmed_via = $3, confirmation_note = $4
     where id = $1 and action = 'takedown' and status = 'takedown_sent'`,
    [deliveryId, confirmation.by, confirmation.via, confirmation.note ?? null],
  );
  if (confirmed.rowCount === 0) return false;
  await settle(tx, owner.release_id);
  return true;
}

/** Moves the release (and its open takedown request) to where its stores now stand. */
async function settle(tx: Tx, releaseId: string): Promise<void> {
  const release = (
    await tx.query<{ status: string }>("select status from public.releases where id = $1", [releaseId])
  ).rows[0];
  if (!release) return;
  const latest = (
    await tx.query<{ action: DeliveryAction; status: string }>(
      `select distinct on (store) action, status from internal.release_deliveries
       where release_id = $1 order by store, created_at desc, id`,
      [releaseId],
    )
  ).rows;
  if (release.status === "delivering" || release.status === "delivered") {
    const inserts = latest.filter((l) => l.action !== "takedown");
    if (inserts.length === 0) return;
    const next = inserts.every((l) => l.status === "live")
      ? "live"
      : inserts.every((l) => l.status === "delivered" || l.status === "live")
        ? "delivered"
        : undefined;
    if (next && next !== release.status) {
      await tx.query("update public.releases set status = $2 where id = $1", [releaseId, next]);
    }
  } else if (release.status === "takedown_requested") {
    // Done when no store holds it any more and every store confirmed its removal.
    const holding = latest.some(
      (l) => l.action !== "takedown" && (l.status === "delivered" || l.status === "live"),
    );
    const removing = latest.some((l) => l.action === "takedown" && l.status !== "taken_down");
    if (holding || removing) return;
    // The request first: release.takedown_completed, written with the release's status, carries it.
    await tx.query(
      "update public.takedown_requests set status = 'completed' where release_id = $1 and status in ('pending', 'processing')",
      [releaseId],
    );
    await tx.query("update public.releases set status = 'taken_down' where id = $1", [releaseId]);
  }
}

/** The operator's retry: a new send for each delivery of the release that ended in error. */
export async function retryDeliveries(
  db: Db,
  releaseId: string,
  scope: { tenantId?: string } = {},
): Promise<number> {
  return db.asService(async (tx) => {
    await releaseInScope(tx, releaseId, scope);
    const errored = (
      await tx.query<{ id: string; store: string }>(
        "select id, store from internal.release_deliveries where release_id = $1 and status = 'error' order by store",
        [releaseId],
      )
    ).rows;
    for (const d of errored) {
      await tx.query("update internal.release_deliveries set status = 'pending' where id = $1", [d.id]);
      // A send still waiting out its backoff goes now, with its attempts afresh; else a new one.
      const waiting = await tx.query(
        `update internal.jobs set run_at = now(), attempts = 0
         where kind = 'delivery.send' and dedupe_key = $1 and status = 'queued'`,
        [d.id],
      );
      if (waiting.rowCount === 0) {
        await enqueue(tx, "delivery.send", { delivery_id: d.id, store: d.store }, { dedupeKey: d.id });
      }
    }
    return errored.length;
  });
}

async function releaseInScope(tx: Tx, releaseId: string, scope: { tenantId?: string }): Promise<void> {
  const found = await tx.query(
    `select 1 from public.releases r join internal.accounts a on a.id = r.account_id
     where r.id = $1 and ($2::uuid is null or a.tenant_id = $2::uuid)`,
    [releaseId, scope.tenantId ?? null],
  );
  if (found.rows.length === 0) throw new OperatorError("not_found", `no release ${releaseId}`);
}

export interface DeliveryRecord {
  id: string;
  store: string;
  action: DeliveryAction;
  status: string;
  attempts: number;
  message: string | null;
  store_reference: string | null;
  correction_version: number | null;
  created_at: Date;
  delivered_at: Date | null;
  live_at: Date | null;
  /** A takedown: when the store confirmed the removal, who confirmed it, how it was recorded. */
  taken_down_at: Date | null;
  confirmed_by: string | null;
  confirmed_via: string | null;
  confirmation_note: string | null;
  updated_at: Date;
}

const DELIVERY_COLUMNS = `id, store, action, status, attempts, message, store_reference, correction_version,
  created_at, delivered_at, live_at, taken_down_at, confirmed_by, confirmed_via, confirmation_note, updated_at`;

/** Every delivery record of a release, newest first. */
export async function deliveriesOf(
  db: Db,
  releaseId: string,
  scope: { tenantId?: string } = {},
): Promise<DeliveryRecord[]> {
  return db.asService(
    async (tx) => {
      await releaseInScope(tx, releaseId, scope);
      return (
        await tx.query<DeliveryRecord>(
          `select ${DELIVERY_COLUMNS}
           from internal.release_deliveries where release_id = $1 order by created_at desc, store, id`,
          [releaseId],
        )
      ).rows;
    },
    { readOnly: true },
  );
}

export type DeliveryReport =
  | { status: "live" }
  | { status: "error"; message: string }
  | { status: "taken_down"; note: string };

/**
 * A store's report on a delivery it received (docs/operator.md, "Store reports"): `live` when
 * the release is on sale there, `error` when its ingestion refused the package (the message says
 * why; the operator fixes it and retries), `taken_down` when the store confirmed a takedown it was
 * sent (recorded by hand by the operator: `note` says who confirmed it and how; `via` how it was
 * recorded). Stores that report back themselves (the ddex file drop) reach live, and their
 * takedowns taken_down, only this way.
 */
export async function reportDelivery(
  db: Db,
  deliveryId: string,
  report: DeliveryReport,
  scope: { tenantId?: string; via?: "cli" | "admin_api" | "store" } = {},
): Promise<DeliveryRecord> {
  if (report.status === "error" && report.message.trim() === "") {
    throw new OperatorError("reason_required", "an error report needs a message: the account sees it");
  }
  if (report.status === "taken_down" && report.note.trim() === "") {
    throw new OperatorError(
      "reason_required",
      "a takedown confirmation recorded by hand needs a note: who confirmed it, and how",
    );
  }
  return db.asService(async (tx) => {
    const found = (
      await tx.query<{ release_id: string; action: DeliveryAction; status: string }>(
        `select d.release_id, d.action, d.status from internal.release_deliveries d
         join internal.accounts a on a.id = d.account_id
         where d.id = $1 and ($2::uuid is null or a.tenant_id = $2::uuid)`,
        [deliveryId, scope.tenantId ?? null],
      )
    ).rows[0];
    if (!found) throw new OperatorError("not_found", `no delivery ${deliveryId}`);
    const received = found.action === "takedown" ? "takedown_sent" : "delivered";
    if (found.status !== received) {
      throw new OperatorError(
        "invalid_state",
        `delivery ${deliveryId} is ${found.status}; a store reports only on a delivery it received (${received})`,
      );
    }
    if (report.status === "live") {
      if (found.action === "takedown") {
        throw new OperatorError("invalid_state", `delivery ${deliveryId} is a takedown: it cannot go live`);
      }
      if (!(await markLive(tx, deliveryId))) {
        throw new OperatorError(
          "invalid_state",
          `delivery ${deliveryId} cannot go live: the release is being taken down, or was taken down from this store`,
        );
      }
    } else if (report.status === "taken_down") {
      if (found.action !== "takedown") {
        throw new OperatorError(
          "invalid_state",
          `delivery ${deliveryId} is an ${found.action}, not a takedown: only a takedown is confirmed taken_down`,
        );
      }
      // Via "store": read from the store's own acknowledgement file (src/pipeline/store-inbox.ts).
      const note = report.note.trim().slice(0, 2000);
      const confirmed = await markTakenDown(
        tx,
        deliveryId,
        scope.via === "store"
          ? { by: "store", via: "store", note }
          : { by: "operator", via: scope.via ?? "cli", note },
      );
      if (!confirmed) {
        throw new OperatorError("invalid_state", `delivery ${deliveryId} was confirmed already`);
      }
    } else {
      await lockRelease(tx, found.release_id);
      await tx.query("update internal.release_deliveries set status = 'error', message = $2 where id = $1", [
        deliveryId,
        report.message.trim().slice(0, 2000),
      ]);
    }
    return (
      await tx.query<DeliveryRecord>(
        `select ${DELIVERY_COLUMNS} from internal.release_deliveries where id = $1`,
        [deliveryId],
      )
    ).rows[0] as DeliveryRecord;
  });
}
