import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, test } from "node:test";
import { DataDirInUseError, PgliteEngine } from "../src/db/pglite.ts";
import { tempDir } from "./support/process.ts";

/**
 * PgliteEngine.reopen(): after a first start's initdb and migrations, the server goes on with the
 * same data directory in a fresh thread (src/db/open.ts), so the memory they took is given back.
 * The data stays, the directory stays locked throughout, and the old engine is closed.
 */

const dir = tempDir();
after(() => fs.rmSync(dir, { recursive: true, force: true }));

test("reopen keeps the data and the lock, and closes the old engine", async () => {
  const dataDir = path.join(dir, "pgdata");
  const first = await PgliteEngine.open({ dataDir });
  await first.transaction(
    async (tx) => {
      await tx.exec("create table kept (v text)");
      await tx.query("insert into kept values ($1)", ["before the reopen"]);
    },
    { readOnly: false },
  );
  const second = await first.reopen();
  try {
    await assert.rejects(
      first.transaction((tx) => tx.query("select 1"), { readOnly: true }),
      /closed/,
    );
    const rows = await second.transaction((tx) => tx.query<{ v: string }>("select v from kept"), {
      readOnly: true,
    });
    assert.deepEqual(rows.rows, [{ v: "before the reopen" }]);
    // Still this process's: another opener is refused as before.
    await assert.rejects(PgliteEngine.open({ dataDir }), DataDirInUseError);
  } finally {
    await second.close();
  }
  const third = await PgliteEngine.open({ dataDir });
  await third.close();
});

test("an in-memory database cannot be reopened (it would be lost)", async () => {
  const engine = await PgliteEngine.open();
  try {
    await assert.rejects(engine.reopen(), /only a data directory/);
    const r = await engine.transaction((tx) => tx.query<{ one: number }>("select 1 as one"), {
      readOnly: true,
    });
    assert.equal(r.rows[0]?.one, 1);
  } finally {
    await engine.close();
  }
});
