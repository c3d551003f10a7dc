// The webhook benchmark's sender process (run.ts forks it with BENCH_CHILD set): either a
// WebhookDispatcher as a server or worker process runs one, or a baseline that sends the same
// signed bodies straight to the receiver, without the database, with the same concurrency.
import { randomUUID } from "node:crypto";
import http from "node:http";
import { Db } from "../../src/db/db.ts";
import { PostgresEngine } from "../../src/db/postgres.ts";
import { WebhookDispatcher } from "../../src/webhooks/dispatcher.ts";
import { envelopeBody } from "../../src/webhooks/envelope.ts";
import { SecretBox } from "../../src/webhooks/secrets.ts";
import { WebhookSender } from "../../src/webhooks/sender.ts";
import { signatureHeaders } from "../../src/webhooks/signing.ts";
import {
  type ChildMessage,
  type ChildTask,
  EVENT_TYPE,
  ownCpuMs,
  type ParentMessage,
  releaseData,
} from "./shared.ts";

const task = JSON.parse(process.env.BENCH_CHILD ?? "null") as ChildTask | null;
if (!task || !process.send) throw new Error("child.ts is run by bench/webhooks/run.ts (fork, BENCH_CHILD)");

const tell = (m: ChildMessage) => process.send?.(m);
// The benchmark going away takes this process with it.
let leaving = false;
process.on("disconnect", () => {
  if (!leaving) process.exit(1);
});
const leave = () => {
  leaving = true;
  process.disconnect();
};

if (task.kind === "dispatcher") {
  let warnings = 0;
  // The dispatcher's warnings and errors (a failed claim or record, a lost lease) go to stderr and are counted.
  const complain =
    (level: string) =>
    (...args: unknown[]) => {
      warnings++;
      process.stderr.write(
        `dispatcher ${level}: ${args.map((a) => JSON.stringify(a, (_k, v: unknown) => (v instanceof Error ? v.stack : v))).join(" ")}\n`,
      );
    };
  const logger = { info: () => {}, warn: complain("warn"), error: complain("error") };
  const secrets = new SecretBox(Buffer.from(task.key, "base64"));
  const db = new Db(
    new PostgresEngine({ url: task.url, poolSize: task.poolSize, applicationName: "bench-dispatcher" }),
    { secrets },
  );
  const dispatcher = new WebhookDispatcher({
    db,
    secrets,
    allowPrivate: true,
    concurrency: task.concurrency,
    logger,
  });
  const cpuAtStart = ownCpuMs();
  process.on("message", (m: ParentMessage) => {
    if (m.type !== "stop") return;
    void (async () => {
      const cpuMs = ownCpuMs() - cpuAtStart;
      await dispatcher.stop();
      await db.close();
      tell({ type: "stopped", cpuMs, warnings });
      leave();
    })();
  });
  // Warm the pool (and the LISTEN connection, which start() opens) before the benchmark writes.
  await Promise.all(Array.from({ length: task.poolSize }, () => db.ping()));
  dispatcher.start();
  await new Promise((r) => setTimeout(r, 200));
  tell({ type: "ready" });
} else {
  const { endpoints, concurrency } = task;
  const secrets = endpoints.map((e) => e.secret);
  // The events, as the dispatcher reads them from internal.events; each goes to every endpoint.
  const events = Array.from({ length: task.events }, (_, n) => ({
    id: randomUUID(),
    type: EVENT_TYPE,
    account_id: task.accountId,
    data: releaseData(task.accountId, n),
    created_at: new Date(),
    seq: 1,
  }));
  const total = events.length * endpoints.length;

  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency, maxFreeSockets: concurrency });
  const plainPost = (url: URL, body: string, headers: Record<string, string>): Promise<boolean> =>
    new Promise((resolve) => {
      const req = http.request(
        {
          hostname: url.hostname,
          port: url.port,
          path: url.pathname,
          method: "POST",
          agent,
          headers: {
            ...headers,
            "content-type": "application/json",
            "content-length": String(Buffer.byteLength(body)),
            "user-agent": "Backline-Webhooks/1",
          },
        },
        (res) => {
          res.resume();
          res.on("end", () => resolve(res.statusCode === 204));
          res.on("error", () => resolve(false));
        },
      );
      req.on("error", () => resolve(false));
      req.end(body);
    });
  const sender = new WebhookSender({ allowPrivate: true, maxSocketsPerHost: concurrency });
  const urls = endpoints.map((e) => new URL(e.url));

  tell({ type: "ready" });
  const cpuAtStart = ownCpuMs();
  let next = 0;
  let failed = 0;
  // `concurrency` loops, each taking the next delivery (event by event, every endpoint in turn, as
  // the dispatcher claims them) and doing what the dispatcher does to send one: the envelope, the
  // signature, the POST.
  const loop = async () => {
    for (;;) {
      const i = next++;
      if (i >= total) return;
      const e = i % endpoints.length;
      const event = events[Math.floor(i / endpoints.length)];
      const endpoint = endpoints[e];
      const url = urls[e];
      const secret = secrets[e];
      if (!event || !endpoint || !url || !secret) throw new Error("bad index");
      const body = envelopeBody(event);
      const headers = signatureHeaders([secret], event.id, Math.floor(Date.now() / 1000), body);
      const ok =
        task.client === "http"
          ? await plainPost(url, body, headers)
          : (await sender.send(endpoint.url, body, headers)).outcome === "ok";
      if (!ok) failed++;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
  const cpuMs = ownCpuMs() - cpuAtStart;
  agent.destroy();
  sender.close();
  tell({ type: "done", sent: total, failed, cpuMs });
  leave();
}
