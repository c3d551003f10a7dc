import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { Agent } from "undici";
import type { Db } from "../../src/db/db.ts";
import type { Engine } from "../../src/db/types.ts";
import { issueKey } from "../../src/public-api/keys/service.ts";
import { ReleaseStatus } from "../../src/public-api/resources/schemas.ts";
import { createAccount, createTenant } from "../../src/tenancy/tenants.ts";
import { freePort, ROOT, tempDir } from "./process.ts";
import { inDays, isrcs } from "./public-api.ts";
import { WebhookReceiver } from "./webhook-receiver.ts";
import { startWorkerProcess, type WorkerProcess } from "./worker-process.ts";

/**
 * Chaos on PostgreSQL (issue 20, item 9; docs/operations.md, "Chaos"): three API processes
 * (`WORKER=off npm start`) and two `backline worker` processes on one database, a webhook endpoint
 * in this process, and releases driven through submit → review → operator approval → delivery to
 * sandbox stores → live → takedown → taken_down by clients of the public and admin APIs, while a
 * killer SIGKILLs a random process every few seconds and starts it again (an API process on the
 * same port). What it measures and checks, returned as a ChaosReport:
 *
 * - every release reaches `taken_down`;
 * - every event the endpoint subscribed to (internal.events) arrived, signed (verified with the
 *   `standardwebhooks` package), at least once, and every delivery is recorded as succeeded;
 * - no job ran twice at the same time: a trigger installed here records each claim of a job and
 *   each end of a run (its worker completed or failed it, or another worker took it over after its
 *   lease ran out); a takeover from a worker that had not been killed before it is an overlap;
 * - no client request failed (a reset, a refused connection, a 5xx) unless the process it went to
 *   had been killed by the time the client saw the failure. Clients spread requests over the API
 *   processes that are up, as a load balancer with health checks does, each process with its own
 *   connection pool (so no connection of a killed process is reused for its successor).
 */

type Obj = Record<string, unknown>;

export interface ChaosOptions {
  /** The database, migrated: its URL for the login role, a Db on it (with the master key), and its owner. */
  loginUrl: string;
  db: Db;
  owner: Engine;
  /** The master key (base64) every process gets, the one `db` seals with. */
  encryptionKey: string;
  releases: number;
  /** Releases in flight at once. */
  concurrency: number;
  /**
   * The releases start in this many + 1 batches, batch b once b kills are done, so the work spreads
   * over the kills however long a restart takes on a busy machine (and the kills do happen: the
   * killer goes on until every release is final, or maxKills).
   */
  spreadOverKills?: number;
  /** Milliseconds between kills: uniformly random in [min, max]. */
  killEveryMs: [number, number];
  /** At most this many kills (the killer also stops when every release is final). */
  maxKills?: number;
  /** WORKER_LEASE_MS of the workers: how long a killed worker's jobs wait. */
  leaseMs: number;
  /** A release not final after this long fails the run. */
  releaseTimeoutMs: number;
  /** Progress lines. */
  log?: (line: string) => void;
}

export interface ClientFailure {
  op: string;
  process: string;
  outcome: string;
  sentAt: number;
  seenAt: number;
  killedAt: number | undefined;
}

export interface JobOverlap {
  jobId: string;
  kind: string;
  worker: string;
  detail: string;
}

export interface ChaosReport {
  releases: number;
  final: number;
  notFinal: { id: string; status: string; error?: string }[];
  durationMs: number;
  kills: { at: number; process: string; kind: "api" | "worker"; restartMs: number }[];
  requests: number;
  /** Requests that failed on a killed process and were sent again (or recovered by reading state). */
  clientRetries: number;
  /** Idempotency keys left held by a request whose process was killed (recovered by reading state). */
  heldIdempotencyKeys: number;
  /** Failures not explained by a kill: each one is a finding. */
  unexcusedFailures: ClientFailure[];
  excusedFailures: number;
  events: number;
  eventsReceived: number;
  missingEvents: { id: string; type: string }[];
  duplicateDeliveries: number;
  badSignatures: number;
  deliveriesNotSucceeded: number;
  jobs: number;
  jobRuns: number;
  /** Job attempts beyond the first (a retry after a failure or a takeover after a kill). */
  jobRetries: number;
  deadJobs: { id: string; kind: string; last_error: string | null }[];
  /** Jobs taken over from a killed worker once its lease ran out. */
  takeovers: number;
  overlaps: JobOverlap[];
  timeToFinalMs: { p50: number; p90: number; max: number };
  webhookAttempts: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The road of a release that goes straight through, in order (the API's statuses, without pending and rejected). */
const ORDER: string[] = ReleaseStatus.options.filter((s) => s !== "pending" && s !== "rejected");
const atLeast = (status: string, target: string) => ORDER.indexOf(status) >= ORDER.indexOf(target);

/** Records every claim of a job and every end of a run, with the database's clock. */
const AUDIT_SQL = `
  create schema chaos_audit;
  create table chaos_audit.job_runs (
    n bigint generated always as identity primary key,
    job_id bigint not null,
    kind text not null,
    worker text,
    attempt integer not null,
    what text not null,
    at timestamptz not null default clock_timestamp()
  );
  create function chaos_audit.record() returns trigger
  language plpgsql security definer set search_path = ''
  as $$
  declare lost constant text := 'the worker of the last attempt was lost';
  begin
    if new.status = 'running' and new.attempts > old.attempts then
      if old.status = 'running' then
        insert into chaos_audit.job_runs (job_id, kind, worker, attempt, what)
        values (old.id, old.kind, old.locked_by, old.attempts, 'taken_over');
      end if;
      insert into chaos_audit.job_runs (job_id, kind, worker, attempt, what)
      values (new.id, new.kind, new.locked_by, new.attempts, 'claim');
    elsif old.status = 'running' and new.locked_by is distinct from old.locked_by then
      insert into chaos_audit.job_runs (job_id, kind, worker, attempt, what)
      values (old.id, old.kind, old.locked_by, old.attempts,
              case when new.status = 'dead' and position(lost in coalesce(new.last_error, '')) > 0
                        and position(lost in coalesce(old.last_error, '')) = 0
                   then 'taken_over' else 'end:' || new.status end);
    end if;
    return null;
  end
  $$;
  create trigger chaos_audit_job_runs after update on internal.jobs
    for each row execute function chaos_audit.record();
`;

interface Incarnation {
  name: string;
  kind: "api" | "worker";
  child: ChildProcess;
  startedAt: number;
  up: boolean;
  killedAt: number | undefined;
  /** API: this incarnation's own connections. */
  agent?: Agent;
  port?: number;
  /** Worker: its Worker's id (internal.jobs.locked_by). */
  workerId?: string;
  worker?: WorkerProcess;
  output: () => string;
}

/** Children of this module still running, killed when the process exits however it exits. */
const children = new Set<ChildProcess>();
process.once("exit", () => {
  for (const c of children) c.kill("SIGKILL");
});

function apiEnv(base: Record<string, string>, port: number): NodeJS.ProcessEnv {
  const inherited = Object.fromEntries(
    Object.entries(process.env).filter(
      ([k]) =>
        !/^(PORT|HOST|DATA_DIR|DATABASE_URL|MIGRATION_DATABASE_URL|DEV_TENANT|LOG_LEVEL|WORKER)$/.test(k),
    ),
  );
  return { ...inherited, ...base, PORT: String(port), WORKER: "off", LOG_LEVEL: "warn" };
}

/** `WORKER=off npm start` on `port`; resolves once /ready answers 200. */
async function startApi(
  name: string,
  port: number,
  env: Record<string, string>,
  timeoutMs = 120_000,
): Promise<Incarnation> {
  const child = spawn(process.execPath, ["--max-semi-space-size=8", path.join(ROOT, "src/start/server.ts")], {
    cwd: ROOT,
    env: apiEnv(env, port),
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.add(child);
  let out = "";
  const keep = (d: Buffer) => {
    out = (out + d.toString()).slice(-20_000);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  let exited: number | string | null | undefined;
  child.once("exit", (code, signal) => {
    children.delete(child);
    exited = code ?? signal;
  });
  const agent = new Agent({ connections: 64, keepAliveTimeout: 4000 });
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (exited !== undefined) throw new Error(`${name} exited (${exited}) before it was ready:\n${out}`);
    try {
      const res = await fetch(`http://127.0.0.1:${port}/ready`, { dispatcher: agent } as RequestInit);
      await res.arrayBuffer();
      if (res.status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`${name} not ready after ${timeoutMs} ms:\n${out}`);
    }
    await sleep(50);
  }
  return {
    name,
    kind: "api",
    child,
    startedAt: Date.now(),
    up: true,
    killedAt: undefined,
    agent,
    port,
    output: () => out,
  };
}

async function startWorker(name: string, env: Record<string, string>): Promise<Incarnation> {
  const worker = await startWorkerProcess(env, 120_000);
  children.add(worker.child);
  void worker.exited.then(() => children.delete(worker.child));
  return {
    name,
    kind: "worker",
    child: worker.child,
    startedAt: Date.now(),
    up: true,
    killedAt: undefined,
    workerId: worker.id,
    worker,
    output: () => worker.output().slice(-20_000),
  };
}

const LOST = Symbol("lost");
type Answer = { status: number; body: Obj } | typeof LOST;

function quantiles(values: number[]): { p50: number; p90: number; max: number } {
  const s = [...values].sort((a, b) => a - b);
  const q = (p: number) => s[Math.min(s.length - 1, Math.floor(p * s.length))] ?? Number.NaN;
  return { p50: q(0.5), p90: q(0.9), max: s.at(-1) ?? Number.NaN };
}

/** A row of chaos_audit.job_runs: a claim of a job, or the end of a run (`end:<status>`, `taken_over`). */
export interface JobRunRow {
  job_id: string;
  kind: string;
  worker: string | null;
  attempt: number;
  what: string;
  at: Date;
}

/**
 * Runs of one job that overlapped, from its claims and ends in order (`runs` ordered by job, then
 * as written): a claim while another run holds the job, an end that is not the holder's, or a run
 * taken over (its lease ran out) from a worker that had not been killed by then (`killedAt`: kill
 * times by worker id) — that worker was alive and could still be running the job.
 */
export function jobOverlaps(
  runs: JobRunRow[],
  killedAt: Map<string, number>,
): { overlaps: JobOverlap[]; takeovers: number } {
  const overlaps: JobOverlap[] = [];
  let takeovers = 0;
  const holder = new Map<string, { worker: string | null; attempt: number }>();
  for (const r of runs) {
    const held = holder.get(r.job_id);
    const at = { jobId: r.job_id, kind: r.kind, worker: String(r.worker) };
    if (r.what === "claim") {
      if (held) overlaps.push({ ...at, detail: `claimed while attempt ${held.attempt} held it` });
      holder.set(r.job_id, { worker: r.worker, attempt: r.attempt });
      continue;
    }
    if (!held || held.worker !== r.worker || held.attempt !== r.attempt)
      overlaps.push({
        ...at,
        detail: `${r.what} of attempt ${r.attempt}, not the one held (${JSON.stringify(held)})`,
      });
    holder.delete(r.job_id);
    if (r.what === "taken_over") {
      takeovers++;
      const killed = r.worker ? killedAt.get(r.worker) : undefined;
      if (killed === undefined || killed > r.at.getTime())
        overlaps.push({
          ...at,
          detail: `taken over at ${r.at.toISOString()} from a worker ${killed === undefined ? "never killed" : `killed later, at ${new Date(killed).toISOString()}`}`,
        });
    }
  }
  return { overlaps, takeovers };
}

export async function runChaos(opts: ChaosOptions): Promise<ChaosReport> {
  const log = opts.log ?? (() => {});
  const runId = randomUUID().slice(0, 6);
  const dataDir = tempDir("backline-chaos-");
  const receiver = await WebhookReceiver.start();
  const incarnations: Incarnation[] = [];
  const apis: (Incarnation | undefined)[] = [];
  const workers: (Incarnation | undefined)[] = [];
  const generation = new Map<string, number>();
  const nameOf = (slot: string) => {
    const g = (generation.get(slot) ?? 0) + 1;
    generation.set(slot, g);
    return `${slot}#${g}`;
  };

  try {
    // --- the world: sandbox stores, a tenant reviewed by its operator, a label with a live key
    await opts.owner.transaction((tx) => tx.exec(AUDIT_SQL), { readOnly: false });
    const stores = [`chaos_a_${runId}`, `chaos_b_${runId}`];
    await opts.db.asService(async (tx) => {
      for (const code of stores) {
        await tx.query("insert into internal.stores (code, name, sort, settings) values ($1, $2, 1000, $3)", [
          code,
          `Chaos ${code}`,
          JSON.stringify({
            adapter: "sandbox",
            sandbox: { ack_after_ms: 300, live_after_ms: 200, takedown_after_ms: 200 },
          }),
        ]);
      }
    });
    const { tenant, keys } = await createTenant(opts.db, {
      name: `Chaos ${runId}`,
      slug: `chaos-${runId}`,
      settings: {
        require_media: false,
        gs1_company_prefix: "2000000",
        auto_review: false,
        delivery_adapter: "sandbox",
        public_api_rate_limit: { max: 1_000_000, windowSeconds: 1 },
        rest_rate_limits: {
          tenant: { max: 1_000_000, windowSeconds: 1 },
          caller: { max: 1_000_000, windowSeconds: 1 },
        },
      },
    });
    const account = await createAccount(opts.db, { tenantId: tenant.id, name: "Night Owl Records" });
    const { secret: apiKey } = await issueKey(opts.db, { accountId: account.id, mode: "live" });

    // --- the processes
    const env: Record<string, string> = {
      DATABASE_URL: opts.loginUrl,
      MIGRATE_ON_START: "false",
      DEV_TENANT: "false",
      DATA_DIR: dataDir,
      ENCRYPTION_KEY: opts.encryptionKey,
      WEBHOOK_ALLOW_PRIVATE: "true",
    };
    const workerEnv = { ...env, WORKER_CONCURRENCY: "4", WORKER_LEASE_MS: String(opts.leaseMs) };
    const ports = [await freePort(), await freePort(), await freePort()];
    const startApiSlot = async (i: number) => {
      // Its port again; a start that fails (another process took the port meanwhile) is tried twice more.
      let inc: Incarnation | undefined;
      for (let attempt = 1; !inc; attempt++) {
        try {
          inc = await startApi(nameOf(`api${i + 1}`), ports[i] as number, env);
        } catch (error) {
          if (attempt >= 3) throw error;
          log(`starting api${i + 1} failed; again: ${String(error).slice(0, 300)}`);
        }
      }
      incarnations.push(inc);
      apis[i] = inc;
      return inc;
    };
    const startWorkerSlot = async (i: number) => {
      const inc = await startWorker(nameOf(`worker${i + 1}`), workerEnv);
      incarnations.push(inc);
      workers[i] = inc;
      return inc;
    };
    await Promise.all([...[0, 1, 2].map(startApiSlot), ...[0, 1].map(startWorkerSlot)]);
    log(`processes up: ${incarnations.map((i) => `${i.name} (pid ${i.child.pid})`).join(", ")}`);

    // --- the clients
    let requests = 0;
    let clientRetries = 0;
    let heldIdempotencyKeys = 0;
    let excusedFailures = 0;
    const unexcused: ClientFailure[] = [];

    /** One request to one API process that is up; LOST when it failed (recorded, excused or not). */
    async function send(
      op: string,
      method: string,
      urlPath: string,
      init: { body?: unknown; headers?: Record<string, string> } = {},
    ): Promise<Answer> {
      let target: Incarnation | undefined;
      for (;;) {
        const up = apis.filter((a): a is Incarnation => a?.up === true);
        target = up[Math.floor(Math.random() * up.length)];
        if (target) break;
        await sleep(20);
      }
      requests++;
      const sentAt = Date.now();
      let outcome: string;
      try {
        const res = await fetch(`http://127.0.0.1:${target.port}${urlPath}`, {
          method,
          headers: {
            ...(init.body !== undefined ? { "content-type": "application/json" } : {}),
            ...init.headers,
          },
          ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
          dispatcher: target.agent,
          signal: AbortSignal.timeout(30_000),
        } as RequestInit);
        const text = await res.text();
        if (res.status < 500) {
          let body: Obj = {};
          try {
            body = text ? (JSON.parse(text) as Obj) : {};
          } catch {
            body = { text };
          }
          return { status: res.status, body };
        }
        outcome = `${res.status} ${text.slice(0, 300)}`;
      } catch (error) {
        const e = error as { name?: string; cause?: { code?: string; message?: string } };
        outcome = e.cause?.code ?? e.cause?.message ?? e.name ?? String(error);
      }
      const seenAt = Date.now();
      const killedAt = target.killedAt;
      if (killedAt !== undefined && killedAt <= seenAt) excusedFailures++;
      else unexcused.push({ op, process: target.name, outcome, sentAt, seenAt, killedAt });
      // A live process failing over and over is a finding already: stop sending, not loop forever.
      if (unexcused.length > 50) throw new Error(`over 50 failures on live processes, the last: ${outcome}`);
      clientRetries++;
      return LOST;
    }

    const bearer = { authorization: `Bearer ${apiKey}` };
    const api = (
      op: string,
      method: string,
      p: string,
      body?: unknown,
      headers: Record<string, string> = {},
    ) => send(op, method, `/api/public/v1${p}`, { body, headers: { ...bearer, ...headers } });

    /** A GET that must answer 200: sent again after a lost attempt. */
    async function read(op: string, p: string): Promise<Obj> {
      for (;;) {
        const a = await api(op, "GET", p);
        if (a === LOST) continue;
        if (a.status !== 200)
          throw new Error(`${op}: GET ${p} answered ${a.status} ${JSON.stringify(a.body)}`);
        return a.body;
      }
    }

    const statusOf = async (id: string) => String((await read("status", `/releases/${id}/status`)).status);

    async function waitFor(id: string, target: string, deadline: number): Promise<string> {
      for (;;) {
        const status = await statusOf(id);
        if (status === "rejected") throw new Error(`release ${id} was rejected`);
        if (atLeast(status, target)) return status;
        if (Date.now() > deadline) throw new Error(`release ${id} still ${status}, waiting for ${target}`);
        // A client polling a release's status about twice a second.
        await sleep(400 + Math.random() * 400);
      }
    }

    /** A POST with an Idempotency-Key, as a careful client sends it; `found` reads whether it took effect. */
    async function create(op: string, p: string, body: Obj, found: () => Promise<string | undefined>) {
      let key = randomUUID();
      for (;;) {
        const a = await api(op, "POST", p, body, { "idempotency-key": key });
        if (a !== LOST && a.status === 201) return String(a.body.id);
        if (a !== LOST && a.body.code === "idempotency_request_in_progress") {
          // The first request's process was killed while it held the key (it frees it after two
          // minutes): whether it took effect is read, and a request that did not is made anew.
          heldIdempotencyKeys++;
          const id = await found();
          if (id) return id;
          key = randomUUID();
          continue;
        }
        if (a !== LOST) throw new Error(`${op}: ${a.status} ${JSON.stringify(a.body)}`);
      }
    }

    /**
     * A state change, sent until it answers `ok`. After a lost answer, or a 409 (a lost attempt
     * that took effect makes the next one conflict), the release says whether it happened.
     */
    async function transition(
      op: string,
      id: string,
      attempt: () => Promise<Answer>,
      ok: number,
      done: string,
    ) {
      for (;;) {
        const a = await attempt();
        if (a !== LOST && a.status === ok) return;
        if (a !== LOST && a.status !== 409)
          throw new Error(`${op} ${id}: ${a.status} ${JSON.stringify(a.body)}`);
        const status = await statusOf(id);
        if (atLeast(status, done)) return;
        if (a !== LOST)
          throw new Error(`${op} ${id}: ${a.status} ${JSON.stringify(a.body)} (the release is ${status})`);
      }
    }

    const nextIsrc = isrcs(
      `QZ${runId
        .slice(0, 3)
        .toUpperCase()
        .replace(/[^A-Z0-9]/g, "X")}`,
    );
    const releaseDate = inDays(60);

    async function findRelease(title: string): Promise<string | undefined> {
      for (let offset = 0; ; offset += 100) {
        const page = await read("find", `/releases?limit=100&offset=${offset}`);
        const data = page.data as { id: string; title: string }[];
        const hit = data.find((r) => r.title === title);
        if (hit) return hit.id;
        if (!page.has_more) return undefined;
      }
    }

    const ids: string[] = [];
    const times: number[] = [];
    const failures: { id: string; error: string }[] = [];

    async function drive(n: number): Promise<void> {
      const started = Date.now();
      const deadline = started + opts.releaseTimeoutMs;
      const title = `Chaos ${runId} ${n}`;
      let id = "";
      try {
        id = await create(
          "create",
          "/releases",
          {
            title,
            release_type: "single",
            artist_name: "Mira Sol",
            primary_genre: "electronic",
            release_date: releaseDate,
            licensed_territories_include: "WW",
            services: stores,
          },
          () => findRelease(title),
        );
        ids.push(id);
        const isrc = nextIsrc();
        await create("track", `/releases/${id}/tracks`, { title, isrc, duration: 180 }, async () => {
          const release = await read("release", `/releases/${id}`);
          return (release.tracks as { id: string }[])[0]?.id;
        });
        await transition(
          "submit",
          id,
          () => api("submit", "POST", `/releases/${id}/submit`),
          200,
          "submitted",
        );
        // The review job moves it to in_review; the operator approves it on the admin API.
        await waitFor(id, "in_review", deadline);
        await transition(
          "approve",
          id,
          () =>
            send("approve", "POST", `/admin/v1/releases/${id}/approve`, {
              body: {},
              headers: { apikey: keys.service_role_key },
            }),
          200,
          "approved",
        );
        await waitFor(id, "live", deadline);
        await transition(
          "takedown",
          id,
          () => api("takedown", "POST", `/releases/${id}/takedown`, { reason: "Chaos" }),
          202,
          "takedown_requested",
        );
        await waitFor(id, "taken_down", deadline);
        times.push(Date.now() - started);
      } catch (error) {
        failures.push({ id: id || title, error: error instanceof Error ? error.message : String(error) });
      }
    }

    // --- the killer
    const runStart = Date.now();
    const kills: ChaosReport["kills"] = [];
    const restarts: Promise<void>[] = [];
    const restartFailures: unknown[] = [];
    let stopKilling = false;
    let wakeKiller: () => void = () => {};
    let killerDone = false;
    const killer = (async () => {
      let kind: "api" | "worker" = Math.random() < 0.5 ? "api" : "worker";
      const [min, max] = opts.killEveryMs;
      while (!stopKilling && kills.length < (opts.maxKills ?? Number.POSITIVE_INFINITY)) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, min + Math.random() * (max - min));
          wakeKiller = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        if (stopKilling) break;
        // Kinds alternate (both are killed even in a short run), and at most one process of a kind
        // is down at a time: two API processes and a worker are always up, as an operator's
        // deployment keeps enough to carry the load (with one API process left, a busy machine
        // sheds requests with 503 too_many_connections, by design). A kind whose process is still
        // starting waits; the other goes first.
        const allUp = (k: "api" | "worker") => (k === "api" ? apis : workers).every((inc) => inc?.up);
        while (!stopKilling && restartFailures.length === 0 && !allUp(kind)) {
          if (allUp(kind === "api" ? "worker" : "api")) kind = kind === "api" ? "worker" : "api";
          else await sleep(100);
        }
        // A process that would not start again ends the killing; the run then fails with its output.
        if (stopKilling || restartFailures.length > 0) break;
        const upOf = (k: "api" | "worker") =>
          (k === "api" ? apis : workers).flatMap((inc, i) => (inc?.up ? [i] : []));
        const slots = kind === "api" ? apis : workers;
        let candidates = upOf(kind);
        // A random process of the kind; a worker in the middle of a job if there is one, so its
        // jobs have to be taken over.
        if (kind === "worker") {
          const busy = new Set(
            (
              await opts.owner.transaction(
                (tx) =>
                  tx.query<{ worker: string }>(
                    "select distinct locked_by as worker from internal.jobs where status = 'running'",
                  ),
                { readOnly: true },
              )
            ).rows.map((r) => r.worker),
          );
          const holding = candidates.filter((i) => busy.has(String(workers[i]?.workerId)));
          if (holding.length > 0) candidates = holding;
        }
        const slot = candidates[Math.floor(Math.random() * candidates.length)] ?? 0;
        const victim = slots[slot];
        if (!victim) continue;
        victim.up = false;
        victim.killedAt = Date.now();
        const exited = new Promise((r) => victim.child.once("exit", r));
        victim.child.kill("SIGKILL");
        await exited;
        const kill = { at: victim.killedAt - runStart, process: victim.name, kind, restartMs: Number.NaN };
        kills.push(kill);
        log(`killed ${victim.name} (pid ${victim.child.pid}) at +${kill.at} ms`);
        // Started again at once (an API process on its port), while the killer goes on.
        const restart = Date.now();
        restarts.push(
          (kind === "api" ? startApiSlot(slot) : startWorkerSlot(slot)).then(
            (next) => {
              kill.restartMs = Date.now() - restart;
              log(`started ${next.name} (pid ${next.child.pid}) in ${kill.restartMs} ms`);
            },
            (error: unknown) => {
              restartFailures.push(error);
            },
          ),
        );
        kind = kind === "api" ? "worker" : "api";
      }
    })().finally(() => {
      killerDone = true;
    });

    // --- the run
    const receiverRoute = receiver.route("chaos");
    const registered = await (async () => {
      for (;;) {
        const a = await api(
          "register",
          "POST",
          "/webhooks",
          {
            url: receiverRoute.url,
            events: [
              "release.submitted",
              "release.approved",
              "release.rejected",
              "release.live",
              "release.takedown_completed",
            ],
          },
          { "idempotency-key": `register-${runId}` },
        );
        if (a !== LOST && a.status === 201) return a.body;
        if (a !== LOST && a.body.code !== "idempotency_request_in_progress")
          throw new Error(`registering the endpoint: ${a.status} ${JSON.stringify(a.body)}`);
        await sleep(200);
      }
    })();
    receiverRoute.secrets.push(String(registered.secret));

    let next = 0;
    const lanes = Array.from({ length: Math.min(opts.concurrency, opts.releases) }, async () => {
      for (;;) {
        const n = next++;
        if (n >= opts.releases) return;
        const spread = opts.spreadOverKills ?? 0;
        const needed = Math.floor((n * (spread + 1)) / opts.releases);
        while (kills.length < Math.min(needed, opts.maxKills ?? needed) && !killerDone) await sleep(50);
        await drive(n + 1);
        if ((n + 1) % 25 === 0) log(`${times.length} releases taken down, ${failures.length} failed`);
      }
    });
    await Promise.all(lanes);
    stopKilling = true;
    wakeKiller();
    await killer;
    await Promise.all(restarts);
    if (restartFailures.length > 0) throw restartFailures[0];
    const drivenMs = Date.now() - runStart;
    log(`releases done in ${drivenMs} ms; ${kills.length} kills`);

    // --- afterwards: every event at the endpoint, every delivery recorded
    const q = async <T extends Obj>(sql: string, params: unknown[] = []) =>
      (await opts.owner.transaction((tx) => tx.query<T>(sql, params), { readOnly: true })).rows;
    const subscribed = registered.events as string[];
    const dbEvents = () =>
      q<{ id: string; type: string }>(
        "select id::text as id, type from internal.events where account_id = $1 and type = any($2::text[]) order by created_at",
        [account.id, subscribed],
      );
    const receivedIds = () => new Set(receiverRoute.received.map((r) => r.headers["webhook-id"]));
    const pendingDeliveries = async () =>
      Number(
        (
          await q<{ n: string }>(
            "select count(*)::text as n from internal.webhook_deliveries where endpoint_id = $1 and status <> 'succeeded'",
            [registered.id],
          )
        )[0]?.n,
      );
    const settleBy = Date.now() + 60_000;
    let events = await dbEvents();
    while (Date.now() < settleBy) {
      events = await dbEvents();
      const got = receivedIds();
      if (events.every((e) => got.has(e.id)) && (await pendingDeliveries()) === 0) break;
      await sleep(200);
    }
    const got = receivedIds();
    const missingEvents = events.filter((e) => !got.has(e.id));
    const badSignatures = receiverRoute.received.filter((r) => !r.verifiedBy[0]).length;

    // --- the jobs: one run at a time per job
    const jobs = await q<{
      id: string;
      kind: string;
      status: string;
      attempts: number;
      last_error: string | null;
    }>("select id::text as id, kind, status, attempts, last_error from internal.jobs order by id");
    const runs = await q<JobRunRow & Obj>(
      "select job_id::text as job_id, kind, worker, attempt, what, at from chaos_audit.job_runs order by job_id, n",
    );
    const killedAt = new Map<string, number>();
    for (const inc of incarnations)
      if (inc.workerId && inc.killedAt !== undefined) killedAt.set(inc.workerId, inc.killedAt);
    const { overlaps, takeovers } = jobOverlaps(runs, killedAt);

    const statuses = await q<{ id: string; status: string }>(
      "select id::text as id, status from public.releases where account_id = $1",
      [account.id],
    );
    const errorOf = new Map(failures.map((f) => [f.id, f.error]));
    const notFinal: ChaosReport["notFinal"] = statuses
      .filter((r) => r.status !== "taken_down")
      .map((r) => ({ ...r, ...(errorOf.has(r.id) ? { error: errorOf.get(r.id) } : {}) }));
    for (const f of failures)
      if (!statuses.some((s) => s.id === f.id)) notFinal.push({ id: f.id, status: "none", error: f.error });
    const attempts = await q<{ n: string }>(
      "select count(*)::text as n from internal.webhook_attempts a join internal.webhook_deliveries d on d.id = a.delivery_id where d.endpoint_id = $1",
      [registered.id],
    );

    return {
      releases: opts.releases,
      final: statuses.filter((r) => r.status === "taken_down").length,
      notFinal,
      durationMs: drivenMs,
      kills,
      requests,
      clientRetries,
      heldIdempotencyKeys,
      unexcusedFailures: unexcused,
      excusedFailures,
      events: events.length,
      eventsReceived: got.size,
      missingEvents,
      duplicateDeliveries: receiverRoute.received.length - got.size,
      badSignatures,
      deliveriesNotSucceeded: await pendingDeliveries(),
      jobs: jobs.length,
      jobRuns: runs.filter((r) => r.what === "claim").length,
      jobRetries: jobs.reduce((n, j) => n + Math.max(0, j.attempts - 1), 0),
      deadJobs: jobs.filter((j) => j.status === "dead"),
      takeovers,
      overlaps,
      timeToFinalMs: quantiles(times),
      webhookAttempts: Number(attempts[0]?.n),
    };
  } catch (error) {
    const tail = incarnations
      .map((i) => `--- ${i.name}${i.killedAt ? " (killed)" : ""}\n${i.output().slice(-3000)}`)
      .join("\n");
    throw new Error(`${error instanceof Error ? error.stack : String(error)}\n${tail}`);
  } finally {
    await Promise.all(
      incarnations.map(async (inc) => {
        if (inc.child.exitCode === null && inc.child.signalCode === null) {
          const exited = new Promise((r) => inc.child.once("exit", r));
          inc.child.kill("SIGTERM");
          const timer = setTimeout(() => inc.child.kill("SIGKILL"), 15_000);
          await exited;
          clearTimeout(timer);
        }
        await inc.agent?.destroy().catch(() => {});
      }),
    );
    await receiver.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
