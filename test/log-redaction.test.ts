import assert from "node:assert/strict";
import { randomBytes, randomUUID } from "node:crypto";
import fs from "node:fs";
import { after, test } from "node:test";
import type { FastifyInstance } from "fastify";
import pino, { type Logger } from "pino";
import { loadConfig } from "../src/config.ts";
import { buildApp } from "../src/http/app.ts";
import { createLogger } from "../src/start/process.ts";
import { openStorage } from "../src/storage/open.ts";
import { loadSecretBox } from "../src/webhooks/secrets.ts";
import { TEST_ENCRYPTION_KEY, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { freePort, tempDir } from "./support/process.ts";

/**
 * Issue 26, item 9: the server's logs hold no secret. The real app, with a real pino logger
 * writing into a buffer (at info, then debug), gets one request carrying each kind of secret a
 * request can carry — a tenant's service key as `?apikey=`, keys and sessions in headers and
 * cookies, a signed download URL, an upload token, an e-mail link's token and code, OAuth and S3
 * parameters, tokens as path segments — and an error whose message and properties hold more.
 * None of the secret values may appear anywhere in what was logged.
 */

const rnd = (label: string) => `${label}${randomBytes(12).toString("hex")}`;

describeEachEngine("logs: no secret reaches the log", (t) => {
  const dataDir = tempDir("backline-logs-");
  after(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  /** The app on a socket, logging into `lines`; two routes of this test's own that log and throw. */
  async function loggingApp(makeLogger: (stream: { write(s: string): void }) => Logger) {
    const lines: string[] = [];
    const port = await freePort();
    const config = loadConfig({
      PORT: String(port),
      DATA_DIR: dataDir,
      ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
      LOG_LEVEL: "debug",
    });
    const app: FastifyInstance = buildApp({
      config,
      db: t().db,
      logger: makeLogger({ write: (s: string) => void lines.push(s) }),
    });
    // Something in a route logs what it was given, and something else fails with a URL in hand.
    app.get("/test/echo", async (request) => {
      request.log.info({ headers: request.headers, url: request.url, query: request.query }, "echo");
      return { ok: true };
    });
    app.get("/test/boom", async (request) => {
      const error = new Error(
        `GET https://s3.example.com/media/k?X-Amz-Signature=${ERROR_SIGNATURE} failed; sent Bearer ${ERROR_BEARER}`,
      ) as Error & Record<string, unknown>;
      error.headers = request.headers;
      error.config = { url: request.url, password: ERROR_PASSWORD };
      throw error;
    });
    await app.listen({ port, host: "127.0.0.1" });
    return { app, config, url: `http://127.0.0.1:${port}`, lines };
  }

  const ERROR_SIGNATURE = rnd("errsig");
  const ERROR_BEARER = rnd("errbearer");
  const ERROR_PASSWORD = rnd("errpass");

  /** Every kind of secret, each in a request; returns the secrets sent. */
  async function sendSecrets(url: string, config: ReturnType<typeof loadConfig>): Promise<string[]> {
    const { keys } = await tenantWithKeys(t());
    const { signer } = openStorage(config, loadSecretBox(config));
    const release = randomUUID();
    const exp = Math.floor(Date.now() / 1000) + 3600;
    const downloadToken = signer.sign({
      use: "download",
      key: `artwork/${randomUUID()}/${release}/cover.jpg`,
      asset: randomUUID(),
      exp,
    });
    const uploadToken = signer.sign({
      use: "upload",
      asset: randomUUID(),
      account: randomUUID(),
      key: `artwork/${randomUUID()}/${release}/cover.jpg`,
      max: 100,
      exp,
    });
    const apiKey = `bk_live_${randomBytes(30).toString("base64url").replace(/[-_]/g, "x").slice(0, 49)}`;
    const emailToken = rnd("mailtoken");
    const innerCode = rnd("innercode");
    const otp = String(100000 + (randomBytes(3).readUIntBE(0, 3) % 900000));
    const refresh = rnd("refresh");
    const access = rnd("access");
    const authCode = rnd("authcode");
    const amzSig = rnd("amzsig");
    const amzCred = rnd("AKIA");
    const amzToken = rnd("sts");
    const cookie = rnd("cookie");
    const xApiKey = rnd("xapikey");
    const sessionJwt = keys.anon_key;

    const requests: [string, RequestInit?][] = [
      // A tenant's master key in the query string (PostgREST and supabase-js accept it there).
      [`/rest/v1/releases?select=id&apikey=${keys.service_role_key}`],
      // Keys and sessions in headers.
      [
        "/rest/v1/releases?select=id",
        {
          headers: {
            apikey: keys.service_role_key,
            authorization: `Bearer ${sessionJwt}`,
            cookie: `sb-access-token=${cookie}`,
            "x-api-key": xApiKey,
          },
        },
      ],
      ["/api/public/v1/releases", { headers: { authorization: `Bearer ${apiKey}` } }],
      // A signed download URL and an upload token.
      [`/storage/v1/object/sign/artwork/${release}/cover.jpg?token=${downloadToken}`],
      [
        `/storage/v1/object/upload/sign/artwork/${release}/cover.jpg?token=${uploadToken}`,
        { method: "PUT", body: "not an image", headers: { "content-type": "image/jpeg" } },
      ],
      // An e-mail link, its redirect carrying a code of its own; a one-time code.
      [
        `/auth/v1/verify?token=${emailToken}&type=signup&apikey=${keys.anon_key}&redirect_to=${encodeURIComponent(
          `https://app.example.com/welcome?code=${innerCode}`,
        )}`,
      ],
      [`/auth/v1/verify?type=email&token=${otp}&email=someone%40example.com`],
      // OAuth-style parameters and a presigned S3 URL's.
      [`/auth/v1/token?grant_type=refresh_token&refresh_token=${refresh}`, { method: "POST" }],
      [`/auth/v1/callback?code=${authCode}&access_token=${access}`],
      [
        `/storage/v1/object/artwork/x?X-Amz-Credential=${amzCred}%2F20261125%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Signature=${amzSig}&X-Amz-Security-Token=${amzToken}`,
      ],
      // Tokens as path segments.
      [`/api/public/v1/api-keys/${apiKey}`, { headers: { authorization: `Bearer ${apiKey}` } }],
      [`/storage/v1/object/sign/${downloadToken}/x`],
      // A route that logs what it was handed, and one whose error holds secrets.
      [
        `/test/echo?token=${emailToken}`,
        {
          headers: {
            authorization: `Bearer ${sessionJwt}`,
            apikey: keys.service_role_key,
            cookie: `s=${cookie}`,
          },
        },
      ],
      [`/test/boom?apikey=${keys.service_role_key}`, { headers: { authorization: `Bearer ${sessionJwt}` } }],
    ];
    for (const [path, init] of requests) {
      const res = await fetch(`${url}${path}`, init);
      await res.arrayBuffer();
    }
    const jwtParts = (jwt: string) => jwt.split(".").slice(1);
    return [
      ...jwtParts(keys.service_role_key),
      ...jwtParts(keys.anon_key),
      keys.service_role_key,
      keys.anon_key,
      apiKey,
      apiKey.slice("bk_live_".length),
      downloadToken,
      ...downloadToken.split("."),
      uploadToken,
      ...uploadToken.split("."),
      emailToken,
      innerCode,
      otp,
      refresh,
      access,
      authCode,
      amzSig,
      amzCred,
      amzToken,
      cookie,
      xApiKey,
      ERROR_SIGNATURE,
      ERROR_BEARER,
      ERROR_PASSWORD,
    ];
  }

  function assertClean(lines: string[], secrets: string[]) {
    const log = lines.join("");
    // The log is there: every request was logged, with its route, and something was redacted.
    for (const route of [
      "/rest/v1/releases",
      "/storage/v1/object/sign/artwork/",
      "/auth/v1/verify",
      "/test/boom",
    ]) {
      assert.ok(log.includes(route), `${route} was logged`);
    }
    assert.ok(log.includes("[REDACTED]"), "redactions are marked");
    assert.ok(log.includes('"msg":"echo"'), "the route's own log line is there");
    assert.ok(/"level":50.*unhandled error/.test(log), "the failing route's error was logged");
    for (const secret of secrets) {
      for (const form of new Set([secret, encodeURIComponent(secret)])) {
        const at = log.indexOf(form);
        assert.equal(at, -1, `secret ${form} leaked: …${log.slice(Math.max(0, at - 200), at + 100)}…`);
      }
    }
  }

  test("a logger the app is given (pino at info): request, header, error and field secrets are redacted", async () => {
    const running = await loggingApp((stream) => pino({ level: "info" }, stream));
    try {
      const secrets = await sendSecrets(running.url, running.config);
      assertClean(running.lines, secrets);
    } finally {
      await running.app.close();
    }
  });

  test("the server's own logger (createLogger at debug): the same, messages included", async () => {
    const running = await loggingApp((stream) => createLogger({ logLevel: "debug" }, stream));
    try {
      const secrets = await sendSecrets(running.url, running.config);
      const logger = createLogger(
        { logLevel: "debug" },
        { write: (s: string) => void running.lines.push(s) },
      );
      // Messages that carry a URL or an error's message (Fastify's "Route … not found", `log.error(err)`).
      logger.info(`Route GET:/x?apikey=${secrets[2]} not found`);
      logger.error(new Error(`connecting to postgres://backline:${ERROR_PASSWORD}@db:5432/app failed`));
      logger.warn({ err: new Error(`refused Bearer ${ERROR_BEARER}`) });
      assertClean(running.lines, secrets);
    } finally {
      await running.app.close();
    }
  });
});
