import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { Db } from "../src/db/db.ts";
import { PgliteEngine } from "../src/db/pglite.ts";
import { copyMigratedDatabase } from "./support/db.ts";
import { runCli, tempDir } from "./support/process.ts";

/** The operator's side of the validation catalogues: the store list and a tenant's lead time. */
describe("backline CLI: stores and lead time", () => {
  const dataDir = tempDir();
  const env = { DATA_DIR: dataDir };
  const json = async (...args: string[]) => {
    const r = await runCli(["--json", ...args], env);
    assert.equal(r.code, 0, `backline ${args.join(" ")} failed: ${r.stderr}`);
    return JSON.parse(r.stdout);
  };
  const fails = async (args: string[], message: RegExp) => {
    const r = await runCli(args, env);
    assert.equal(r.code, 1, r.stdout);
    assert.match(r.stderr, message);
    assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
  };
  /** A usage error: one line naming the mistake and the help to read, exit status 2. */
  const misused = async (args: string[], message: RegExp) => {
    const r = await runCli(args, env);
    assert.equal(r.code, 2, r.stdout);
    assert.match(r.stderr, message);
    assert.match(r.stderr, / \(see `backline [a-z -]+ --help`\)\n$/);
    assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
  };
  // A migrated database to start from: this suite is about the commands, not a first start.
  before(() => copyMigratedDatabase(dataDir));
  after(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  test("stores: list, add, disable and enable; mistakes end with one line", async () => {
    const seeded = (await json("stores", "list")) as { code: string; enabled: boolean }[];
    assert.ok(seeded.some((s) => s.code === "spotify" && s.enabled));

    const added = await json("stores", "add", "--code", "qobuz", "--name", "Qobuz", "--kind", "download");
    assert.deepEqual(added, {
      code: "qobuz",
      name: "Qobuz",
      kind: "download",
      enabled: true,
      offers_oac: false,
    });
    assert.equal((await json("stores", "disable", "spotify")).enabled, false);
    const list = (await json("stores", "list")) as { code: string; enabled: boolean }[];
    assert.deepEqual(
      list.filter((s) => ["qobuz", "spotify"].includes(s.code)).map((s) => [s.code, s.enabled]),
      [
        ["spotify", false],
        ["qobuz", true],
      ],
    );

    await fails(
      ["stores", "add", "--code", "qobuz", "--name", "Again"],
      /^backline: store qobuz exists already\n$/,
    );
    await misused(
      ["stores", "add", "--code", "Bad Code", "--name", "X"],
      /^backline: bad store code Bad Code/,
    );
    await fails(["stores", "disable", "nope"], /^backline: no store nope\n$/);
  });

  test("deliveries list, retry and report: unknown or malformed ids and missing options end with one line", async () => {
    const id = "6f1d2c3b-4a59-4e7d-8c21-0b9a8f7e6d5c";
    const none = new RegExp(`^backline: no release ${id}\\n$`);
    await fails(["deliveries", "list", "--release", id], none);
    await fails(["deliveries", "retry", "--release", id], none);
    await fails(["deliveries", "retry", "--release", "nope"], /^backline: no release nope\n$/);
    await fails(["deliveries", "report", id, "--live"], new RegExp(`^backline: no delivery ${id}\\n$`));
    await misused(["deliveries", "report", id, "--error"], /^backline: --error needs --message/);
    await misused(["deliveries", "report", id], /^backline: say --live, --error or --taken-down/);
    await fails(["deliveries", "report", "nope", "--live"], /^backline: no delivery nope\n$/);
  });

  test("stores configure checks ddex settings before saving them; stores show prints them", async () => {
    const ddex = {
      adapter: "ddex",
      ddex: {
        sender: { dpid: "PADPIDA2026112201B", name: "Backline Distribution" },
        recipient: { dpid: "PADPIDA2011072101T", name: "Deezer" },
        destination: { type: "directory", path: "/srv/drops/deezer" },
      },
    };
    const saved = await json("stores", "configure", "deezer", "--settings", JSON.stringify(ddex));
    assert.deepEqual(saved.settings, ddex);
    assert.deepEqual((await json("stores", "show", "deezer")).settings, ddex);
    const bad = { adapter: "ddex", ddex: { ...ddex.ddex, sender: { dpid: "nope", name: "X" } } };
    await misused(
      ["stores", "configure", "deezer", "--settings", JSON.stringify(bad)],
      /^backline: store deezer has bad ddex settings: ddex\.sender\.dpid: a DDEX Party ID/,
    );
    assert.deepEqual(
      (await json("stores", "show", "deezer")).settings,
      ddex,
      "a refused change saves nothing",
    );
    await misused(["stores", "configure", "deezer", "--settings", "{"], /^backline: --settings is not JSON/);
    await misused(
      ["stores", "configure", "deezer", "--settings", '{"adapter":"ftp"}'],
      /^backline: unknown adapter "ftp": sandbox or ddex/,
    );
    await fails(["stores", "configure", "nostore", "--settings", "{}"], /^backline: no store nostore\n$/);
    await fails(["stores", "show", "nostore"], /^backline: no store nostore\n$/);
  });

  test("stores configure --check reaches the destination: ok for a writable directory, exit 1 naming the failure", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "backline-check-"));
    const settings = (p: string) =>
      JSON.stringify({
        adapter: "ddex",
        ddex: {
          sender: { dpid: "PADPIDA2026112201B", name: "Backline Distribution" },
          recipient: { dpid: "PADPIDA2011072101T", name: "TIDAL" },
          destination: { type: "directory", path: p },
        },
      });
    const ok = await json("stores", "configure", "tidal", "--check", "--settings", settings(dir));
    assert.deepEqual(ok.check, { ok: true, message: `the directory ${dir} is there and writable` });
    await fails(
      ["stores", "configure", "tidal", "--check", "--settings", settings(path.join(dir, "missing"))],
      /^backline: store tidal did not answer: ENOENT/,
    );
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test("oac queue and review: an empty queue; mistakes end with one line", async () => {
    assert.deepEqual(await json("oac", "queue"), []);
    const id = "6f1d2c3b-4a59-4e7d-8c21-0b9a8f7e6d5c";
    await fails(["oac", "review", id, "--approve"], new RegExp(`^backline: no OAC request ${id}\\n$`));
    await misused(["oac", "review", id, "--reject"], /^backline: --reject needs --reason/);
    await misused(["oac", "review", id], /^backline: say --approve or --reject/);
  });

  test("a disabled store is refused at submit; set-lead-days moves the earliest release date", async () => {
    const tenant = await json("tenants", "create", "--name", "Lead Time Records");
    assert.deepEqual(await json("tenants", "set-lead-days", tenant.slug, "--days", "21"), {
      tenant_id: tenant.id,
      release_lead_days: 21,
    });
    const tooMany = await runCli(["tenants", "set-lead-days", tenant.slug, "--days", "400"], env);
    assert.equal(tooMany.code, 2);
    assert.match(
      tooMany.stderr,
      /^backline: option '--days <days>' argument '400' is invalid\. expected 0 to 365/,
    );

    // What the database now answers, read as the tenant's own callers would.
    const db = new Db(await PgliteEngine.open({ dataDir: path.join(dataDir, "pgdata") }));
    try {
      const days = await db.withRequestContext(
        { role: "tenant_service", tenant_id: tenant.id },
        async (tx) => (await tx.query<{ d: number }>("select internal.release_lead_days() as d")).rows[0]?.d,
      );
      assert.equal(days, 21);
      const problems = await db.asService(async (tx) => {
        const account = (
          await tx.query<{ id: string }>(
            "insert into internal.accounts (tenant_id, name) values ($1, 'L') returning id",
            [tenant.id],
          )
        ).rows[0]?.id;
        const artist = (
          await tx.query<{ id: string }>(
            "insert into public.artist_profiles (account_id, name) values ($1, 'A') returning id",
            [account],
          )
        ).rows[0]?.id;
        const release = (
          await tx.query<{ id: string }>(
            `insert into public.releases (account_id, artist_id, title, release_date, services)
             values ($1, $2, 'R', current_date + 14, '{spotify}') returning id`,
            [account, artist],
          )
        ).rows[0]?.id;
        return (
          await tx.query<{ p: { param: string; code: string }[] }>(
            "select internal.release_problems($1) as p",
            [release],
          )
        ).rows[0]?.p;
      });
      const codes = (problems ?? []).map((p) => `${p.param} ${p.code}`);
      assert.ok(codes.includes("release_date too_soon"), codes.join(", "));
      assert.ok(codes.includes("services invalid_service"), codes.join(", "));
    } finally {
      await db.close();
    }
  });

  test("set-identifiers: a tenant's GS1 prefix and ISRC registrant are set, removed with none; mistakes end with one line", async () => {
    const tenant = await json("tenants", "create", "--name", "Numbered Records");
    assert.deepEqual(
      await json(
        "tenants",
        "set-identifiers",
        tenant.slug,
        "--gs1-prefix",
        "0614141",
        "--isrc-registrant",
        "us-xyz",
      ),
      { tenant_id: tenant.id, gs1_company_prefix: "0614141", isrc_registrant: "US-XYZ" },
    );
    assert.deepEqual(await json("tenants", "set-identifiers", tenant.slug, "--gs1-prefix", "none"), {
      tenant_id: tenant.id,
      gs1_company_prefix: null,
      isrc_registrant: "US-XYZ",
    });
    await misused(
      ["tenants", "set-identifiers", tenant.slug, "--gs1-prefix", "12ab"],
      /^backline: --gs1-prefix must be 6 to 12 digits/,
    );
    await misused(
      ["tenants", "set-identifiers", tenant.slug, "--isrc-registrant", "USA-1"],
      /^backline: --isrc-registrant must be CC-XXX/,
    );
    await misused(
      ["tenants", "set-identifiers", tenant.slug],
      /^backline: say --gs1-prefix or --isrc-registrant/,
    );
    await fails(
      ["tenants", "set-identifiers", "nope", "--gs1-prefix", "none"],
      /^backline: no tenant nope\n$/,
    );
  });
});
