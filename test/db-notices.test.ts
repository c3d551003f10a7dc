import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { describe, test } from "node:test";
import pg from "pg";
import { NoticeConnection } from "../src/db/notices.ts";
import { TEST_DATABASE_URL } from "./support/db.ts";

/**
 * One LISTEN connection per process, whatever the number of channels (src/db/notices.ts): notices
 * reach the listeners of their own channel only, the connection closes with its last listener, and
 * after it drops every listener is called and the channels are listened to again.
 */
describe("notices on PostgreSQL share one connection", {
  skip: !TEST_DATABASE_URL && "TEST_DATABASE_URL unset",
}, () => {
  const url = TEST_DATABASE_URL as string;

  async function withOwner<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      return await fn(c);
    } finally {
      await c.end();
    }
  }
  const connections = (name: string) =>
    withOwner(async (c) => {
      const r = await c.query("select pid from pg_stat_activity where application_name = $1", [
        `${name}-listen`,
      ]);
      return r.rows.map((row) => Number(row.pid));
    });
  const notify = (channel: string) => withOwner((c) => c.query(`select pg_notify($1, '')`, [channel]));

  async function until(what: string, check: () => boolean | Promise<boolean>, ms = 5000): Promise<void> {
    const deadline = Date.now() + ms;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  test("four channels, one connection; each notice reaches its own channel's listeners", async () => {
    const name = `notices-${randomBytes(4).toString("hex")}`;
    const notices = new NoticeConnection({ url, applicationName: name, reconnectMs: 100 });
    const heard = { jobs_x: 0, hooks_x: 0, mail_x: 0, schema_x: 0, jobs_x2: 0 };
    const stops = await Promise.all([
      notices.listen("jobs_x", () => heard.jobs_x++),
      notices.listen("hooks_x", () => heard.hooks_x++),
      notices.listen("mail_x", () => heard.mail_x++),
      notices.listen("schema_x", () => heard.schema_x++),
      notices.listen("jobs_x", () => heard.jobs_x2++),
    ]);
    try {
      assert.equal((await connections(name)).length, 1, "one LISTEN connection for all channels");
      await notify("hooks_x");
      await until("the hooks notice", () => heard.hooks_x === 1);
      await notify("jobs_x");
      await until("both jobs listeners", () => heard.jobs_x === 1 && heard.jobs_x2 === 1);
      assert.deepEqual(heard, { jobs_x: 1, hooks_x: 1, mail_x: 0, schema_x: 0, jobs_x2: 1 });

      // One of two listeners of a channel stops: the other still hears it.
      await (stops[4] as () => Promise<void>)();
      await notify("jobs_x");
      await until("the remaining jobs listener", () => heard.jobs_x === 2);
      assert.equal(heard.jobs_x2, 1);

      // A channel whose last listener stopped is not heard any more.
      await (stops[1] as () => Promise<void>)();
      await notify("hooks_x");
      await notify("mail_x");
      await until("the mail notice", () => heard.mail_x === 1);
      assert.equal(heard.hooks_x, 1);
    } finally {
      for (const stop of stops) await stop();
    }
    await until(
      "the connection to close with its last listener",
      async () => (await connections(name)).length === 0,
    );
  });

  test("a dropped connection calls every listener and is opened again, listening to every channel", async () => {
    const name = `notices-${randomBytes(4).toString("hex")}`;
    const notices = new NoticeConnection({ url, applicationName: name, reconnectMs: 100 });
    const heard = { a: 0, b: 0 };
    const stops = [
      await notices.listen("chan_a", () => heard.a++),
      await notices.listen("chan_b", () => heard.b++),
    ];
    try {
      const [pid] = await connections(name);
      assert.ok(pid);
      await withOwner((c) => c.query("select pg_terminate_backend($1)", [pid]));
      await until("every listener called on the drop", () => heard.a >= 1 && heard.b >= 1);
      await until("a new connection", async () => {
        const pids = await connections(name);
        return pids.length === 1 && pids[0] !== pid;
      });
      const before = { ...heard };
      // The new connection may still be LISTENing: notify until heard.
      await until("a notice on the new connection", async () => {
        await notify("chan_b");
        return heard.b > before.b;
      });
      assert.equal(heard.a, before.a, "chan_a's listener hears nothing of chan_b");
    } finally {
      for (const stop of stops) await stop();
      await notices.close();
    }
  });
});
