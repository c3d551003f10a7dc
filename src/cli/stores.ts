import { readFile } from "node:fs/promises";
import type { Command } from "commander";
import { type Cli, CliError, choice, notFound, table, UsageError } from "./context.ts";

const STORE_KINDS = ["dsp", "download", "ugc"] as const;

/** The services behind these commands, loaded when one of them runs (not for --help or another group). */
const services = async () => ({
  ...(await import("../pipeline/stores.ts")),
  ...(await import("../pipeline/store-check.ts")),
  ...(await import("../pipeline/store-inbox.ts")),
});

/** `backline stores`: the stores releases are delivered to, and how they are reached. */
export function register(program: Command, cli: Cli): void {
  const stores = program
    .command("stores")
    .description("the stores releases are delivered to (the services list)");
  stores
    .command("list")
    .description("list the stores, enabled or not")
    .action(async () => {
      await cli.withDb(async (db) => {
        const rows = (
          await db.asService((tx) =>
            tx.query<Record<string, unknown>>(
              "select code, name, kind, enabled, offers_oac from internal.stores order by sort, code",
            ),
          )
        ).rows;
        cli.output(table(rows, ["code", "name", "kind", "enabled", "offers_oac"]), rows);
      });
    });
  stores
    .command("add")
    .description("add a store to the list (enabled)")
    .requiredOption("--code <code>", "lower-case code, e.g. qobuz")
    .requiredOption("--name <name>", "display name")
    .option("--kind <kind>", `one of ${STORE_KINDS.join(", ")}`, choice(STORE_KINDS), "dsp")
    .option("--oac", "the store offers Official Artist Channels")
    .action(
      async (opts: { code: string; name: string; kind: (typeof STORE_KINDS)[number]; oac?: boolean }) => {
        if (!/^[a-z0-9]+(_[a-z0-9]+)*$/.test(opts.code)) {
          throw new UsageError(
            `bad store code ${opts.code}: lower-case letters and digits, words joined by _`,
          );
        }
        await cli.withDb(async (db) => {
          const row = (
            await db.asService((tx) =>
              tx.query<Record<string, unknown>>(
                `insert into internal.stores (code, name, kind, offers_oac, sort)
               values ($1, $2, $3, $4, (select coalesce(max(sort), 0) + 10 from internal.stores))
               on conflict (code) do nothing returning code, name, kind, enabled, offers_oac`,
                [opts.code, opts.name, opts.kind, opts.oac ?? false],
              ),
            )
          ).rows[0];
          if (!row) throw new CliError(`store ${opts.code} exists already`, "conflict");
          cli.output(`Added store ${opts.code} (${opts.name})`, row);
        });
      },
    );
  stores
    .command("show")
    .description("a store with its delivery settings")
    .argument("<code>", "store code")
    .action(async (code: string) => {
      const s = await services();
      await cli.withDb(async (db) => {
        // Credentials are named (where they are set), never printed.
        const found = await db.asService((tx) => s.showStore(tx, db, code), { readOnly: true });
        if (!found) throw notFound("store", code);
        const row = { ...found, inbox: await s.inboxStatus(db, code) };
        cli.output(JSON.stringify(row, null, 2), row);
      });
    });
  stores
    .command("configure")
    .description(
      "set how releases reach a store: its settings (adapter and the adapter's own), checked before they are saved",
    )
    .argument("<code>", "store code")
    .requiredOption("--settings <json>", "the settings as JSON, or @file to read them from a file")
    .option(
      "--check",
      "then connect to the store's destination (SFTP, S3 or directory) and say whether it answers",
    )
    .action(async (code: string, opts: { settings: string; check?: boolean }) => {
      const s = await services();
      const text = opts.settings.startsWith("@")
        ? await readFile(cli.path(opts.settings.slice(1)), "utf8").catch(() => {
            throw new CliError(`cannot read ${opts.settings.slice(1)}`, "unreadable_file");
          })
        : opts.settings;
      let settings: unknown;
      try {
        settings = JSON.parse(text);
      } catch {
        throw new UsageError("--settings is not JSON");
      }
      if (typeof settings !== "object" || settings === null || Array.isArray(settings)) {
        throw new UsageError("--settings must be a JSON object");
      }
      const adapter = (settings as Record<string, unknown>).adapter;
      if (adapter !== undefined && adapter !== "sandbox" && adapter !== "ddex") {
        throw new UsageError(`unknown adapter ${JSON.stringify(adapter)}: sandbox or ddex`);
      }
      if (adapter === "ddex") {
        const { ddexSettingsOf } = await import("../pipeline/ddex/adapter.ts");
        try {
          ddexSettingsOf({ code, settings: settings as Record<string, unknown> });
        } catch (error) {
          throw new UsageError(error instanceof Error ? error.message : String(error));
        }
      }
      await cli.withDb(async (db) => {
        const row = await s.configureStore(db, code, settings as Record<string, unknown>);
        if (!row) throw notFound("store", code);
        await s.scheduleStorePolls(db);
        const check = opts.check ? await s.checkStore(db, code) : undefined;
        cli.output(
          `Store ${code} delivers through ${String(adapter ?? "no adapter")}${
            check ? `\nCheck: ${check.ok ? "ok" : "failed"}: ${check.message}` : ""
          }`,
          check ? { ...row, check } : row,
        );
        if (check && !check.ok)
          throw new CliError(`store ${code} did not answer: ${check.message}`, "store_unreachable");
      });
    });
  const collect = (value: string, all: string[] = []) => [...all, value];
  /** `<key>=<value>` pairs of a repeatable option, as an object. */
  const pairs = (given: string[] | undefined, option: string): Record<string, string> | undefined => {
    if (!given) return undefined;
    const out: Record<string, string> = {};
    for (const pair of given) {
      const at = pair.indexOf("=");
      if (at <= 0)
        throw new UsageError(`${option} takes <backline name>=<store name>, not ${JSON.stringify(pair)}`);
      out[pair.slice(0, at).trim()] = pair.slice(at + 1).trim();
    }
    return out;
  };
  stores
    .command("dictionaries")
    .description("the built-in store dictionaries: each store's genre list and role names, and their sources")
    .action(async () => {
      const { dictionaries } = await import("../pipeline/dictionaries.ts");
      const all = dictionaries();
      const rows = all.map((d) => ({
        id: d.id,
        name: d.name,
        genres: d.genres.length,
        mapped: Object.keys(d.genre_map).length,
        roles: Object.keys(d.roles).length,
        source: `${d.source.document} (${d.source.version})`,
      }));
      cli.output(table(rows, ["id", "name", "genres", "mapped", "roles", "source"]), all);
    });
  stores
    .command("dictionary")
    .description(
      "a store's dictionary (its genre list and role names) and every mapping; with options, change them (ddex stores)",
    )
    .argument("<code>", "store code")
    .option(
      "--use <dictionary>",
      "choose a built-in dictionary (apple-music, amazon-music, beatport), or none",
    )
    .option(
      "--genre <genre=store genre>",
      "map a Backline genre to one of the dictionary's genres (repeatable)",
      collect,
    )
    .option(
      "--unset-genre <genre>",
      "drop a genre's override: back to the dictionary's (repeatable)",
      collect,
    )
    .option("--role <role=store role>", "name a contributor role the store's way (repeatable)", collect)
    .option("--unset-role <role>", "drop a role's override (repeatable)", collect)
    .action(
      async (
        code: string,
        opts: {
          use?: string;
          genre?: string[];
          unsetGenre?: string[];
          role?: string[];
          unsetRole?: string[];
        },
      ) => {
        const { DictionaryError, storeDictionary, updateStoreDictionary } = await import(
          "../pipeline/store-dictionary.ts"
        );
        const genres: Record<string, string | null> | undefined =
          opts.genre || opts.unsetGenre
            ? {
                ...pairs(opts.genre, "--genre"),
                ...Object.fromEntries((opts.unsetGenre ?? []).map((g) => [g, null])),
              }
            : undefined;
        const roles: Record<string, string | null> | undefined =
          opts.role || opts.unsetRole
            ? {
                ...pairs(opts.role, "--role"),
                ...Object.fromEntries((opts.unsetRole ?? []).map((r) => [r, null])),
              }
            : undefined;
        const change = opts.use !== undefined || genres !== undefined || roles !== undefined;
        await cli.withDb(async (db) => {
          let view: Awaited<ReturnType<typeof storeDictionary>>;
          try {
            view = change
              ? await updateStoreDictionary(db, code, {
                  dictionary: opts.use === undefined ? undefined : opts.use === "none" ? null : opts.use,
                  genres,
                  roles,
                })
              : await storeDictionary(db, code);
          } catch (error) {
            if (!(error instanceof DictionaryError)) throw error;
            if (error.status === 404) throw notFound("store", code);
            throw new CliError(error.message, error.code);
          }
          if (!view) throw notFound("store", code);
          const d = view.dictionary;
          const human = [
            `Store ${view.store} (${view.name}): ${
              d ? `dictionary ${d.id} (${d.name})` : "no dictionary: genres go as Backline's display names"
            }`,
            d ? `Source: ${d.source.document}, ${d.source.version}. ${d.source.transcribed}` : "",
            view.checks_genres
              ? "Submission refuses a release whose genre has no store genre here."
              : "Submission does not check genres for this store.",
            "",
            table(
              view.genres.map((g) => ({ ...g, store_genre: g.store_genre ?? "(none)", from: g.from ?? "" })),
              ["genre", "name", "store_genre", "from"],
            ),
            "",
            table(
              view.roles.map((r) => ({ ...r, store_role: r.store_role ?? "(DDEX's)", from: r.from ?? "" })),
              ["role", "ddex_role", "store_role", "from"],
            ),
          ]
            .filter((line, i) => line !== "" || i > 2)
            .join("\n");
          cli.output(human, view);
        });
      },
    );
  for (const [name, enabled] of [
    ["enable", true],
    ["disable", false],
  ] as const) {
    stores
      .command(name)
      .description(enabled ? "offer a store again" : "stop offering a store: new releases cannot name it")
      .argument("<code>", "store code")
      .action(async (code: string) => {
        await cli.withDb(async (db) => {
          const row = (
            await db.asService((tx) =>
              tx.query<Record<string, unknown>>(
                "update internal.stores set enabled = $2 where code = $1 returning code, name, kind, enabled, offers_oac",
                [code, enabled],
              ),
            )
          ).rows[0];
          if (!row) throw notFound("store", code);
          cli.output(`Store ${code} is ${enabled ? "enabled" : "disabled"}`, row);
        });
      });
  }
}
