import fs from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { Command, InvalidArgumentError, Option } from "commander";
import pino from "pino";
import type { Config } from "../config.ts";
import type { Db } from "../db/db.ts";
import { migrate, migrationStatus } from "../db/migrate.ts";
import { openDatabase } from "../db/open.ts";
import { PgliteEngine } from "../db/pglite.ts";
import { PostgresEngine } from "../db/postgres.ts";
import { rolesSetupSql } from "../db/roles.ts";
import { JOB_STATUSES, listJobs, retryDeadJob } from "../jobs/queue.ts";
import { listMail, Mailer } from "../mail/mailer.ts";
import { deliveriesOf, reportDelivery, retryDeliveries } from "../pipeline/delivery.ts";
import { OperatorError } from "../pipeline/errors.ts";
import { decideOac, oacQueue } from "../pipeline/oac.ts";
import { decideReview, reviewQueue } from "../pipeline/review.ts";
import { checkStore } from "../pipeline/store-check.ts";
import { inboxStatus, scheduleStorePolls } from "../pipeline/store-inbox.ts";
import { configureStore, showStore } from "../pipeline/stores.ts";
import { SCOPES } from "../public-api/auth.ts";
import { DEFAULT_SCOPES, issueKey, KEY_COLUMNS } from "../public-api/keys/service.ts";
import { FORMAT_NAMES } from "../royalties/formats/index.ts";
import { findImport, ImportError, importRoyalties, listImports } from "../royalties/import.ts";
import { progressBar, progressJson, reportText, resultJson, resultText } from "../royalties/operator.ts";
import { VoidError, voidImport } from "../royalties/void.ts";
import { rotateMasterKey } from "../secrets/at-rest.ts";
import { addMember, MEMBERSHIP_ROLES, MembershipError } from "../tenancy/memberships.ts";
import {
  ACCOUNT_KINDS,
  createAccount,
  createTenant,
  findTenant,
  getTenantKeys,
  listAccounts,
  listTenants,
  POLICY_PRESETS,
  rotateTenantKeys,
  type Tenant,
} from "../tenancy/tenants.ts";
import { createLogger, die, loadConfigOrDie } from "./process.ts";

/**
 * `backline`: a thin shell over the same services the server uses. Every command prints a
 * human-readable answer, or JSON with --json; errors are one line on stderr and exit code 1.
 *
 * The server (./serve.ts, which loads every route, sharp and the AWS SDK) and the DDEX adapter are
 * imported by the commands that use them only: the others start faster and a long `royalties
 * import` runs about 50 MB smaller without them.
 */

interface GlobalOptions {
  json?: boolean;
}

function output(program: Command, human: string, data: unknown): void {
  const { json } = program.opts<GlobalOptions>();
  process.stdout.write(json ? `${JSON.stringify(data, null, 2)}\n` : `${human}\n`);
}

function table(rows: Record<string, unknown>[], columns: string[]): string {
  if (rows.length === 0) return "(none)";
  const cell = (v: unknown) => (v instanceof Date ? v.toISOString() : String(v ?? ""));
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (values: string[]) =>
    values
      .map((v, i) => v.padEnd(widths[i] ?? 0))
      .join("  ")
      .trimEnd();
  return [line(columns), ...rows.map((r) => line(columns.map((c) => cell(r[c]))))].join("\n");
}

/** Opens the database for one command (migrating it when MIGRATE_ON_START allows), then closes it. */
async function withDb<T>(fn: (db: Db, config: Config) => Promise<T>): Promise<T> {
  const config = loadConfigOrDie();
  const logger = pino({ level: "warn" }, pino.destination(2));
  const db = await openDatabase(config, { migrate: config.migrateOnStart, logger });
  try {
    return await fn(db, config);
  } finally {
    await db.close();
  }
}

/** An option parser for a whole number in [min, max]. */
function integer(min: number, max: number) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min || n > max)
      throw new InvalidArgumentError(`expected ${min} to ${max}`);
    return n;
  };
}

function choice<T extends string>(values: readonly T[]) {
  return (value: string): T => {
    if (!(values as readonly string[]).includes(value)) {
      throw new InvalidArgumentError(`expected one of ${values.join(", ")}`);
    }
    return value as T;
  };
}

const program = new Command("backline")
  .description("Backline: the backend of a white-label music distribution platform")
  .option("--json", "print JSON instead of text")
  .showHelpAfterError()
  .configureOutput({ outputError: (str, write) => write(`backline: ${str.replace(/^error: /, "")}`) });

program
  .command("serve")
  .description("run the API server (what `npm start` runs)")
  .action(async () => {
    const config = loadConfigOrDie();
    const { serveUntilSignalled } = await import("./serve.ts");
    await serveUntilSignalled(config, createLogger(config));
  });

program
  .command("migrate")
  .description(
    "apply pending database migrations (MIGRATION_DATABASE_URL, else DATABASE_URL, else the embedded database)",
  )
  .option("--status", "only show which migrations are applied and pending")
  .action(async (opts: { status?: boolean }) => {
    const config = loadConfigOrDie();
    const dbc = config.database;
    const engine =
      dbc.engine === "pglite"
        ? await PgliteEngine.open({ dataDir: dbc.dataDir })
        : new PostgresEngine({ url: dbc.migrationUrl, poolSize: 1, applicationName: "backline migrate" });
    try {
      const applied = opts.status ? [] : await migrate(engine);
      const status = await engine.transaction((tx) => migrationStatus(tx), { readOnly: true });
      const human = [
        ...applied.map((m) => `applied ${String(m.version).padStart(4, "0")} ${m.name}`),
        `${status.applied.length} applied, ${status.pending.length} pending` +
          (status.pending.length
            ? `: ${status.pending.map((m) => `${m.version} ${m.name}`).join(", ")}`
            : ""),
      ].join("\n");
      output(program, human, {
        applied_now: applied.map((m) => ({ version: m.version, name: m.name })),
        applied: status.applied.map((m) => ({ version: m.version, name: m.name, applied_at: m.appliedAt })),
        pending: status.pending.map((m) => ({ version: m.version, name: m.name })),
      });
    } finally {
      await engine.close();
    }
  });

const dbCommand = program.command("db").description("PostgreSQL setup");
dbCommand
  .command("setup-sql")
  .description("print the SQL a superuser runs once to create Backline's roles (pipe it into psql)")
  .option("--login <role>", "name of the login role the server connects as", "authenticator")
  .action((opts: { login: string }) => {
    const sql = rolesSetupSql(opts.login);
    output(program, sql.trimEnd(), { sql });
  });

program
  .command("media")
  .description("media files for trying uploads (docs/uploads.md)")
  .command("samples")
  .description(
    "write cover.jpg (3000×3000 RGB) and track.wav (30 s, 44.1 kHz, 16-bit stereo) that pass the upload checks",
  )
  .argument("[dir]", "where to write them", ".")
  .action(async (dir: string) => {
    const { artworkJpeg, wav } = await import("../storage/samples.ts");
    fs.mkdirSync(dir, { recursive: true });
    const files = [
      { path: path.join(dir, "cover.jpg"), bytes: await artworkJpeg() },
      { path: path.join(dir, "track.wav"), bytes: wav({ seconds: 30 }) },
    ];
    for (const f of files) fs.writeFileSync(f.path, f.bytes);
    output(
      program,
      files.map((f) => `${f.path}  ${f.bytes.length} bytes`).join("\n"),
      files.map((f) => ({ path: path.resolve(f.path), bytes: f.bytes.length })),
    );
  });

const tenants = program.command("tenants").description("white-label customers");
tenants
  .command("create")
  .description("create a tenant and print its URL and keys")
  .requiredOption("--name <name>", "the customer's name")
  .option("--slug <slug>", "short identifier (default: from the name)")
  .addOption(
    new Option("--policy <preset>", "row-level security preset")
      .choices(POLICY_PRESETS)
      .default("account-members"),
  )
  .option("--plan <plan>", "plan name, for rate limits", "standard")
  .action(
    async (opts: { name: string; slug?: string; policy: (typeof POLICY_PRESETS)[number]; plan: string }) => {
      await withDb(async (db, config) => {
        const { tenant, keys } = await createTenant(db, {
          name: opts.name,
          ...(opts.slug ? { slug: opts.slug } : {}),
          policyPreset: opts.policy,
          plan: opts.plan,
        });
        const data = { ...tenant, url: config.publicUrl, ...keys };
        output(
          program,
          [
            `Created tenant ${tenant.name} (${tenant.slug})`,
            `       tenant_id: ${tenant.id}`,
            `          policy: ${tenant.policy_preset}`,
            `             url: ${config.publicUrl}`,
            `        anon key: ${keys.anon_key}`,
            `service_role key: ${keys.service_role_key}`,
          ].join("\n"),
          data,
        );
      });
    },
  );

tenants
  .command("list")
  .description("list tenants")
  .action(async () => {
    await withDb(async (db) => {
      const rows = await listTenants(db);
      output(
        program,
        table(rows as unknown as Record<string, unknown>[], [
          "id",
          "slug",
          "name",
          "policy_preset",
          "plan",
          "created_at",
        ]),
        rows,
      );
    });
  });

tenants
  .command("keys")
  .description("print a tenant's URL, anon key and service-role key")
  .argument("<tenant>", "tenant id or slug")
  .action(async (ref: string) => {
    await withDb(async (db, config) => {
      const tenant = await requireTenant(db, ref);
      const keys = await getTenantKeys(db, tenant.id);
      output(
        program,
        `url: ${config.publicUrl}\nanon key: ${keys?.anon_key}\nservice_role key: ${keys?.service_role_key}`,
        {
          tenant_id: tenant.id,
          url: config.publicUrl,
          ...keys,
        },
      );
    });
  });

tenants
  .command("rotate-keys")
  .description("replace a tenant's signing secret: new keys; every access token issued so far stops working")
  .argument("<tenant>", "tenant id or slug")
  .action(async (ref: string) => {
    await withDb(async (db, config) => {
      const tenant = await requireTenant(db, ref);
      const keys = await rotateTenantKeys(db, tenant.id);
      output(
        program,
        `Rotated the keys of ${tenant.slug}\nanon key: ${keys.anon_key}\nservice_role key: ${keys.service_role_key}`,
        { tenant_id: tenant.id, url: config.publicUrl, ...keys },
      );
    });
  });

const accounts = program.command("accounts").description("labels' and artists' accounts inside a tenant");
accounts
  .command("create")
  .description("create an account in a tenant")
  .requiredOption("--tenant <tenant>", "tenant id or slug")
  .requiredOption("--name <name>", "account name")
  .option("--kind <kind>", `one of ${ACCOUNT_KINDS.join(", ")}`, choice(ACCOUNT_KINDS), "label")
  .option("--sandbox", "a sandbox account (simulated stores only)")
  .action(
    async (opts: {
      tenant: string;
      name: string;
      kind: (typeof ACCOUNT_KINDS)[number];
      sandbox?: boolean;
    }) => {
      await withDb(async (db) => {
        const tenant = await requireTenant(db, opts.tenant);
        const account = await createAccount(db, {
          tenantId: tenant.id,
          name: opts.name,
          kind: opts.kind,
          isSandbox: opts.sandbox ?? false,
        });
        output(program, `Created account ${account.name} (${account.id}) in ${tenant.slug}`, account);
      });
    },
  );

accounts
  .command("list")
  .description("list accounts")
  .option("--tenant <tenant>", "only this tenant (id or slug)")
  .action(async (opts: { tenant?: string }) => {
    await withDb(async (db) => {
      const tenantId = opts.tenant ? (await requireTenant(db, opts.tenant)).id : undefined;
      const rows = await listAccounts(db, tenantId);
      output(
        program,
        table(rows as unknown as Record<string, unknown>[], [
          "id",
          "tenant_id",
          "name",
          "kind",
          "is_sandbox",
          "created_at",
        ]),
        rows,
      );
    });
  });

accounts
  .command("add-member")
  .description(
    "add the user with this (proven) e-mail address to an account, or mail the address an invite link",
  )
  .requiredOption("--account <id>", "account id")
  .requiredOption("--email <email>", "the member's e-mail address")
  .option("--role <role>", `one of ${MEMBERSHIP_ROLES.join(", ")}`, choice(MEMBERSHIP_ROLES), "member")
  .action(async (opts: { account: string; email: string; role: (typeof MEMBERSHIP_ROLES)[number] }) => {
    await withDb(async (db, config) => {
      // The invite link goes out by mail (or stays in the local mailbox without SMTP_URL).
      const mailer = new Mailer(db, { smtpUrl: config.mail.smtpUrl, from: config.mail.from });
      try {
        const result = await addMember(
          db,
          { accountId: opts.account, email: opts.email, role: opts.role },
          { mailer, publicUrl: config.publicUrl },
        ).catch((e: unknown) => {
          throw e instanceof MembershipError ? new CliError(e.message) : e;
        });
        output(
          program,
          result.status === "added"
            ? `Added ${opts.email} to ${opts.account} as ${opts.role}`
            : `Invited ${result.email} to ${opts.account} as ${opts.role}: the invite link is mailed to them; they join when they use it`,
          result,
        );
      } finally {
        await mailer.close();
      }
    });
  });

tenants
  .command("set-lead-days")
  .description("days between submission and the earliest release date a tenant accepts (default 7)")
  .argument("<tenant>", "tenant id or slug")
  .requiredOption("--days <days>", "0 to 365", integer(0, 365))
  .action(async (ref: string, opts: { days: number }) => {
    const { days } = opts;
    await withDb(async (db) => {
      const tenant = await requireTenant(db, ref);
      await db.asService((tx) =>
        tx.query(
          `insert into internal.organization_settings (tenant_id, release_lead_days) values ($1, $2)
           on conflict (tenant_id) do update set release_lead_days = excluded.release_lead_days, updated_at = now()`,
          [tenant.id, days],
        ),
      );
      output(program, `${tenant.slug}: releases are submitted at least ${days} days ahead`, {
        tenant_id: tenant.id,
        release_lead_days: days,
      });
    });
  });

tenants
  .command("set-identifiers")
  .description(
    "the number ranges a tenant's releases get their UPC and ISRCs from at submission (docs/releases.md); none: releases bring their own",
  )
  .argument("<tenant>", "tenant id or slug")
  .option("--gs1-prefix <prefix>", "the GS1 Company Prefix, 6 to 12 digits in GTIN-13 form, or none")
  .option("--isrc-registrant <code>", "ISRC country and registrant code, e.g. US-XYZ, or none")
  .action(async (ref: string, opts: { gs1Prefix?: string; isrcRegistrant?: string }) => {
    const change: Record<string, string | null> = {};
    if (opts.gs1Prefix !== undefined) {
      const v = opts.gs1Prefix.trim();
      if (v !== "none" && !/^[0-9]{6,12}$/.test(v)) {
        throw new CliError(
          "--gs1-prefix must be 6 to 12 digits (the GS1 Company Prefix in GTIN-13 form) or none",
        );
      }
      change.gs1_company_prefix = v === "none" ? null : v;
    }
    if (opts.isrcRegistrant !== undefined) {
      const v = opts.isrcRegistrant.trim().toUpperCase();
      const m = /^([A-Z]{2})-?([A-Z0-9]{3})$/.exec(v);
      if (v !== "NONE" && !m) throw new CliError("--isrc-registrant must be CC-XXX (e.g. US-XYZ) or none");
      change.isrc_registrant = m ? `${m[1]}-${m[2]}` : null;
    }
    if (Object.keys(change).length === 0) throw new CliError("say --gs1-prefix or --isrc-registrant");
    await withDb(async (db) => {
      const tenant = await requireTenant(db, ref);
      const settings = (
        await db.asService((tx) =>
          tx.query<{ settings: Record<string, unknown> }>(
            // "none" removes the setting; the database checks the rest (tenants_identifier_settings).
            "update internal.tenants set settings = (settings - $3::text[]) || $2::jsonb where id = $1 returning settings",
            [
              tenant.id,
              JSON.stringify(Object.fromEntries(Object.entries(change).filter(([, v]) => v !== null))),
              Object.keys(change).filter((k) => change[k] === null),
            ],
          ),
        )
      ).rows[0]?.settings;
      const result = {
        tenant_id: tenant.id,
        gs1_company_prefix: settings?.gs1_company_prefix ?? null,
        isrc_registrant: settings?.isrc_registrant ?? null,
      };
      output(
        program,
        `${tenant.slug}: GS1 prefix ${result.gs1_company_prefix ?? "none"}, ISRC registrant ${result.isrc_registrant ?? "none"}`,
        result,
      );
    });
  });

const STORE_KINDS = ["dsp", "download", "ugc"] as const;
const stores = program
  .command("stores")
  .description("the stores releases are delivered to (the services list)");
stores
  .command("list")
  .description("list the stores, enabled or not")
  .action(async () => {
    await withDb(async (db) => {
      const rows = (
        await db.asService((tx) =>
          tx.query<Record<string, unknown>>(
            "select code, name, kind, enabled, offers_oac from internal.stores order by sort, code",
          ),
        )
      ).rows;
      output(program, table(rows, ["code", "name", "kind", "enabled", "offers_oac"]), rows);
    });
  });
stores
  .command("add")
  .description("add a store to the list (enabled)")
  .requiredOption("--code <code>", "lower-case code, e.g. qobuz")
  .requiredOption("--name <name>", "display name")
  .option("--kind <kind>", `one of ${STORE_KINDS.join(", ")}`, choice(STORE_KINDS), "dsp")
  .option("--oac", "the store offers Official Artist Channels")
  .action(async (opts: { code: string; name: string; kind: (typeof STORE_KINDS)[number]; oac?: boolean }) => {
    if (!/^[a-z0-9]+(_[a-z0-9]+)*$/.test(opts.code)) {
      throw new CliError(`bad store code ${opts.code}: lower-case letters and digits, words joined by _`);
    }
    await withDb(async (db) => {
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
      if (!row) throw new CliError(`store ${opts.code} exists already`);
      output(program, `Added store ${opts.code} (${opts.name})`, row);
    });
  });
stores
  .command("show")
  .description("a store with its delivery settings")
  .argument("<code>", "store code")
  .action(async (code: string) => {
    await withDb(async (db) => {
      // Credentials are named (where they are set), never printed.
      const found = await db.asService((tx) => showStore(tx, db, code), { readOnly: true });
      if (!found) throw new CliError(`no store ${code}`);
      const row = { ...found, inbox: await inboxStatus(db, code) };
      output(program, JSON.stringify(row, null, 2), row);
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
    const text = opts.settings.startsWith("@")
      ? await readFile(opts.settings.slice(1), "utf8").catch(() => {
          throw new CliError(`cannot read ${opts.settings.slice(1)}`);
        })
      : opts.settings;
    let settings: unknown;
    try {
      settings = JSON.parse(text);
    } catch {
      throw new CliError("--settings is not JSON");
    }
    if (typeof settings !== "object" || settings === null || Array.isArray(settings)) {
      throw new CliError("--settings must be a JSON object");
    }
    const adapter = (settings as Record<string, unknown>).adapter;
    if (adapter !== undefined && adapter !== "sandbox" && adapter !== "ddex") {
      throw new CliError(`unknown adapter ${JSON.stringify(adapter)}: sandbox or ddex`);
    }
    if (adapter === "ddex") {
      const { ddexSettingsOf } = await import("../pipeline/ddex/adapter.ts");
      try {
        ddexSettingsOf({ code, settings: settings as Record<string, unknown> });
      } catch (error) {
        throw new CliError(error instanceof Error ? error.message : String(error));
      }
    }
    await withDb(async (db) => {
      const row = await configureStore(db, code, settings as Record<string, unknown>);
      if (!row) throw new CliError(`no store ${code}`);
      await scheduleStorePolls(db);
      const check = opts.check ? await checkStore(db, code) : undefined;
      output(
        program,
        `Store ${code} delivers through ${String(adapter ?? "no adapter")}${
          check ? `\nCheck: ${check.ok ? "ok" : "failed"}: ${check.message}` : ""
        }`,
        check ? { ...row, check } : row,
      );
      if (check && !check.ok) throw new CliError(`store ${code} did not answer: ${check.message}`);
    });
  });
for (const [name, enabled] of [
  ["enable", true],
  ["disable", false],
] as const) {
  stores
    .command(name)
    .description(enabled ? "offer a store again" : "stop offering a store: new releases cannot name it")
    .argument("<code>", "store code")
    .action(async (code: string) => {
      await withDb(async (db) => {
        const row = (
          await db.asService((tx) =>
            tx.query<Record<string, unknown>>(
              "update internal.stores set enabled = $2 where code = $1 returning code, name, kind, enabled, offers_oac",
              [code, enabled],
            ),
          )
        ).rows[0];
        if (!row) throw new CliError(`no store ${code}`);
        output(program, `Store ${code} is ${enabled ? "enabled" : "disabled"}`, row);
      });
    });
}

program
  .command("worker")
  .description(
    "run only the operator backend's worker (review, and more as it lands); several may run side by side",
  )
  .action(async () => {
    const config = loadConfigOrDie();
    const { workUntilSignalled } = await import("./serve.ts");
    await workUntilSignalled(config, createLogger(config));
  });

const jobs = program.command("jobs").description("the operator backend's job queue");
jobs
  .command("list")
  .description("jobs, newest first: --status dead shows what failed for good, with its last error")
  .option("--status <status>", `one of ${JOB_STATUSES.join(", ")}`, choice(JOB_STATUSES))
  .option("--kind <kind>", "only this kind, e.g. delivery.send")
  .option("--limit <n>", "at most this many (default 100)", integer(1, 10_000))
  .action(async (opts: { status?: (typeof JOB_STATUSES)[number]; kind?: string; limit?: number }) => {
    await withDb(async (db) => {
      const rows = await listJobs(db, opts);
      const human = rows.map((r) => ({
        ...r,
        payload: JSON.stringify(r.payload),
        last_error: r.last_error?.split("\n")[0] ?? null,
      }));
      output(
        program,
        table(human, ["id", "kind", "status", "attempts", "payload", "run_at", "last_error"]),
        rows,
      );
    });
  });
jobs
  .command("retry")
  .description("queue a dead job again with fresh attempts (after fixing what made it fail)")
  .argument("<id>", "job id (from jobs list)")
  .action(async (id: string) => {
    await withDb(async (db) => {
      const row = await retryDeadJob(db, id);
      if (!row) throw new CliError(`no dead job ${id} (or the same work is already queued)`);
      output(program, `Job ${id} (${row.kind}) is queued again`, row);
    });
  });

const releases = program.command("releases").description("the operator's review of submitted releases");
releases
  .command("queue")
  .description("releases waiting for review, oldest first, with what the checks say now")
  .option("--tenant <tenant>", "only this tenant (id or slug)")
  .action(async (opts: { tenant?: string }) => {
    await withDb(async (db) => {
      const tenantId = opts.tenant ? (await requireTenant(db, opts.tenant)).id : undefined;
      const rows = await reviewQueue(db, tenantId);
      const human = rows.map((r) => ({
        ...r,
        checks: r.problems.length === 0 ? "ok" : r.problems.map((p) => p.message).join("; "),
      }));
      output(
        program,
        table(human, ["id", "tenant", "title", "artist_name", "status", "submitted_at", "checks"]),
        rows,
      );
    });
  });
releases
  .command("review")
  .description(
    "approve a release in review (it goes to delivery) or reject it with a reason (it is editable again)",
  )
  .argument("<id>", "release id")
  .option("--approve", "approve it")
  .option("--reject", "reject it (needs --reason)")
  .option("--reason <reason>", "why it is rejected, shown to the account")
  .action(async (id: string, opts: { approve?: boolean; reject?: boolean; reason?: string }) => {
    if (Boolean(opts.approve) === Boolean(opts.reject)) throw new CliError("say --approve or --reject");
    if (opts.reject && !opts.reason?.trim()) throw new CliError("--reject needs --reason");
    if (!/^[0-9a-f-]{36}$/i.test(id)) throw new CliError(`no release ${id}`);
    await withDb(async (db) => {
      const decision = opts.approve
        ? ({ approve: true } as const)
        : ({ approve: false, reason: (opts.reason ?? "").trim() } as const);
      const row = await decideReview(db, id, decision).catch(operatorRefusal);
      output(
        program,
        `Release ${id} is ${row.status}${row.status_reason ? `: ${row.status_reason}` : ""}`,
        row,
      );
    });
  });

const deliveries = program.command("deliveries").description("a release's deliveries to its stores");
deliveries
  .command("list")
  .description("every delivery record of a release, newest first")
  .requiredOption("--release <id>", "release id")
  .action(async (opts: { release: string }) => {
    if (!/^[0-9a-f-]{36}$/i.test(opts.release)) throw new CliError(`no release ${opts.release}`);
    await withDb(async (db) => {
      const rows = await deliveriesOf(db, opts.release).catch(operatorRefusal);
      output(
        program,
        table(rows as unknown as Record<string, unknown>[], [
          "id",
          "store",
          "action",
          "status",
          "attempts",
          "message",
          "updated_at",
        ]),
        rows,
      );
    });
  });
deliveries
  .command("retry")
  .description(
    "send again every delivery of a release that ended in error (after fixing the store's settings)",
  )
  .requiredOption("--release <id>", "release id")
  .action(async (opts: { release: string }) => {
    if (!/^[0-9a-f-]{36}$/i.test(opts.release)) throw new CliError(`no release ${opts.release}`);
    await withDb(async (db) => {
      const n = await retryDeliveries(db, opts.release).catch(operatorRefusal);
      output(program, `${n} deliver${n === 1 ? "y" : "ies"} queued again`, {
        release_id: opts.release,
        retried: n,
      });
    });
  });

deliveries
  .command("report")
  .description(
    "record a store's report on a delivery it received: --live (on sale there), --error with the store's message, " +
      "or --taken-down with a --note saying who confirmed the takedown and how (recorded as by hand)",
  )
  .argument("<delivery-id>", "delivery id (from deliveries list)")
  .option("--live", "the store has it live")
  .option("--error", "the store's ingestion refused it (needs --message)")
  .option("--message <message>", "what the store said, shown to the account")
  .option("--taken-down", "the store confirmed the takedown it was sent (needs --note)")
  .option(
    "--note <note>",
    "for --taken-down: who confirmed it and how (e.g. the store's e-mail and its date)",
  )
  .action(
    async (
      id: string,
      opts: { live?: boolean; error?: boolean; takenDown?: boolean; message?: string; note?: string },
    ) => {
      if ([opts.live, opts.error, opts.takenDown].filter(Boolean).length !== 1) {
        throw new CliError("say --live, --error or --taken-down");
      }
      if (opts.error && !opts.message?.trim()) throw new CliError("--error needs --message");
      if (opts.takenDown && !opts.note?.trim()) {
        throw new CliError("--taken-down needs --note: who confirmed the takedown, and how");
      }
      if (!/^[0-9a-f-]{36}$/i.test(id)) throw new CliError(`no delivery ${id}`);
      await withDb(async (db) => {
        const report = opts.live
          ? ({ status: "live" } as const)
          : opts.takenDown
            ? ({ status: "taken_down", note: opts.note ?? "" } as const)
            : ({ status: "error", message: opts.message ?? "" } as const);
        const row = await reportDelivery(db, id, report, { via: "cli" }).catch(operatorRefusal);
        output(program, `Delivery ${id} to ${row.store} is ${row.status}`, row);
      });
    },
  );

const oac = program.command("oac").description("Official Artist Channel requests");
oac
  .command("queue")
  .description("requests waiting for a decision, oldest first")
  .action(async () => {
    await withDb(async (db) => {
      const rows = await oacQueue(db);
      output(
        program,
        table(rows as unknown as Record<string, unknown>[], [
          "id",
          "tenant",
          "artist_name",
          "store",
          "status",
          "channel_url",
          "created_at",
        ]),
        rows,
      );
    });
  });
oac
  .command("review")
  .description("approve a request (the channel is granted) or reject it with a reason")
  .argument("<id>", "OAC request id")
  .option("--approve", "approve it")
  .option("--reject", "reject it (needs --reason)")
  .option("--reason <reason>", "why it is rejected (or a note with --approve), shown to the account")
  .action(async (id: string, opts: { approve?: boolean; reject?: boolean; reason?: string }) => {
    if (Boolean(opts.approve) === Boolean(opts.reject)) throw new CliError("say --approve or --reject");
    if (opts.reject && !opts.reason?.trim()) throw new CliError("--reject needs --reason");
    if (!/^[0-9a-f-]{36}$/i.test(id)) throw new CliError(`no OAC request ${id}`);
    await withDb(async (db) => {
      const decision = opts.approve
        ? ({ approve: true, ...(opts.reason ? { note: opts.reason } : {}) } as const)
        : ({ approve: false, reason: opts.reason ?? "" } as const);
      const row = await decideOac(db, id, decision).catch(operatorRefusal);
      output(
        program,
        `OAC request ${id} is ${row.status}${row.status_reason ? `: ${row.status_reason}` : ""}`,
        row,
      );
    });
  });

const keys = program.command("keys").description("public-API keys of accounts (the operator's side)");
keys
  .command("issue")
  .description(
    "issue an active API key for an account and print its secret once; --mode test issues a sandbox key " +
      "(for the account's sandbox twin, created on first use)",
  )
  .requiredOption("--account <id>", "account id")
  .option("--mode <mode>", "live or test", choice(["live", "test"] as const), "test")
  .option("--name <name>", "a name for the key", "")
  .option("--scopes <scopes>", `comma-separated, of ${SCOPES.join(", ")}`, DEFAULT_SCOPES.join(","))
  .option("--expires-in-days <days>", "expire the key after this many days", integer(1, 3650))
  .action(
    async (opts: {
      account: string;
      mode: "live" | "test";
      name: string;
      scopes: string;
      expiresInDays?: number;
    }) => {
      const scopes = opts.scopes.split(",").map((x) => x.trim());
      const bad = scopes.find((x) => !(SCOPES as readonly string[]).includes(x));
      if (bad) throw new CliError(`unknown scope ${bad}; expected some of ${SCOPES.join(", ")}`);
      if (!/^[0-9a-f-]{36}$/i.test(opts.account)) throw new CliError(`no account ${opts.account}`);
      await withDb(async (db) => {
        const exists = await db.asService((tx) =>
          tx.query("select 1 from internal.accounts where id = $1", [opts.account]),
        );
        if (exists.rowCount === 0) throw new CliError(`no account ${opts.account}`);
        const { row, secret } = await issueKey(db, {
          accountId: opts.account,
          mode: opts.mode,
          name: opts.name,
          scopes,
          ...(opts.expiresInDays
            ? { expiresAt: new Date(Date.now() + opts.expiresInDays * 86_400_000) }
            : {}),
        });
        output(
          program,
          [
            `Issued ${opts.mode} key ${row.id} for account ${row.account_id}${opts.mode === "test" ? " (sandbox)" : ""}.`,
            "The secret is shown only now:",
            "",
            `  ${secret}`,
          ].join("\n"),
          { ...row, secret },
        );
      });
    },
  );

keys
  .command("list")
  .description("list the API keys of an account (never their secrets)")
  .requiredOption("--account <id>", "account id (its sandbox twin's keys are listed too)")
  .action(async (opts: { account: string }) => {
    await withDb(async (db) => {
      const rows = (
        await db.asService((tx) =>
          tx.query<Record<string, unknown>>(
            `select ${KEY_COLUMNS.join(", ")} from internal.api_keys
             where account_id = $1::uuid or account_id = (select id from internal.accounts where sandbox_of = $1::uuid)
             order by created_at desc`,
            [opts.account],
          ),
        )
      ).rows;
      output(
        program,
        table(rows, ["id", "account_id", "mode", "prefix", "name", "status", "last_used_at"]),
        rows,
      );
    });
  });

for (const [name, status, description] of [
  ["freeze", "frozen", "freeze a key at once (requests with it answer 401 api_key_frozen)"],
  ["unfreeze", "active", "unfreeze a frozen key"],
  ["revoke", "revoked", "revoke a key for good"],
] as const) {
  keys
    .command(name)
    .description(description)
    .argument("<id>", "key id")
    .action(async (id: string) => {
      if (!/^[0-9a-f-]{36}$/i.test(id)) throw new CliError(`no API key ${id}`);
      await withDb(async (db) => {
        const row = (
          await db.asService((tx) =>
            tx.query<Record<string, unknown>>(
              `update internal.api_keys set status = $2 where id = $1 and status <> 'revoked'
                 and ($2 <> 'active' or status = 'frozen') and ($2 <> 'frozen' or status = 'active')
               returning ${KEY_COLUMNS.join(", ")}`,
              [id, status],
            ),
          )
        ).rows[0];
        if (!row) throw new CliError(`no API key ${id} that can be set ${status}`);
        output(program, `Key ${id} is ${status}`, row);
      });
    });
}

const royalties = program
  .command("royalties")
  .description("store sales and usage reports (docs/royalties.md)");
royalties
  .command("import")
  .description(
    "import a store report: lines are matched to the tenant's delivered tracks (ISRC) and releases (UPC); a report " +
      "with a malformed line is refused whole; the same report twice counts once",
  )
  .argument("<file>", "the report file")
  .requiredOption("--tenant <tenant>", "the tenant (id or slug)")
  .requiredOption("--format <name>", `one of ${FORMAT_NAMES.join(", ")}`, choice(FORMAT_NAMES))
  .option(
    "--period <YYYY-MM>",
    "the reporting month for lines that give none (video-ugc: every line's reporting month, and the sale " +
      "month when the file has no #Period line); recorded on the import",
  )
  .option("--store <code>", "the store, for formats whose lines do not name it")
  .action(async (file: string, opts: { tenant: string; format: string; period?: string; store?: string }) => {
    const { json } = program.opts<GlobalOptions>();
    await withDb(async (db) => {
      const tenant = await requireTenant(db, opts.tenant);
      const tty = process.stderr.isTTY && !json;
      const result = await importRoyalties(db, {
        tenantId: tenant.id,
        format: opts.format,
        file,
        period: opts.period,
        store: opts.store,
        source: "cli",
        onProgress: (p) => {
          if (json) process.stderr.write(`${progressJson(p)}\n`);
          else if (tty) process.stderr.write(`\r${progressBar(p)}`);
        },
      }).catch((error: unknown) => {
        throw error instanceof ImportError ? new CliError(error.message) : error;
      });
      if (tty) process.stderr.write("\n");
      output(program, resultText(result), resultJson(result));
      if (result.status === "rejected") process.exitCode = 1;
    });
  });
royalties
  .command("imports")
  .description("the imports of a tenant, newest first")
  .option("--tenant <tenant>", "only this tenant (id or slug)")
  .action(async (opts: { tenant?: string }) => {
    await withDb(async (db) => {
      const tenantId = opts.tenant ? (await requireTenant(db, opts.tenant)).id : undefined;
      const rows = await listImports(db, { tenantId });
      output(
        program,
        table(rows as unknown as Record<string, unknown>[], [
          "id",
          "format",
          "file_name",
          "status",
          "lines_total",
          "lines_matched",
          "lines_unmatched",
          "lines_malformed",
          "started_at",
        ]),
        rows,
      );
    });
  });
royalties
  .command("show")
  .description("one import's report: totals per currency, unmatched identifiers, malformed lines")
  .argument("<id>", "import id")
  .action(async (id: string) => {
    // Only a well-formed UUID reaches the database (which would refuse anything else with its own error).
    if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(id)) {
      throw new CliError(`no import ${id}`);
    }
    await withDb(async (db) => {
      const r = await db.asService((tx) => findImport(tx, id), { readOnly: true });
      if (!r) throw new CliError(`no import ${id}`);
      output(program, reportText(r), r);
    });
  });
royalties
  .command("void")
  .description(
    "void an import (wrong file, period or mapping): its lines stay for audit, reversed, and leave every total and " +
      "analytics figure; royalties.voided is sent; the same (or a corrected) file can then be imported again",
  )
  .argument("<id>", "import id")
  .requiredOption("--reason <reason>", "why: recorded on the import and told to the accounts")
  .action(async (id: string, opts: { reason: string }) => {
    if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(id)) {
      throw new CliError(`no royalty import ${id}`);
    }
    await withDb(async (db) => {
      const r = await voidImport(db, id.toLowerCase(), { reason: opts.reason, via: "cli" }).catch(
        (error: unknown) => {
          throw error instanceof VoidError ? new CliError(error.message) : error;
        },
      );
      output(program, reportText(r), r);
    });
  });

program
  .command("mail")
  .description("the mailbox: every e-mail Backline wrote, newest first (sent by SMTP when SMTP_URL is set)")
  .command("list")
  .description("list e-mails")
  .option("--tenant <tenant>", "only this tenant (id or slug)")
  .option("--to <email>", "only mail to this address")
  .option(
    "--limit <n>",
    "how many",
    (v) => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 1 || n > 1000)
        throw new InvalidArgumentError("expected a whole number from 1 to 1000");
      return n;
    },
    20,
  )
  .action(async (opts: { tenant?: string; to?: string; limit: number }) => {
    await withDb(async (db) => {
      const tenantId = opts.tenant ? (await requireTenant(db, opts.tenant)).id : undefined;
      const rows = await listMail(db, {
        limit: opts.limit,
        ...(tenantId ? { tenantId } : {}),
        ...(opts.to ? { to: opts.to } : {}),
      });
      const human = rows.length
        ? rows
            .map(
              (m) =>
                `── ${m.created_at.toISOString()}  ${m.status}  to ${m.to_address}\nSubject: ${m.subject}\n\n${m.text_body}\n`,
            )
            .join("\n")
        : "(no mail)";
      output(program, human, rows);
    });
  });

program
  .command("secrets")
  .description("the master key that seals secrets at rest (docs/security.md)")
  .command("rotate-master-key")
  .description(
    "seal every secret (tenant signing secrets, store credentials, webhook secrets) with a new master key, in one " +
      "transaction: with ENCRYPTION_KEY set, the new key is ENCRYPTION_KEY and the old one ENCRYPTION_KEY_PREVIOUS; " +
      "on the embedded default, a new DATA_DIR/encryption.key is made (stop the server first)",
  )
  .action(async () => {
    await withDb(async (db, config) => {
      const report = await rotateMasterKey(db, config);
      const n = (counts: Record<string, number>) =>
        Object.entries(counts)
          .map(([k, v]) => `${v} ${k.replaceAll("_", " ")}`)
          .join(", ");
      output(
        program,
        `Every secret is sealed with key ${report.key_id} (${report.key_source}).\n` +
          `  sealed again: ${n(report.resealed)}\n  already current: ${n(report.already_current)}\n` +
          `  plain, now sealed: ${n(report.sealed_plain)}`,
        report,
      );
    });
  });

class CliError extends Error {}

async function requireTenant(db: Db, ref: string): Promise<Tenant> {
  const tenant = await db.asService((tx) => findTenant(tx, ref), { readOnly: true });
  if (!tenant) throw new CliError(`no tenant ${ref}`);
  return tenant;
}

/** An operator action the backend refused (not found, wrong state, ...) is the user's error, not a crash. */
function operatorRefusal(error: unknown): never {
  throw error instanceof OperatorError ? new CliError(error.message) : error;
}

program.parseAsync(process.argv).catch((error: unknown) => {
  if (error instanceof CliError) {
    process.stderr.write(`backline: ${error.message}\n`);
    process.exit(1);
  }
  die(error);
});
