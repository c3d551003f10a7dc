import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import type { FastifyInstance } from "fastify";
import pino from "pino";
import { loadConfig } from "../src/config.ts";
import { Db } from "../src/db/db.ts";
import { loadMigrations } from "../src/db/migrate.ts";
import { PostgresEngine } from "../src/db/postgres.ts";
import { buildApp } from "../src/http/app.ts";
import { describeEachEngine } from "./support/db.ts";

/** The app builder in this process, over a real socket: readiness as a load balancer sees it. */

const logger = pino({ level: "silent" });
const config = loadConfig({});

async function listen(db: Db): Promise<{ app: FastifyInstance; url: string }> {
  const app = buildApp({ config, db, logger });
  const url = await app.listen({ port: 0, host: "127.0.0.1" });
  return { app, url };
}

describeEachEngine("readiness", (t) => {
  let app: FastifyInstance;
  let url: string;
  before(async () => {
    ({ app, url } = await listen(t().db));
  });
  after(() => app.close());

  test("ready when the schema is current", async () => {
    const res = await fetch(`${url}/ready`);
    assert.equal(res.status, 200);
    const body = (await res.json()) as { status: string; database: { engine: string } };
    assert.equal(body.status, "ready");
    assert.equal(body.database.engine, t().kind);
  });

  test("503 with the pending versions when a migration is missing", async () => {
    const last = loadMigrations().length;
    await t().owner.transaction(
      (tx) => tx.query("delete from internal.schema_migrations where version = $1", [last]),
      { readOnly: false },
    );
    const res = await fetch(`${url}/ready`);
    assert.equal(res.status, 503);
    assert.deepEqual(((await res.json()) as { migrations: unknown }).migrations, {
      applied: last - 1,
      pending: [last],
    });
    // /health does not depend on the database.
    assert.equal((await fetch(`${url}/health`)).status, 200);
  });
});

test("readiness: 503 database_unreachable when the database cannot be reached", async () => {
  const db = new Db(
    new PostgresEngine({ url: "postgres://nobody@127.0.0.1:1/none", connectTimeoutMs: 1000 }),
  );
  const { app, url } = await listen(db);
  try {
    const res = await fetch(`${url}/ready`);
    assert.equal(res.status, 503);
    assert.deepEqual(await res.json(), {
      status: "database_unreachable",
      database: { engine: "postgres", reachable: false },
    });
  } finally {
    await app.close();
    await db.close();
  }
});

test("a malformed JSON body is a 400 problem, not a 500", async () => {
  const db = new Db(
    new PostgresEngine({ url: "postgres://nobody@127.0.0.1:1/none", connectTimeoutMs: 1000 }),
  );
  const app = buildApp({ config, db, logger });
  app.post("/echo", async (request) => request.body);
  const url = await app.listen({ port: 0, host: "127.0.0.1" });
  try {
    const res = await fetch(`${url}/echo`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{nope",
    });
    assert.equal(res.status, 400);
    const body = (await res.json()) as { code: string; status: number };
    assert.equal(body.status, 400);
    assert.match(body.code, /^[a-z_]+$/);
    const unsupported = await fetch(`${url}/echo`, {
      method: "POST",
      headers: { "content-type": "application/x-nope" },
      body: "x",
    });
    assert.equal(unsupported.status, 415);
  } finally {
    await app.close();
    await db.close();
  }
});
