import { randomUUID } from "node:crypto";
import { performance } from "node:perf_hooks";
import type { Logger } from "pino";
import type { Db } from "../db/db.ts";
import { prepared } from "../db/prepared.ts";
import type { Tx } from "../db/types.ts";
import type { Mailer } from "../mail/mailer.ts";
import { type EventRow, envelopeBody, type PayloadVersion } from "./envelope.ts";
import { processEnded, thisProcess } from "./instances.ts";
import { MAX_ATTEMPTS, nextDelayMs } from "./schedule.ts";
import type { SecretBox } from "./secrets.ts";
import { type SendResult, WebhookSender } from "./sender.ts";
import { signatureHeaders } from "./signing.ts";
import type { Resolve } from "./ssrf.ts";

/**
 * Sends webhook deliveries (docs/webhooks.md). A delivery is a row of internal.webhook_deliveries
 * written with its event, in the event's transaction (the fan-out trigger of migration 0009), so
 * nothing is lost however a process ends. Dispatchers — one in each server or worker process, as
 * many as run — claim due deliveries with FOR UPDATE SKIP LOCKED and a lease (locked_by,
 * locked_until): two dispatchers never send the same attempt at once. A started dispatcher is a
 * row of internal.webhook_dispatchers (its host, pid and the process's start time) with a
 * heartbeat every `heartbeatMs`; a dispatcher killed in the middle of a send leaves its
 * deliveries to be claimed again as soon as it is known dead (instances.ts): at once by a
 * dispatcher on the same host (its process is gone), after `deadAfterMs` without a heartbeat by
 * any other, at once by the next process on PGlite (one process owns the database: at its start
 * every claim is a dead one's), and at the latest when the lease runs out. At least once:
 * receivers drop duplicates by webhook-id, which is the event's id.
 *
 * Order (docs/webhooks.md, "Order"): best effort by default, every payload carrying its event's
 * time and its release's sequence number; an endpoint with ordering = 'strict' is sent one
 * delivery at a time in the order they were made, and a failing one holds the later ones until it
 * succeeds or fails for good.
 *
 * A dispatcher wakes on the `backline_webhooks` notice the fan-out sends (Db.listen), looks anyway
 * every `pollMs` (retries coming due, a lost notice), claims in batches and keeps up to
 * `concurrency` sends in flight, each recorded in its own short transaction afterwards: no
 * database connection is held while a receiver answers.
 *
 * Every attempt is kept in internal.webhook_attempts. After one:
 * - a 2xx: the delivery succeeded; the endpoint's last_success_at is set and failing_since cleared;
 * - 410 Gone: the delivery failed and the endpoint is disabled (its account is told);
 * - anything else: tried again on the schedule (schedule.ts; a 429 or 503's Retry-After is honoured
 *   when it asks for longer), failed after the tenth attempt; the endpoint's failing_since is set
 *   at its first failure after a success, and an endpoint failing for five days is disabled and its
 *   account told (a webhook.disabled notification to every member, an e-mail to the owners).
 *
 * A blocked address at send time (the name now resolves to a private address) is a failed attempt
 * like a refused connection: recorded as `blocked_address`, retried on the schedule, counting
 * towards the five days. Nothing reaches the blocked address however often it is tried (every
 * connection is checked), and a name that was pointed somewhere private by mistake recovers
 * without anyone re-sending by hand; one that stays so disables its endpoint after five days.
 *
 * Deliveries of a disabled endpoint are not claimed: they wait, pending, and go when it is enabled
 * again. Deleting an endpoint deletes its deliveries and their log (foreign keys, on delete cascade).
 */

export const WEBHOOK_CHANNEL = "backline_webhooks";

/** Five days without a success disable an endpoint. */
export const FAILING_LIMIT_MS = 5 * 24 * 60 * 60 * 1000;

export interface DispatcherOptions {
  db: Db;
  secrets: SecretBox;
  /** Sends the owners' e-mail when an endpoint is disabled (without it, only the notification). */
  mailer?: Mailer;
  /** Allow http:// and private, loopback and link-local targets (development and tests). */
  allowPrivate: boolean;
  /** Sends in flight at once. */
  concurrency?: number;
  /**
   * Sends in flight at once to one endpoint (10 by default, at most `concurrency`): an endpoint
   * that hangs holds at most this many of the slots, and the others' deliveries go on through the
   * rest (docs/operations.md, "A slow endpoint").
   */
  perEndpoint?: number;
  /** How long a claimed delivery is this dispatcher's; must exceed timeoutMs. */
  leaseMs?: number;
  /** How often to look for due deliveries without a notice. */
  pollMs?: number;
  /** A request's time limit. */
  timeoutMs?: number;
  /**
   * The clock for scheduling (next_attempt_at, leases, what is due, the five days). Tests inject
   * one to jump ahead; the webhook-timestamp header is always the wall clock, as receivers check it
   * against theirs.
   */
  now?: () => Date;
  /** For the jitter, in [0, 1). */
  random?: () => number;
  /** The resolver (tests inject one); the system's by default. */
  lookup?: Resolve;
  logger?: Pick<Logger, "info" | "warn" | "error">;
  /** The claims' name; by default the host, pid and process start time with a random suffix. */
  id?: string;
  /** How often a started dispatcher writes its heartbeat and looks for dead ones (2 s). */
  heartbeatMs?: number;
  /** A dispatcher whose heartbeat is older than this is dead and its claims released (10 s, at least 2 heartbeats). */
  deadAfterMs?: number;
}

/** The dispatchers of this process that have not stopped: on PGlite, the only live claimers. */
const inProcess = new Set<string>();

export const HEARTBEAT_MS = 2000;
export const DEFAULT_PER_ENDPOINT = 10;
export const DEAD_AFTER_MS = 10_000;

interface Claimed {
  /** The claim looked at as many due deliveries as it may: more may be due. */
  more: boolean;
  id: string;
  endpoint_id: string;
  attempts: number;
  event_id: string;
  type: string;
  account_id: string | null;
  data: Record<string, unknown>;
  created_at: Date | string;
  seq: number | string;
  ordering: "best_effort" | "strict";
  /** The endpoint's payload version (docs/webhooks.md, "Payload versions"). */
  payload_version: PayloadVersion;
  url: string;
  secret_ciphertext: string;
  previous_secret_ciphertext: string | null;
}

type Wake = "notice" | "capacity" | "stop";

/** A sent attempt waiting to be recorded. */
interface Finished {
  d: Claimed;
  startedAt: Date;
  finishedAt: Date;
  result: SendResult;
  resolve: () => void;
}

/** Takes due deliveries for a lease (migration 0059); prepared: planned once per connection. */
const CLAIM = prepared(
  `select more, id, endpoint_id, attempts, event_id, type, account_id, data, created_at, seq, ordering,
          payload_version, url, secret_ciphertext, previous_secret_ciphertext
   from internal.claim_webhook_deliveries($1::text, $2::timestamptz, $3::uuid[], $4::uuid[], $5::int[], $6::int,
                                          $7::int, $8::double precision)`,
);

/**
 * Records a batch of attempts in one statement: the deliveries this dispatcher still holds are
 * updated (and released), their attempts logged, and each endpoint whose latest attempt of the
 * batch succeeded gets last_success_at (at most once a second: a busy endpoint's row is not a
 * point of contention) and its failing_since cleared. Only deliveries this dispatcher still holds:
 * one whose lease ran out and that another dispatcher took is that one's to record (its attempt
 * counts, not this one). A held delivery is pending (recording it releases it); not saying so
 * keeps the planner on the primary key rather than the partial index of pending deliveries.
 */
const RECORD = prepared(
  `with input as (
     select * from unnest($2::uuid[], $3::uuid[], $4::int[], $5::text[], $6::timestamptz[], $7::timestamptz[],
                          $8::timestamptz[], $9::int[], $10::int[], $11::text[], $12::text[], $13::text[])
       with ordinality as t(id, endpoint_id, attempt, status, next_at, done_at, started_at, duration_ms,
                            status_code, outcome, error, response_body, ord)
   ), updated as (
     update internal.webhook_deliveries d
     set attempts = i.attempt, status = i.status, next_attempt_at = coalesce(i.next_at, d.next_attempt_at),
         last_status_code = i.status_code, last_error = i.error,
         completed_at = case when i.status = 'pending' then null else i.done_at end,
         locked_by = null, locked_until = null
     from input i
     where d.id = any ($2::uuid[]) and d.id = i.id and d.locked_by = $1
     returning d.id
   ), inserted as (
     insert into internal.webhook_attempts
       (delivery_id, endpoint_id, attempt, started_at, duration_ms, status_code, outcome, error, response_body)
     select i.id, i.endpoint_id, i.attempt, i.started_at, i.duration_ms, i.status_code, i.outcome, i.error,
            i.response_body
     from input i join updated u on u.id = i.id
     returning delivery_id
   ), latest as (
     select distinct on (i.endpoint_id) i.endpoint_id, i.outcome
     from input i join updated u on u.id = i.id
     order by i.endpoint_id, i.ord desc
   ), succeeded as (
     update internal.webhook_endpoints e set last_success_at = $14::timestamptz, failing_since = null
     where e.id in (select l.endpoint_id from latest l where l.outcome = 'ok')
       and (e.failing_since is not null or e.last_success_at is null
            or e.last_success_at < $14::timestamptz - interval '1 second')
     returning e.id
   )
   -- The commit does not wait for the WAL flush: a server crash could forget the last
   -- attempts recorded, whose deliveries are then sent again once their lease runs out — which
   -- at-least-once delivery allows (receivers drop duplicates by webhook-id).
   select delivery_id from inserted where set_config('synchronous_commit', 'off', true) = 'off'`,
);

/** Postgres text cannot hold NUL; the log keeps the rest. */
const clean = (text: string | undefined, max: number): string | null =>
  text === undefined ? null : text.replaceAll("\u0000", "\uFFFD").slice(0, max);

export class WebhookDispatcher {
  readonly id: string;
  private readonly db: Db;
  private readonly secrets: SecretBox;
  private readonly mailer: Mailer | undefined;
  private readonly sender: WebhookSender;
  private readonly concurrency: number;
  private readonly perEndpoint: number;
  /** Sends in flight (claimed and not yet recorded) per endpoint. */
  private readonly endpointLoad = new Map<string, number>();
  /** Of those, the ones being sent: at most `perEndpoint` per endpoint. */
  private readonly endpointSending = new Map<string, number>();
  /**
   * How many deliveries of one endpoint the background loop holds at once, sent or waiting for a
   * slot: twice `perEndpoint`, so an endpoint's next sends are at hand when its slots free.
   */
  private readonly endpointHold: number;
  private readonly leaseMs: number;
  private readonly timeoutMs: number;
  private readonly pollMs: number;
  private readonly now: () => Date;
  /** Whether `now` was injected (tests); else what is due is judged by the database's clock. */
  private readonly clockInjected: boolean;
  private readonly random: () => number;
  private readonly logger: Pick<Logger, "info" | "warn" | "error"> | undefined;
  private readonly heartbeatMs: number;
  private readonly deadAfterMs: number;
  private heartbeat: NodeJS.Timeout | undefined;
  private beating: Promise<void> | undefined;
  /** Claimed deliveries until their attempt is recorded (stop() waits for them). */
  private readonly inFlight = new Set<Promise<void>>();
  /** Of those, the ones whose request has not ended yet: the slots `concurrency` counts. */
  private sending = 0;
  /**
   * Claimed ahead, waiting for a slot (at most concurrency / 2): the next sends go as soon as
   * slots free, rather than after the next claim's round trips. `claimedAt` (performance.now(),
   * taken before the claim) tells whether its lease still covers a whole send.
   */
  private readonly queue: { d: Claimed; claimedAt: number }[] = [];
  private readonly prefetch: number;
  private readonly plainSecrets = new Map<string, string>();
  /** Recent events' request bodies, by event id and payload version (bodyOf). */
  private readonly bodies = new Map<string, string>();
  private readonly unrecorded: Finished[] = [];
  private flushing: Promise<void> | undefined;
  private running = false;
  private loop: Promise<void> | undefined;
  private unlisten: (() => Promise<void>) | undefined;
  private wakeUp: ((why: Wake) => void) | undefined;
  /** A notice came while the loop was busy: look again before sleeping. */
  private noticed = false;
  /** The last claim took all it asked for: more may be due, so finishing a send is a reason to claim. */
  private backlog = false;

  constructor(options: DispatcherOptions) {
    const me = thisProcess();
    this.id =
      options.id ??
      `webhooks-${me.host.slice(0, 60)}-${me.pid}-${Math.round(performance.timeOrigin).toString(36)}-${randomUUID().slice(0, 4)}`;
    inProcess.add(this.id);
    this.heartbeatMs = Math.max(10, options.heartbeatMs ?? HEARTBEAT_MS);
    this.deadAfterMs = options.deadAfterMs ?? DEAD_AFTER_MS;
    if (this.deadAfterMs < 2 * this.heartbeatMs) {
      // One late heartbeat must not make a live dispatcher dead.
      throw new RangeError(
        `deadAfterMs (${this.deadAfterMs}) must be at least two heartbeats (${this.heartbeatMs})`,
      );
    }
    this.db = options.db;
    this.secrets = options.secrets;
    this.mailer = options.mailer;
    this.concurrency = Math.max(1, options.concurrency ?? 50);
    this.perEndpoint = Math.min(this.concurrency, Math.max(1, options.perEndpoint ?? DEFAULT_PER_ENDPOINT));
    this.prefetch = Math.floor(this.concurrency / 2);
    this.endpointHold = 2 * this.perEndpoint;
    const timeoutMs = options.timeoutMs ?? 15_000;
    this.timeoutMs = timeoutMs;
    this.leaseMs = options.leaseMs ?? Math.max(60_000, timeoutMs * 2);
    if (this.leaseMs <= timeoutMs) {
      // A send could outlast its lease, and another dispatcher would send the same attempt meanwhile.
      throw new RangeError(`leaseMs (${this.leaseMs}) must be longer than timeoutMs (${timeoutMs})`);
    }
    this.pollMs = options.pollMs ?? 1000;
    this.now = options.now ?? (() => new Date());
    this.clockInjected = options.now !== undefined;
    this.random = options.random ?? Math.random;
    this.logger = options.logger;
    this.sender = new WebhookSender({
      allowPrivate: options.allowPrivate,
      timeoutMs,
      lookup: options.lookup,
      maxSocketsPerHost: this.concurrency,
    });
  }

  /** Starts claiming and sending in the background, woken by notices and every pollMs. */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.run();
  }

  /** Stops claiming, waits for the sends in flight (each ends within timeoutMs) and closes connections. */
  async stop(): Promise<void> {
    const started = this.running;
    this.running = false;
    clearInterval(this.heartbeat);
    this.heartbeat = undefined;
    this.wakeUp?.("stop");
    await this.loop;
    // Claimed and not sent: given back by unregister() below (or by a dispatcher that finds this one dead).
    for (const q of this.queue.splice(0)) this.unload(q.d.endpoint_id);
    await Promise.allSettled([...this.inFlight]);
    await this.beating;
    await this.flushing;
    this.sender.close();
    inProcess.delete(this.id);
    if (started) await this.unregister().catch(() => {});
  }

  /**
   * Claims and sends every delivery due now (by the injected clock), batch after batch, until
   * none is due; returns how many were sent. For tests and one-off runs, instead of start().
   */
  async runDue(): Promise<number> {
    let sent = 0;
    for (;;) {
      const claimed = await this.claim(this.concurrency);
      if (claimed.length === 0) return sent;
      await Promise.all(claimed.map((d) => this.deliver(d, () => {})));
      sent += claimed.length;
    }
  }

  private async run(): Promise<void> {
    try {
      await this.register();
    } catch (error) {
      this.logger?.warn({ err: error, dispatcher: this.id }, "webhooks: cannot register the dispatcher");
    }
    // Stopped while registering: no heartbeat may outlive stop().
    if (!this.running) return;
    this.heartbeat = setInterval(() => {
      if (this.beating || !this.running) return;
      this.beating = this.beat()
        .catch((error: unknown) => {
          this.logger?.warn({ err: error, dispatcher: this.id }, "webhooks: heartbeat failed");
        })
        .finally(() => {
          this.beating = undefined;
        });
    }, this.heartbeatMs);
    this.heartbeat.unref();
    try {
      this.unlisten = await this.db.listen(WEBHOOK_CHANNEL, () => this.wake("notice"));
    } catch (error) {
      this.logger?.warn({ err: error, dispatcher: this.id }, "webhooks: cannot listen for notices; polling");
    }
    // Claim in batches: after a full one, wait until a quarter of the slots are free again.
    const minBatch = Math.max(1, Math.ceil(this.concurrency / 4));
    try {
      while (this.running) {
        // A slot is a send in flight; a sent attempt waiting for its record holds none, but at
        // most `concurrency` of those wait at once (recording is the slower part: claims stop).
        // Claimed ahead: up to `prefetch` wait for a slot.
        const free = Math.min(
          this.concurrency + this.prefetch - this.sending - this.queue.length,
          2 * this.concurrency + this.prefetch - this.inFlight.size - this.queue.length,
        );
        const canClaim = free > 0 && (this.sending + this.queue.length === 0 || free >= minBatch);
        let claimedAll = false;
        if (canClaim) {
          this.noticed = false;
          let claimed: Claimed[] = [];
          const claimedAt = performance.now();
          try {
            claimed = await this.claim(free, this.endpointHold);
          } catch (error) {
            this.logger?.warn({ err: error, dispatcher: this.id }, "webhooks: claiming deliveries failed");
          }
          claimedAll = claimed.length === free || claimed.some((c) => c.more);
          this.backlog = claimedAll;
          for (const d of claimed) this.queue.push({ d, claimedAt });
          this.pump();
        }
        if (!this.running) break;
        // More may be due and there is room, or a notice came while claiming: look again at once.
        if (
          canClaim &&
          ((claimedAll && this.sending + this.queue.length < this.concurrency + this.prefetch) ||
            this.noticed)
        )
          continue;
        await this.sleep();
      }
    } finally {
      await this.unlisten?.().catch(() => {});
      this.unlisten = undefined;
    }
  }

  /** Starts queued deliveries while there are free slots. */
  private pump(): void {
    let i = 0;
    while (this.running && this.sending < this.concurrency && i < this.queue.length) {
      const q = this.queue[i] as { d: Claimed; claimedAt: number };
      const { d } = q;
      const expiring = performance.now() - q.claimedAt + this.timeoutMs >= this.leaseMs;
      // An endpoint at its cap of sends waits; the deliveries of others behind it go.
      if (!expiring && (this.endpointSending.get(d.endpoint_id) ?? 0) >= this.perEndpoint) {
        i++;
        continue;
      }
      this.queue.splice(i, 1);
      if (expiring) {
        // Its lease may run out before a send would end (it waited long for a slot): given back,
        // due at once, rather than risk another dispatcher sending it as well.
        this.unload(d.endpoint_id);
        this.release(d, 0).catch((error: unknown) => {
          this.logger?.warn({ err: error, dispatcher: this.id }, "webhooks: giving back a delivery failed");
        });
        continue;
      }
      this.sending++;
      this.endpointSending.set(d.endpoint_id, (this.endpointSending.get(d.endpoint_id) ?? 0) + 1);
      const p = this.deliver(d, () => {
        this.sending--;
        const n = (this.endpointSending.get(d.endpoint_id) ?? 1) - 1;
        if (n <= 0) this.endpointSending.delete(d.endpoint_id);
        else this.endpointSending.set(d.endpoint_id, n);
        this.pump();
        if (this.backlog || this.noticed) this.wake("capacity");
      }).finally(() => {
        this.inFlight.delete(p);
        // A strict endpoint's next delivery may go now that this one is recorded.
        if (d.ordering === "strict") this.wake("notice");
        else if (this.backlog || this.noticed) this.wake("capacity");
      });
      this.inFlight.add(p);
    }
  }

  /** One claimed delivery of the endpoint fewer in hand (sent, or given back). */
  private unload(endpointId: string): number {
    const load = (this.endpointLoad.get(endpointId) ?? 1) - 1;
    if (load <= 0) this.endpointLoad.delete(endpointId);
    else this.endpointLoad.set(endpointId, load);
    return load;
  }

  private wake(why: Wake): void {
    if (why === "notice") this.noticed = true;
    this.wakeUp?.(why);
  }

  private sleep(): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wakeUp = undefined;
        resolve();
      };
      const timer = setTimeout(done, this.pollMs);
      timer.unref();
      this.wakeUp = done;
    });
  }

  /**
   * Writes this dispatcher's row and releases the claims of dispatchers that are dead: on PGlite
   * every claim but this process's (one process owns the database at a time, so the others'
   * claimers have died), and everywhere those of dispatchers known dead (see beat()).
   */
  private async register(): Promise<void> {
    const me = thisProcess();
    const released = await this.db.asService(async (tx) => {
      await tx.query(
        `insert into internal.webhook_dispatchers (id, host, host_key, pid, proc_start, dead_after_ms)
         values ($1, $2, $3, $4, $5, $6)
         on conflict (id) do update set host = excluded.host, host_key = excluded.host_key, pid = excluded.pid,
           proc_start = excluded.proc_start, started_at = now(), heartbeat_at = now(),
           dead_after_ms = excluded.dead_after_ms`,
        [this.id, me.host, me.hostKey, me.pid, me.procStart, this.deadAfterMs],
      );
      if (this.db.kind !== "pglite") return 0;
      const alive = [...inProcess];
      await tx.query("delete from internal.webhook_dispatchers where not (id = any ($1::text[]))", [alive]);
      const r = await tx.query(
        `update internal.webhook_deliveries set locked_by = null, locked_until = null
         where locked_by is not null and status = 'pending' and not (locked_by = any ($1::text[]))`,
        [alive],
      );
      return r.rowCount;
    });
    if (released > 0) {
      this.logger?.info(
        { dispatcher: this.id, released },
        "webhooks: released the deliveries claimed before this process started",
      );
    }
    await this.reap();
  }

  /** The heartbeat: this dispatcher's row is fresh (written again if it was taken for dead), then dead ones go. */
  private async beat(): Promise<void> {
    const me = thisProcess();
    await this.db.asService((tx) =>
      tx.query(
        `insert into internal.webhook_dispatchers (id, host, host_key, pid, proc_start, dead_after_ms)
         values ($1, $2, $3, $4, $5, $6)
         on conflict (id) do update set heartbeat_at = now()`,
        [this.id, me.host, me.hostKey, me.pid, me.procStart, this.deadAfterMs],
      ),
    );
    await this.reap();
  }

  /**
   * Releases the claims of dead dispatchers and deletes their rows: those whose heartbeat is older
   * than their dead_after_ms (judged by the database's clock), and those this host sees ended.
   * Their deliveries are due again at once; this dispatcher is woken to take them.
   */
  private async reap(): Promise<void> {
    const rows = await this.db.asService(
      async (tx) =>
        (
          await tx.query<{
            id: string;
            host_key: string | null;
            pid: number;
            proc_start: string | null;
            stale: boolean;
          }>(
            `select id, host_key, pid, proc_start,
                    heartbeat_at < now() - make_interval(secs => dead_after_ms::double precision / 1000) as stale
             from internal.webhook_dispatchers where id <> $1`,
            [this.id],
          )
        ).rows,
      { readOnly: true },
    );
    const dead = rows.filter((r) => r.stale || processEnded(r)).map((r) => r.id);
    if (dead.length === 0) return;
    const released = await this.db.asService(async (tx) => {
      await tx.query("delete from internal.webhook_dispatchers where id = any ($1::text[])", [dead]);
      const r = await tx.query(
        `update internal.webhook_deliveries set locked_by = null, locked_until = null
         where locked_by = any ($1::text[]) and status = 'pending'`,
        [dead],
      );
      return r.rowCount;
    });
    this.logger?.info(
      { dispatcher: this.id, dead, released },
      "webhooks: dispatchers found dead; their deliveries released",
    );
    if (released > 0) this.wake("notice");
  }

  /** Stopped: nothing of this dispatcher's is claimed any more, and its row goes. */
  private async unregister(): Promise<void> {
    await this.db.asService(async (tx) => {
      await tx.query(
        `update internal.webhook_deliveries set locked_by = null, locked_until = null
         where locked_by = $1 and status = 'pending'`,
        [this.id],
      );
      await tx.query("delete from internal.webhook_dispatchers where id = $1", [this.id]);
    });
  }

  /** Takes up to `limit` due deliveries of enabled endpoints for a lease, with what sending them needs. */
  private async claim(limit: number, cap = this.perEndpoint): Promise<Claimed[]> {
    // Due dates are written by the database (the event's transaction): judged by its clock, a
    // dispatcher on another host whose clock runs behind still sends at once. Tests inject theirs.
    const now = this.clockInjected ? this.now().toISOString() : null;
    // Endpoints at their cap of sends in flight are left out; of the others, at most their room.
    const full: string[] = [];
    const room = new Map<string, number>();
    for (const [endpoint, load] of this.endpointLoad) {
      if (load >= cap) full.push(endpoint);
      else room.set(endpoint, cap - load);
    }
    // One statement (migration 0059): looks at twice what may be taken (so that an endpoint with a
    // backlog cannot fill the batch alone) walking the due index, locks them FOR UPDATE SKIP
    // LOCKED, takes each endpoint's first ones up to its room and leases them. With the role, a
    // claim is four round trips (BEGIN, the role, this, COMMIT), not six.
    const claimed = await this.db.asService(
      async (tx) =>
        (
          await tx.query<Claimed>(CLAIM, [
            this.id,
            now,
            full,
            [...room.keys()],
            [...room.values()],
            cap,
            limit,
            this.leaseMs,
          ])
        ).rows,
    );
    // Counted once the claim committed; deliver() counts each down when its request has ended.
    for (const d of claimed)
      this.endpointLoad.set(d.endpoint_id, (this.endpointLoad.get(d.endpoint_id) ?? 0) + 1);
    return claimed;
  }

  /**
   * The request body of a delivery's event in its endpoint's payload version. An event goes to each
   * of its account's endpoints, usually claimed together: its body is made once and kept for the
   * others (the event's row never changes, so the bytes are the same however often it is sent).
   */
  private bodyOf(d: Claimed): string {
    const key = `${d.event_id} ${d.payload_version}`;
    let body = this.bodies.get(key);
    if (body === undefined) {
      const event: EventRow = {
        id: d.event_id,
        type: d.type,
        account_id: d.account_id,
        data: d.data,
        created_at: d.created_at,
        seq: d.seq,
      };
      body = envelopeBody(event, d.payload_version);
      if (this.bodies.size >= 1000) this.bodies.clear();
      this.bodies.set(key, body);
    }
    return body;
  }

  private decrypt(ciphertext: string): string {
    let plain = this.plainSecrets.get(ciphertext);
    if (plain === undefined) {
      plain = this.secrets.decrypt(ciphertext);
      if (this.plainSecrets.size >= 10_000) this.plainSecrets.clear();
      this.plainSecrets.set(ciphertext, plain);
    }
    return plain;
  }

  /**
   * Sends one claimed delivery and records the attempt. Never throws. `sent` is called once, when
   * the request has ended (or none was made): the slot and the endpoint's share of them are free
   * again, while the attempt waits for its group commit. The delivery stays claimed (locked_by)
   * until that commit, so no dispatcher sends it again meanwhile.
   */
  private async deliver(d: Claimed, sent: () => void): Promise<void> {
    let ended = false;
    const end = () => {
      if (ended) return;
      ended = true;
      const load = this.unload(d.endpoint_id);
      sent();
      // The endpoint was left out of claims while at its cap: its next due delivery may go now.
      if (load === this.endpointHold - 1) this.wake("notice");
    };
    try {
      await this.sendAndRecord(d, end);
    } finally {
      end();
    }
  }

  private async sendAndRecord(d: Claimed, sent: () => void): Promise<void> {
    let secrets: string[];
    try {
      secrets = [d.secret_ciphertext, d.previous_secret_ciphertext]
        .filter((c): c is string => c !== null)
        .map((c) => this.decrypt(c));
    } catch (error) {
      // The server's key does not open the secret (ENCRYPTION_KEY changed?): nothing is sent
      // unsigned; the delivery waits, without an attempt counted, for the operator to fix it.
      this.logger?.error(
        { err: error, dispatcher: this.id, endpoint_id: d.endpoint_id },
        "webhooks: cannot decrypt an endpoint's signing secret (is ENCRYPTION_KEY the one it was made with?)",
      );
      await this.release(d, 60_000).catch(() => {});
      return;
    }
    const body = this.bodyOf(d);
    const startedAt = this.now();
    const headers = signatureHeaders(secrets, d.event_id, Math.floor(Date.now() / 1000), body);
    const result = await this.sender.send(d.url, body, headers);
    sent();
    await new Promise<void>((resolve) => {
      this.unrecorded.push({ d, startedAt, finishedAt: this.now(), result, resolve });
      this.flush();
    });
  }

  /** Gives a claimed delivery back, due again after `delayMs`. */
  private async release(d: Claimed, delayMs: number): Promise<void> {
    const next = new Date(this.now().getTime() + delayMs).toISOString();
    await this.db.asService((tx) =>
      tx.query(
        `update internal.webhook_deliveries set locked_by = null, locked_until = null, next_attempt_at = $3::timestamptz
         where id = $1 and locked_by = $2 and status = 'pending'`,
        [d.id, this.id, next],
      ),
    );
  }

  /**
   * Records finished attempts, many per transaction (group commit): while one batch is being
   * written, the next gathers. A send's slot is free again once its request has ended; its
   * delivery stays claimed until the attempt is recorded, and at most `concurrency` wait so.
   */
  private flush(): void {
    if (this.flushing) return;
    this.flushing = (async () => {
      while (this.unrecorded.length > 0) {
        const batch = this.unrecorded.splice(0, 500);
        try {
          await this.record(batch);
        } catch (error) {
          // One bad row must not hold the others back: write them one by one.
          for (const one of batch.length > 1 ? batch : []) {
            await this.record([one]).catch(() => {});
          }
          // Whatever is still unrecorded stays locked: claimed and sent again once its lease runs out.
          this.logger?.warn(
            { err: error, dispatcher: this.id, deliveries: batch.length },
            "webhooks: recording attempts failed",
          );
        }
        for (const done of batch) done.resolve();
      }
    })().finally(() => {
      this.flushing = undefined;
    });
  }

  /** What an attempt makes of its delivery. */
  private outcomeOf(f: Finished): {
    attempt: number;
    status: "succeeded" | "failed" | "pending";
    next: Date | null;
  } {
    const attempt = f.d.attempts + 1;
    if (f.result.outcome === "ok") return { attempt, status: "succeeded", next: null };
    if (f.result.statusCode === 410 || attempt >= MAX_ATTEMPTS)
      return { attempt, status: "failed", next: null };
    const delay = Math.max(nextDelayMs(attempt, this.random) ?? 0, f.result.retryAfterMs ?? 0);
    return { attempt, status: "pending", next: new Date(f.finishedAt.getTime() + delay) };
  }

  private async record(batch: Finished[]): Promise<void> {
    const rows = batch.map((f) => ({ f, ...this.outcomeOf(f) }));
    const now = this.now();
    const told: Disabled[] = [];
    await this.db.asService(async (tx) => {
      const at = now.toISOString();
      // Each endpoint whose latest attempt here succeeded is marked so in the same statement.
      const recorded = await tx.query<{ delivery_id: string }>(RECORD, [
        this.id,
        rows.map((r) => r.f.d.id),
        rows.map((r) => r.f.d.endpoint_id),
        rows.map((r) => r.attempt),
        rows.map((r) => r.status),
        rows.map((r) => r.next?.toISOString() ?? null),
        rows.map((r) => r.f.finishedAt.toISOString()),
        rows.map((r) => r.f.startedAt.toISOString()),
        rows.map((r) => r.f.result.durationMs),
        rows.map((r) => r.f.result.statusCode ?? null),
        rows.map((r) => r.f.result.outcome),
        rows.map((r) => clean(r.f.result.error, 2000)),
        rows.map((r) => clean(r.f.result.responseBody, 4096)),
        at,
      ]);
      const held = new Set(recorded.rows.map((r) => r.delivery_id));
      if (held.size < rows.length) {
        this.logger?.warn(
          { dispatcher: this.id, lost: rows.length - held.size },
          "webhooks: deliveries whose lease ran out before their attempt was recorded",
        );
      }
      // Each endpoint's state follows its latest attempt of the batch.
      const latest = new Map<string, (typeof rows)[number]>();
      for (const r of rows) if (held.has(r.f.d.id)) latest.set(r.f.d.endpoint_id, r);
      const failing: string[] = [];
      const gone: string[] = [];
      for (const [endpointId, r] of latest) {
        if (r.f.result.outcome !== "ok") failing.push(endpointId);
        if (r.f.result.statusCode === 410) gone.push(endpointId);
      }
      if (gone.length > 0) {
        told.push(
          ...(await disable(
            tx,
            gone,
            "The endpoint answered 410 Gone.",
            "enabled",
            [],
            (url) => `${url} answered 410 Gone, so Backline stopped sending to it.`,
          )),
        );
      }
      if (failing.length > 0) {
        await tx.query(
          "update internal.webhook_endpoints set failing_since = $2::timestamptz where id = any($1::uuid[]) and failing_since is null",
          [failing, at],
        );
        told.push(
          ...(await disable(
            tx,
            failing,
            "Every delivery failed for five days.",
            "enabled and failing_since <= $2::timestamptz",
            [new Date(now.getTime() - FAILING_LIMIT_MS).toISOString()],
            (url, since) =>
              `Every delivery to ${url} has failed since ${since}, for five days, so Backline stopped sending to it.`,
          )),
        );
      }
      for (const e of told) {
        // Telling the account must not hold back the record of the attempt (or the disabling).
        await tx.query("savepoint webhook_tell");
        try {
          await this.tell(tx, e);
          await tx.query("release savepoint webhook_tell");
        } catch (error) {
          await tx.query("rollback to savepoint webhook_tell");
          this.logger?.error(
            { err: error, dispatcher: this.id, endpoint_id: e.id },
            "webhooks: could not tell the account its endpoint was disabled",
          );
        }
      }
    });
    for (const e of told) {
      this.logger?.info(
        { dispatcher: this.id, endpoint_id: e.id, reason: e.reason },
        "webhooks: endpoint disabled",
      );
    }
    if (told.length > 0) this.mailer?.deliver().catch(() => {});
  }

  /** The account hears of a disabled endpoint: a notification to every member, an e-mail to each owner. */
  private async tell(tx: Tx, e: Disabled): Promise<void> {
    const title = "A webhook endpoint was disabled";
    const body = `${e.summary} Events for it are kept: turn it back on (enabled: true) once it answers, and what waited is sent.`;
    await tx.query("select internal.notify_members($1, 'webhook.disabled', $2, $3, $4::jsonb)", [
      e.account_id,
      title,
      body,
      JSON.stringify({ endpoint_id: e.id, url: e.url }),
    ]);
    if (!this.mailer) return;
    const owners = await tx.query<{ email: string; name: string }>(
      `select u.email, a.name from internal.memberships m
       join internal.users u on u.id = m.user_id
       join internal.accounts a on a.id = m.account_id
       where m.account_id = $1 and m.role = 'owner' and u.email is not null`,
      [e.account_id],
    );
    for (const owner of owners.rows) {
      await this.mailer.enqueue(tx, {
        tenantId: e.tenant_id,
        to: owner.email,
        subject: `Webhook endpoint disabled for ${owner.name}`,
        text: `Hello,\n\n${e.summary}\n\nEndpoint: ${e.url}\nAccount: ${owner.name}\nReason: ${e.reason}\n\nEvents for it are kept. Once it answers again, turn it back on (PATCH /webhooks/${e.id} with {"enabled": true}) and what waited is sent.\n`,
        kind: "webhook.disabled",
      });
    }
  }
}

interface Disabled {
  id: string;
  tenant_id: string;
  account_id: string;
  url: string;
  reason: string;
  summary: string;
}

/** Disables those of the endpoints for which `condition` holds and that are not yet disabled; what to tell. */
async function disable(
  tx: Tx,
  endpointIds: string[],
  reason: string,
  condition: string,
  params: unknown[],
  summary: (url: string, failingSince: string) => string,
): Promise<Disabled[]> {
  const r = await tx.query<{
    id: string;
    tenant_id: string;
    account_id: string;
    url: string;
    failing_since: Date | string | null;
  }>(
    `update internal.webhook_endpoints set enabled = false, disabled_reason = $${params.length + 2}
     where id = any($1::uuid[]) and ${condition}
     returning id, tenant_id, account_id, url, failing_since`,
    [endpointIds, ...params, reason],
  );
  return r.rows.map((row) => {
    const since = row.failing_since ? new Date(row.failing_since).toISOString() : "";
    return { ...row, reason, summary: summary(row.url, since) };
  });
}

/**
 * "Retry now" (POST /webhooks/{id}/deliveries/{deliveryId}/retry): a failed or pending delivery
 * is due at once (`now`), its attempts kept — a failed one gets one more attempt. Dispatchers are
 * woken. Undefined when there is no such delivery, or it succeeded. The caller checks the
 * delivery is the requester's: this runs as the service.
 */
export async function retryDeliveryNow(
  db: Db,
  deliveryId: string,
  now: Date = new Date(),
): Promise<{ id: string; status: "pending"; attempts: number; next_attempt_at: Date } | undefined> {
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(deliveryId)) return undefined;
  return db.asService(async (tx) => {
    const r = await tx.query<{ id: string; status: "pending"; attempts: number; next_attempt_at: Date }>(
      `update internal.webhook_deliveries
       set status = 'pending', next_attempt_at = $2::timestamptz, completed_at = null
       where id = $1 and status in ('pending', 'failed')
       returning id, status, attempts, next_attempt_at`,
      [deliveryId, now.toISOString()],
    );
    if (r.rows[0]) await tx.query("select pg_notify($1, '')", [WEBHOOK_CHANNEL]);
    return r.rows[0];
  });
}
