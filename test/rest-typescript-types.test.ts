import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";
import { loadSchemaCache } from "../src/rest/schema-cache.ts";
import { typescriptTypes } from "../src/rest/typescript-types.ts";
import { describeEachEngine } from "./support/db.ts";
import { ROOT, runCli, tempDir } from "./support/process.ts";

/**
 * `backline gen types typescript` (docs/rest.md, "Types for supabase-js"): the Database type that
 * `createClient<Database>()` checks seed 000's workflow with. A program using it compiles with tsc;
 * the lines marked @ts-expect-error must fail to compile (a wrong column, a wrong type, a column
 * only the database writes, a status the check refuses), so the test fails if the types are loose.
 */

const PROGRAM = `import { createClient } from "@supabase/supabase-js";
import type { Database, Tables, TablesInsert, TablesUpdate } from "./database.ts";

const supabase = createClient<Database>("http://127.0.0.1:8000", "anon-key");

export async function workflow(): Promise<void> {
  // An artist, then a release without account_id or status: the database fills both.
  const artist = await supabase.from("artist_profiles").insert({ name: "Luna Vale" }).select("id, name").single();
  if (artist.error) throw artist.error;
  const artistId: string = artist.data.id;
  const release = await supabase
    .from("releases")
    .insert({ title: "Night Drive", artist_id: artistId, release_type: "single" })
    .select("id, title, status, release_date")
    .single();
  if (release.error) throw release.error;
  const status: "draft" | "pending" | "submitted" | string = release.data.status;
  const date: string | null = release.data.release_date;
  await supabase.from("tracks").insert({ release_id: release.data.id, title: "Night Drive" });
  // Embedding through the foreign keys the types name.
  const list = await supabase.from("releases").select("id, title, tracks(id, title)").eq("artist_id", artistId);
  for (const r of list.data ?? []) for (const t of r.tracks) console.log(r.title, t.title);
  await supabase.from("releases").update({ status: "submitted" }).eq("id", release.data.id);
  const analytics = await supabase.from("release_analytics").select("revenue").limit(1);
  const revenue: number | undefined = analytics.data?.[0]?.revenue;
  console.log(status, date, revenue);

  // @ts-expect-error no such column
  await supabase.from("releases").insert({ title: "Night Drive", titel: "Night Drive", artist_id: artistId });
  // @ts-expect-error title is text
  await supabase.from("releases").insert({ title: 5, artist_id: artistId });
  // @ts-expect-error title is required on insert
  await supabase.from("releases").insert({ artist_id: artistId });
  await supabase.from("media_assets").insert({
    // @ts-expect-error object_key is the database's: no user may write it
    object_key: "x",
    release_id: release.data.id,
    kind: "audio",
    content_type: "audio/flac",
    max_bytes: 1000,
    upload_expires_at: "2027-01-01T00:00:00Z",
  });
  // Without it, the same insert compiles.
  await supabase.from("media_assets").insert({
    release_id: release.data.id,
    kind: "audio",
    content_type: "audio/flac",
    max_bytes: 1000,
    upload_expires_at: "2027-01-01T00:00:00Z",
  });
  // @ts-expect-error the operator fills the analytics: a user inserts nothing there
  await supabase.from("release_analytics").insert({ release_id: release.data.id });
}

export const row: Tables<"releases">["title"] = "Night Drive";
// @ts-expect-error NOT NULL
export const noTitle: Tables<"releases">["title"] = null;
// @ts-expect-error not a status the check allows
export const published: Tables<"releases">["status"] = "published";
export const insert: TablesInsert<"releases"> = { title: "Coastline", artist_id: "9b2c" };
export const update: TablesUpdate<"releases"> = {};
// @ts-expect-error status_reason is the operator's to write
export const reason: TablesUpdate<"releases"> = { status_reason: "x" };
`;

async function compiles(types: string): Promise<{ code: number; stdout: string }> {
  // Inside the repository (a git-ignored folder), so "@supabase/supabase-js" resolves to node_modules.
  const dir = fs.mkdtempSync(path.join(ROOT, ".backline", "gen-types-"));
  try {
    fs.writeFileSync(path.join(dir, "database.ts"), types);
    fs.writeFileSync(path.join(dir, "program.ts"), PROGRAM);
    fs.writeFileSync(
      path.join(dir, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          noEmit: true,
          target: "es2022",
          lib: ["es2022", "dom"],
          module: "nodenext",
          moduleResolution: "nodenext",
          allowImportingTsExtensions: true,
          skipLibCheck: true,
          types: [],
        },
        files: ["program.ts"],
      }),
    );
    const tsc = path.join(ROOT, "node_modules/.bin/tsc");
    const result = await promisify(execFile)(tsc, ["-p", dir]).catch(
      (e: { stdout: string; code: number }) => e,
    );
    return { code: "code" in result ? result.code : 0, stdout: result.stdout };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

describeEachEngine("gen types typescript: supabase-js's Database type from the schema cache", (t) => {
  test("seed 000's workflow compiles against the types, and every wrong line fails to", async () => {
    fs.mkdirSync(path.join(ROOT, ".backline"), { recursive: true });
    const types = typescriptTypes(await loadSchemaCache(t().db));
    const result = await compiles(types);
    assert.equal(result.code, 0, result.stdout);
    // The same program against looser types (every Insert any column, status a plain string) must
    // fail: the @ts-expect-error lines would then be unused.
    const loose = types
      .replace(/status: "draft"[^;]*;/g, "status: string;")
      .replace(/Insert: never;/g, "Insert: { [key: string]: unknown };");
    const looseResult = await compiles(loose);
    assert.notEqual(looseResult.code, 0, "looser types must not pass");
    assert.match(looseResult.stdout, /Unused '@ts-expect-error' directive/);
  });

  test("what the types say about the tables", async () => {
    const types = typescriptTypes(await loadSchemaCache(t().db));
    // Trigger-filled and defaulted columns are optional on insert; title is required.
    const releases = /\n {6}releases: \{[\s\S]*?\n {6}\};/.exec(types)?.[0] ?? "";
    assert.match(releases, /Insert: \{[^}]*\n {10}account_id\?: string;/);
    assert.match(releases, /Insert: \{[^}]*\n {10}title: string;/);
    // A CHECK-constrained column is the union of its values.
    assert.match(releases, /status: "draft" \| "pending" \| /);
    // Relationships in supabase's shape.
    assert.match(releases, /referencedRelation: "artist_profiles";/);
    assert.match(types, /release_analytics: \{[\s\S]*?Insert: never;/);
  });
});

test("`backline gen types typescript` prints the types on a fresh data directory, without a server", async () => {
  const dir = tempDir("backline-gen-types-");
  try {
    const r = await runCli(["gen", "types", "typescript"], { DATA_DIR: dir }, 120_000);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^\/\/ The public schema as \/rest\/v1 answers the authenticated role/);
    assert.match(r.stdout, /export type Database = \{\n {2}public: \{\n {4}Tables: \{/);
    const bad = await runCli(["gen", "types", "python"], { DATA_DIR: dir });
    assert.equal(bad.code, 2, bad.stderr);
    assert.match(bad.stderr, /only typescript/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
