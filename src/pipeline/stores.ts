import { setTimeout as sleep } from "node:timers/promises";
import type { Db } from "../db/db.ts";
import type { Tx } from "../db/types.ts";
import { credentialPaths, mergeCredentials, splitCredentials } from "../secrets/at-rest.ts";
import { storeGenreMapColumn } from "./dictionaries.ts";

/**
 * Store adapters (docs/operator.md, "Stores"): how a delivery reaches a store. Each store row of
 * internal.stores names its adapter in settings.adapter; sandbox accounts, and tenants whose
 * settings.delivery_adapter is "sandbox" (the development tenant), always use the sandbox store.
 */
export type DeliveryAction = "insert" | "update" | "takedown";

export interface DeliveryRequest {
  deliveryId: string;
  /** The delivery's batch name, YYYYMMDDhhmmssnnn, kept across its attempts (DDEX adapter). */
  batchId?: string | undefined;
  action: DeliveryAction;
  store: { code: string; name: string; settings: Record<string, unknown> };
  release: Record<string, unknown>;
  tracks: Record<string, unknown>[];
  /** Aborted when the worker lost the job (or stops hard): an adapter stops as soon as it can. */
  signal?: AbortSignal | undefined;
}

export interface DeliveryResult {
  /** The store's id for what it received. */
  reference: string;
  /**
   * How long until the store has the release live (insert and update), or confirms its removal
   * (takedown); null when the store reports it itself (an operator or store call to reportDelivery).
   */
  liveAfterMs: number | null;
  /** Who confirms a takedown after liveAfterMs: the sandbox store, or the store (the default). */
  confirmedBy?: "sandbox" | "store";
}

export interface StoreAdapter {
  readonly name: string;
  deliver(request: DeliveryRequest): Promise<DeliveryResult>;
}

/** A delivery that cannot succeed without the operator (no adapter configured): not retried. */
export class DeliveryConfigError extends Error {}

/**
 * The simulated store, for demos, sandbox accounts and tests: it acknowledges every delivery after
 * `sandbox.ack_after_ms` (default 0), reports it live after `sandbox.live_after_ms` (default 0) and
 * confirms a takedown after `sandbox.takedown_after_ms` (default 0); with `sandbox.fail` set to a
 * message it refuses every delivery with it, until unset.
 */
export const sandboxStore: StoreAdapter = {
  name: "sandbox",
  async deliver(request) {
    const settings = (request.store.settings.sandbox ?? {}) as {
      ack_after_ms?: unknown;
      live_after_ms?: unknown;
      takedown_after_ms?: unknown;
      fail?: unknown;
    };
    const ackAfterMs = typeof settings.ack_after_ms === "number" ? Math.max(0, settings.ack_after_ms) : 0;
    if (ackAfterMs > 0) await sleep(ackAfterMs, undefined, { signal: request.signal });
    if (typeof settings.fail === "string" && settings.fail !== "") {
      throw new Error(`${request.store.name} (sandbox) refused the delivery: ${settings.fail}`);
    }
    const after = request.action === "takedown" ? settings.takedown_after_ms : settings.live_after_ms;
    const liveAfterMs = typeof after === "number" ? Math.max(0, after) : 0;
    return {
      reference: `sandbox-${request.store.code}-${request.deliveryId}`,
      liveAfterMs,
      confirmedBy: "sandbox",
    };
  },
};

export function adapterFor(
  store: { code: string; settings: Record<string, unknown> },
  context: { sandboxAccount: boolean; tenantAdapter: unknown },
  adapters: Record<string, StoreAdapter>,
): StoreAdapter {
  if (context.sandboxAccount || context.tenantAdapter === "sandbox") return sandboxStore;
  const configured = store.settings.adapter;
  if (configured === "sandbox") return sandboxStore;
  const adapter = typeof configured === "string" ? adapters[configured] : undefined;
  if (adapter) return adapter;
  throw new DeliveryConfigError(
    configured === undefined
      ? `store ${store.code} has no delivery adapter configured (internal.stores.settings.adapter)`
      : `store ${store.code} names an unknown delivery adapter: ${String(configured)}`,
  );
}

/**
 * Sets a store's delivery settings (`backline stores configure`). Stores belong to the installation
 * and only the operator's staff configure them; their credentials (any key naming a secret,
 * password, passphrase, private key or token) are kept sealed with the master key in
 * credentials_sealed, never in settings (docs/security.md). Undefined: no such store.
 */
export async function configureStore(
  db: Db,
  code: string,
  settings: Record<string, unknown>,
): Promise<
  | { code: string; name: string; enabled: boolean; settings: Record<string, unknown>; credentials: string[] }
  | undefined
> {
  const split = splitCredentials(settings);
  const row = (
    await db.asService((tx) =>
      tx.query<{ code: string; name: string; enabled: boolean; settings: Record<string, unknown> }>(
        `update internal.stores set settings = $2, credentials_sealed = $3, genre_map = $4 where code = $1
         returning code, name, enabled, settings`,
        [
          code,
          JSON.stringify(split.settings),
          split.credentials ? db.secrets.encrypt(JSON.stringify(split.credentials)) : null,
          genreMapJson(split.settings),
        ],
      ),
    )
  ).rows[0];
  return row && { ...row, credentials: credentialPaths(split.credentials) };
}

/** internal.stores.genre_map for these settings, as a query parameter (null: no dictionary). */
export function genreMapJson(settings: Record<string, unknown>): string | null {
  const map = storeGenreMapColumn(settings);
  return map ? JSON.stringify(map) : null;
}

/**
 * Writes every store's genre_map again from its settings and today's dictionary files (at start:
 * a newer Backline's dictionaries apply to the submission checks at once). The stores changed.
 */
export async function refreshStoreGenreMaps(db: Db): Promise<string[]> {
  return db.asService(async (tx) => {
    const rows = (
      await tx.query<{ code: string; settings: Record<string, unknown>; genre_map: unknown }>(
        "select code, settings, genre_map from internal.stores order by code for update",
      )
    ).rows;
    const changed: string[] = [];
    for (const row of rows) {
      const next = storeGenreMapColumn(row.settings);
      // jsonb keeps its own key order: compare the entries, sorted.
      const same = (a: unknown) =>
        a && typeof a === "object" ? JSON.stringify(Object.entries(a).sort()) : JSON.stringify(a ?? null);
      if (same(next) === same(row.genre_map)) continue;
      await tx.query("update internal.stores set genre_map = $2 where code = $1", [
        row.code,
        next ? JSON.stringify(next) : null,
      ]);
      changed.push(row.code);
    }
    return changed;
  });
}

/** A store's settings with its credentials opened, for the adapter that delivers to it (service path only). */
export function storeSettingsOf(
  db: Db,
  row: { settings: Record<string, unknown>; credentials_sealed: string | null },
): Record<string, unknown> {
  if (!row.credentials_sealed) return row.settings;
  return mergeCredentials(
    row.settings,
    JSON.parse(db.secrets.decrypt(row.credentials_sealed)) as Record<string, unknown>,
  );
}

/** What `backline stores show` prints: the settings, and where credentials are set (never their values). */
export async function showStore(tx: Tx, db: Db, code: string): Promise<Record<string, unknown> | undefined> {
  const row = (
    await tx.query<{ credentials_sealed: string | null } & Record<string, unknown>>(
      "select code, name, kind, enabled, offers_oac, settings, credentials_sealed from internal.stores where code = $1",
      [code],
    )
  ).rows[0];
  if (!row) return undefined;
  const { credentials_sealed, ...rest } = row;
  const credentials = credentials_sealed
    ? credentialPaths(JSON.parse(db.secrets.decrypt(credentials_sealed)) as Record<string, unknown>)
    : [];
  return { ...rest, credentials };
}
