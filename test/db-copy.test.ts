import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { asDbError } from "../src/db/errors.ts";
import { copyInPieces } from "../src/db/pglite.ts";
import { describeEachEngine } from "./support/db.ts";

// Tx.copyFrom (src/db/types.ts): COPY's protocol on PostgreSQL, '/dev/blob' in pieces on PGlite.

async function* chunks(parts: readonly (string | Buffer)[]): AsyncGenerator<string | Buffer> {
  for (const p of parts) yield p;
}

describe("copyInPieces (the embedded engine's COPY)", () => {
  test("sends whole rows only, in order, every byte once", async () => {
    const rows = Array.from({ length: 500 }, (_, i) => `${i}\tvalue ${i}\\twith a tab\n`);
    const text = rows.join("");
    // Chunks that cut rows anywhere, as a stream does.
    const parts: string[] = [];
    for (let at = 0; at < text.length; at += 37) parts.push(text.slice(at, at + 37));
    const sent: string[] = [];
    const n = await copyInPieces(
      "copy t (a, b) from stdin",
      chunks(parts),
      async (sql, data) => {
        assert.equal(sql, "copy t (a, b) from '/dev/blob'");
        const piece = Buffer.from(data).toString();
        sent.push(piece);
        return piece.split("\n").length - 1;
      },
      1000,
    );
    assert.equal(n, 500);
    assert.ok(sent.length >= 10, `pieces: ${sent.length}`);
    for (const piece of sent) assert.ok(piece.endsWith("\n"), "each piece ends a row");
    assert.equal(sent.join(""), text);
  });

  test("a statement that does not read FROM STDIN is refused before anything is sent", async () => {
    let called = false;
    await assert.rejects(
      copyInPieces("copy t from '/etc/passwd'", chunks(["1\n"]), async () => {
        called = true;
        return 1;
      }),
      /must end with FROM STDIN/,
    );
    assert.equal(called, false);
  });

  test("the source's error is the one told, after the piece in flight has ended", async () => {
    let finished = 0;
    async function* failing(): AsyncGenerator<string> {
      yield "1\n".repeat(600);
      yield "2\n".repeat(600);
      throw new Error("malformed line 1201");
    }
    await assert.rejects(
      copyInPieces(
        "copy t from stdin",
        failing(),
        async () => {
          await new Promise((r) => setTimeout(r, 20));
          finished++;
          return 1;
        },
        1000,
      ),
      /malformed line 1201/,
    );
    assert.equal(finished, 2, "both pieces sent were waited for");
  });

  test("a failed COPY fails the call, even while the next piece is being made", async () => {
    await assert.rejects(
      copyInPieces(
        "copy t from stdin",
        chunks(["1\n".repeat(600), "2\n".repeat(600), "3\n"]),
        async () => {
          throw Object.assign(new Error("invalid input syntax for type integer"), { code: "22P02" });
        },
        1000,
      ),
      /invalid input syntax/,
    );
  });
});

describeEachEngine("Tx.copyFrom", (t) => {
  test("loads rows in the caller's transaction and role; the role is the caller's again after it", async () => {
    const db = t().db;
    await t().owner.transaction(
      (tx) =>
        tx.exec(
          "create table internal.copy_probe (n int primary key, label text not null); grant all on internal.copy_probe to service_role",
        ),
      { readOnly: false },
    );
    const lines = Array.from({ length: 3000 }, (_, i) => `${i}\tlabel ${i}\n`);
    const result = await db.asService(async (tx) => {
      const n = await tx.copyFrom("copy internal.copy_probe (n, label) from stdin", chunks(lines));
      const after = await tx.query<{ role: string; count: string }>(
        "select current_user as role, (select count(*) from internal.copy_probe)::text as count",
      );
      return { n, ...after.rows[0] };
    });
    assert.deepEqual(result, { n: 3000, role: "service_role", count: "3000" });
  });

  test("bad rows roll the whole transaction back", async () => {
    const db = t().db;
    await t().owner.transaction(
      (tx) =>
        tx.exec(
          "create table internal.copy_probe_2 (n int primary key); grant all on internal.copy_probe_2 to service_role",
        ),
      { readOnly: false },
    );
    const error = await db
      .asService(async (tx) => {
        await tx.query("insert into internal.copy_probe_2 values (-1)");
        await tx.copyFrom("copy internal.copy_probe_2 (n) from stdin", chunks(["1\n2\n", "x\n"]));
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    assert.equal(asDbError(error)?.sqlstate, "22P02");
    const count = await db.asService(
      async (tx) =>
        (await tx.query<{ n: string }>("select count(*)::text as n from internal.copy_probe_2")).rows[0]?.n,
    );
    assert.equal(count, "0");
  });
});
