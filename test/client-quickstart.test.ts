import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import {
  BacklineApiError,
  type BacklineClient,
  createBacklineClient,
  pages,
  paginate,
  type RetryEvent,
  unwrap,
  verifyWebhook,
  type WebhookEvent,
  type WebhookEventOf,
} from "@backline/client";
import { createTestDb, ENGINES, type TestDb } from "./support/db.ts";
import { type RunningServer, runCli, startServer, tempDir } from "./support/process.ts";

/**
 * docs/public-api.md's quickstart with @backline/client (packages/client) instead of curl, against
 * `npm start`'s server over real HTTP, on each engine: artist → release → track → upload URLs and
 * uploads → the lists walked with the pagination helper → submit → poll to live → royalties, while
 * a local receiver takes the webhooks and verifies each with `verifyWebhook`. Then what fails: a
 * 422 read as a typed error with its field, and a POST whose answer is lost on the way back,
 * retried by the client with the same Idempotency-Key and run once by the server.
 */

interface Delivery {
  event?: WebhookEvent;
  error?: string;
}

/** A receiver as an account writes one with the client: the raw body verified, 400 when it fails. */
async function startReceiver(secret: () => string) {
  const deliveries: Delivery[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      try {
        deliveries.push({ event: verifyWebhook(Buffer.concat(chunks), req.headers, secret()) });
        res.writeHead(204).end();
      } catch (error) {
        deliveries.push({ error: String(error) });
        res.writeHead(400).end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/backline`,
    deliveries,
    async waitFor<T extends WebhookEvent["type"]>(
      type: T,
      match: (e: WebhookEventOf<T>) => boolean,
      timeoutMs = 60_000,
    ): Promise<WebhookEventOf<T>> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = deliveries.find((d) => d.event?.type === type && match(d.event as WebhookEventOf<T>));
        if (found) return found.event as WebhookEventOf<T>;
        if (Date.now() > deadline) {
          throw new Error(
            `no ${type} after ${timeoutMs} ms; got ${JSON.stringify(deliveries.map((d) => d.event?.type ?? d.error))}`,
          );
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * A proxy in front of the server that loses the answer of the first request matching `lose`: it
 * forwards the request, lets the server finish it, then cuts the client's connection instead of
 * answering — a timeout or a reset on the way back, as networks do.
 */
async function startLossyProxy(upstream: string, lose: (req: http.IncomingMessage) => boolean) {
  const target = new URL(upstream);
  const seen: { method: string; url: string; key: string | undefined; lost: boolean }[] = [];
  let lost = false;
  const server = http.createServer((req, res) => {
    const loseThis = !lost && lose(req);
    if (loseThis) lost = true;
    const key = req.headers["idempotency-key"];
    seen.push({
      method: req.method ?? "",
      url: req.url ?? "",
      key: typeof key === "string" ? key : undefined,
      lost: loseThis,
    });
    const headers = { ...req.headers };
    delete headers.connection;
    const upstreamReq = http.request(
      { host: target.hostname, port: target.port, method: req.method, path: req.url, headers, agent: false },
      (answer) => {
        if (loseThis) {
          answer.resume();
          answer.on("end", () => req.socket.destroy());
          return;
        }
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstreamReq.on("error", () => res.destroy());
    req.pipe(upstreamReq);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const inDays = (days: number) => new Date(Date.now() + days * 86_400_000).toISOString().slice(0, 10);

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

for (const kind of ENGINES)
  describe(`@backline/client against a running server [${kind}]`, () => {
    let server: RunningServer | undefined;
    let pg: TestDb | undefined;
    let dir: string;
    let settings: Record<string, string>;
    let baseUrl: string;
    let apiKey: string;
    let api: BacklineClient;
    let secret = "";
    let receiver: Awaited<ReturnType<typeof startReceiver>>;

    before(async () => {
      dir = tempDir("backline-client-");
      settings = { DATA_DIR: path.join(dir, ".backline") };
      if (kind === "postgres") {
        pg = await createTestDb("postgres");
        settings = {
          ...settings,
          DATABASE_URL: String(pg.url),
          MIGRATE_ON_START: "false",
          DEV_TENANT: "true",
        };
      }
      // The receiver listens on 127.0.0.1: allowed only with WEBHOOK_ALLOW_PRIVATE (docs/webhooks.md).
      server = await startServer({ ...settings, WEBHOOK_ALLOW_PRIVATE: "true" }, 300_000);
      baseUrl = `${server.url}/api/public/v1`;
      apiKey = JSON.parse(fs.readFileSync(path.join(dir, ".backline/dev-tenant.json"), "utf8")).api_key;
      api = createBacklineClient({ baseUrl, apiKey });
      receiver = await startReceiver(() => secret);
    });

    after(async () => {
      await receiver?.close();
      await server?.stop();
      await pg?.close();
      fs.rmSync(dir, { recursive: true, force: true });
    });

    test("the quickstart, with the client: from an artist to a live release, its royalties and its webhooks", async () => {
      const endpoint = await unwrap(
        api.POST("/webhooks", {
          body: {
            url: receiver.url,
            events: ["release.submitted", "release.approved", "release.live", "royalties.imported"],
          },
        }),
      );
      assert.match(endpoint.secret, /^whsec_/);
      secret = endpoint.secret;

      const artist = await unwrap(
        api.POST("/artists", {
          body: { name: "Luna Vale", store_ids: { spotify: "4Z8W4fKeB5YxbusRsdQVPb" } },
        }),
      );
      const release = await unwrap(
        api.POST("/releases", {
          body: {
            title: "Night Drive",
            release_type: "single",
            artist_id: artist.id,
            primary_genre: "electronic",
            release_date: inDays(30),
            licensed_territories_include: "WW",
            services: ["spotify", "apple_music"],
            copyright: "2026 Night Owl Records",
          },
        }),
      );
      assert.equal(release.status, "draft");
      const track = await unwrap(
        api.POST("/releases/{id}/tracks", {
          params: { path: { id: release.id } },
          body: {
            title: "Night Drive",
            isrc: "QZ-ES9-26-00001",
            contributors: [{ name: "Luna Vale", role: "composer" }],
            splits: [
              { name: "Luna Vale", share: 70 },
              { name: "Night Owl Records", share: 30 },
            ],
          },
        }),
      );
      assert.equal(track.isrc, "QZES92600001");

      // Uploads: the URL comes from the API, the file goes straight to storage.
      const samples = await runCli(["media", "samples", dir], settings);
      assert.equal(samples.code, 0, samples.stderr);
      const cover = await unwrap(
        api.POST("/releases/{id}/artwork-upload-url", {
          params: { path: { id: release.id } },
          body: { filename: "cover.jpg" },
        }),
      );
      const audio = await unwrap(
        api.POST("/releases/{id}/tracks/{trackId}/audio-upload-url", {
          params: { path: { id: release.id, trackId: track.id } },
          body: { filename: "track.wav" },
        }),
      );
      for (const [upload, file, type] of [
        [cover, "cover.jpg", "image/jpeg"],
        [audio, "track.wav", "audio/wav"],
      ] as const) {
        const put = await fetch(upload.upload_url, {
          method: upload.method,
          headers: { "Content-Type": type },
          body: fs.readFileSync(path.join(dir, file)),
        });
        assert.equal(put.status, 200, await put.clone().text());
        const checked = await until(`${file} checked`, async () => {
          const u = await unwrap(
            api.GET("/uploads/{assetId}", { params: { path: { assetId: upload.asset_id } } }),
          );
          return u.status === "valid" || u.status === "invalid" ? u : undefined;
        });
        assert.equal(checked.status, "valid", JSON.stringify(checked));
      }

      // Lists, walked by cursor: a page of two at a time.
      for (const name of ["Aurora Lane", "Coastline", "Mira Sol"]) {
        await unwrap(api.POST("/artists", { body: { name } }));
      }
      const names: string[] = [];
      for await (const a of paginate(api, "/artists", { params: { query: { limit: 2 } } }))
        names.push(a.name);
      assert.deepEqual(names, ["Aurora Lane", "Coastline", "Luna Vale", "Mira Sol"]);
      let pageCount = 0;
      for await (const page of pages(api, "/artists", { params: { query: { limit: 2 } } })) {
        pageCount++;
        assert.ok(page.data.length <= 2);
      }
      assert.equal(pageCount, 2);
      const tracks: string[] = [];
      for await (const t of paginate(api, "/releases/{id}/tracks", {
        params: { path: { id: release.id } },
      })) {
        tracks.push(t.id);
      }
      assert.deepEqual(tracks, [track.id]);

      const problems = await unwrap(
        api.GET("/releases/{id}/problems", { params: { path: { id: release.id } } }),
      );
      assert.equal(problems.ready, true, JSON.stringify(problems));
      const submitted = await unwrap(
        api.POST("/releases/{id}/submit", { params: { path: { id: release.id } } }),
      );
      assert.equal(submitted.status, "submitted");

      const status = await until("the release live", async () => {
        const s = await unwrap(api.GET("/releases/{id}/status", { params: { path: { id: release.id } } }));
        return s.status === "live" || s.status === "rejected" ? s : undefined;
      });
      assert.equal(status.status, "live");
      assert.equal(status.approval, "approved");
      assert.deepEqual(
        status.stores.map((s) => [s.store, s.status]),
        [
          ["apple_music", "live"],
          ["spotify", "live"],
        ],
      );

      // The release's events, each verified by the receiver with verifyWebhook, in its own type.
      const isRelease = (e: { data: { object: { id: string } } }) => e.data.object.id === release.id;
      const live = await receiver.waitFor("release.live", isRelease);
      assert.equal(live.data.object.status, "live");
      assert.equal(live.data.object.title, "Night Drive");
      const firsts = await Promise.all([
        receiver.waitFor("release.submitted", isRelease),
        receiver.waitFor("release.approved", isRelease),
      ]);
      assert.ok(firsts[0].sequence < firsts[1].sequence && firsts[1].sequence < live.sequence);

      // Royalties: the operator imports a store report for the live release.
      const report = path.join(dir, "report.csv");
      const sample = await runCli(
        ["royalties", "sample", "--release", release.id, "--format", "backline", "--out", report],
        settings,
      );
      assert.equal(sample.code, 0, sample.stderr);
      const imported = await runCli(
        ["royalties", "import", report, "--tenant", "dev", "--format", "backline"],
        settings,
      );
      assert.equal(imported.code, 0, imported.stderr);
      const royalties = await unwrap(
        api.GET("/releases/{id}/royalties", { params: { path: { id: release.id }, query: { limit: 100 } } }),
      );
      assert.ok(royalties.data.length > 0);
      assert.equal(royalties.total, royalties.data.length);
      assert.ok((royalties.totals ?? []).length > 0);
      let walked = 0;
      for await (const line of paginate(api, "/royalties", {
        params: { query: { release_id: release.id, limit: 4 } },
      })) {
        assert.equal(line.release_id, release.id);
        walked++;
      }
      assert.equal(walked, royalties.total);
      const importedEvent = await receiver.waitFor("royalties.imported", () => true);
      assert.equal(importedEvent.data.object.object, "royalty_import");
      assert.equal(importedEvent.data.object.lines, royalties.total);

      assert.deepEqual(
        receiver.deliveries.filter((d) => d.error),
        [],
        "every delivery verified",
      );
    });

    test("a refused request is a BacklineApiError naming the code and the field; nothing is created", async () => {
      const before = (await unwrap(api.GET("/releases", { params: { query: { limit: 1 } } }))).total;
      const err = await unwrap(
        api.POST("/releases", {
          body: {
            title: "Bad",
            release_type: "single",
            artist_name: "Luna Vale",
            release_date: inDays(30),
            territories: ["XX"],
            services: ["spotify", "nope"],
          },
        }),
      ).catch((e: unknown) => e);
      assert.ok(err instanceof BacklineApiError, String(err));
      assert.equal(err.status, 422);
      assert.equal(err.code, "validation_failed");
      assert.equal(err.field("territories[0]")?.code, "invalid_territory");
      assert.equal(err.field("services[1]")?.code, "invalid_service");
      assert.match(String(err.requestId), /\S/);
      assert.equal((await unwrap(api.GET("/releases", { params: { query: { limit: 1 } } }))).total, before);
    });

    test("a POST whose answer is lost is retried with the same Idempotency-Key and the server runs it once", async () => {
      const proxy = await startLossyProxy(server?.url ?? "", (req) => req.method === "POST");
      const retries: RetryEvent[] = [];
      try {
        const lossy = createBacklineClient({
          baseUrl: `${proxy.url}/api/public/v1`,
          apiKey,
          baseDelayMs: 50,
          onRetry: (r) => retries.push(r),
        });
        const res = await lossy.POST("/artists", { body: { name: "Once Only" } });
        assert.equal(res.response.status, 201, JSON.stringify(res.error));
        assert.equal(res.response.headers.get("idempotent-replayed"), "true");
        const posts = proxy.seen.filter((s) => s.method === "POST");
        assert.deepEqual(
          posts.map((p) => p.lost),
          [true, false],
        );
        assert.ok(posts[0]?.key);
        assert.equal(posts[1]?.key, posts[0]?.key);
        assert.deepEqual(
          retries.map((r) => [r.attempt, r.idempotencyKey]),
          [[1, posts[0]?.key]],
        );
        assert.equal(typeof retries[0]?.reason, "string", "a network error");
        const named: string[] = [];
        for await (const a of paginate(api, "/artists", { params: { query: { limit: 100 } } })) {
          if (a.name === "Once Only") named.push(a.id);
        }
        assert.deepEqual(named, [res.data?.id]);
      } finally {
        await proxy.close();
      }
    });
  });
