import { type Command, Option } from "commander";
import { POLICY_PRESETS } from "./choices.ts";
import { type Cli, integer, table, UsageError } from "./context.ts";

/** The services behind these commands, loaded when one of them runs (not for --help or another group). */
const services = async () => ({
  ...(await import("../tenancy/tenants.ts")),
  ...(await import("../auth/signing-keys.ts")),
});

/** `backline tenants`: the white-label customers, their keys and settings. */
export function register(program: Command, cli: Cli): void {
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
      async (opts: {
        name: string;
        slug?: string;
        policy: (typeof POLICY_PRESETS)[number];
        plan: string;
      }) => {
        const s = await services();
        if (opts.slug !== undefined && !/^[a-z0-9][a-z0-9-]{0,62}$/.test(opts.slug)) {
          throw new UsageError(
            "--slug must be 1 to 63 lower-case letters, digits and hyphens, not starting with a hyphen",
          );
        }
        await cli.withDb(async (db, config) => {
          const { tenant, keys } = await s.createTenant(db, {
            name: opts.name,
            ...(opts.slug ? { slug: opts.slug } : {}),
            policyPreset: opts.policy,
            plan: opts.plan,
          });
          const data = { ...tenant, url: config.publicUrl, ...keys };
          cli.output(
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
      const s = await services();
      await cli.withDb(async (db) => {
        const rows = await s.listTenants(db);
        cli.output(
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
      const s = await services();
      await cli.withDb(async (db, config) => {
        const tenant = await cli.requireTenant(db, ref);
        const keys = await s.getTenantKeys(db, tenant.id);
        cli.output(
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
    .description(
      "replace a tenant's signing secret and signing key: new keys; every access token issued so far stops working (--signing-key: only a new session signing key, old sessions kept)",
    )
    .argument("<tenant>", "tenant id or slug")
    .option(
      "--signing-key",
      "only the ES256 key sessions are signed with: the previous one stays published until its last token expires (a tenant without one gets its first)",
    )
    .action(async (ref: string, opts: { signingKey?: boolean }) => {
      const s = await services();
      await cli.withDb(async (db, config) => {
        const tenant = await cli.requireTenant(db, ref);
        if (opts.signingKey) {
          const key = await s.rotateTenantSigningKey(db, tenant.id);
          const keys = await s.listSigningKeys(db, tenant.id);
          const previous = keys.filter((k) => k.status === "previous");
          cli.output(
            [
              `${tenant.slug}: sessions are now signed with ${key.algorithm} key ${key.kid}`,
              ...previous.map(
                (k) =>
                  `still accepted until ${k.verify_until?.toISOString()}: ${k.kid} (its tokens keep working)`,
              ),
              `JWKS: ${config.publicUrl.replace(/\/+$/, "")}/auth/v1/.well-known/jwks.json`,
            ].join("\n"),
            { tenant_id: tenant.id, signing_key: key, signing_keys: keys },
          );
          return;
        }
        const keys = await s.rotateTenantKeys(db, tenant.id);
        cli.output(
          [
            `Rotated the keys of ${tenant.slug}`,
            `anon key: ${keys.anon_key}`,
            `service_role key: ${keys.service_role_key}`,
            ...(keys.signing_key_id
              ? [`signing key: ${keys.signing_key_id} (the previous ones are withdrawn)`]
              : []),
          ].join("\n"),
          { tenant_id: tenant.id, url: config.publicUrl, ...keys },
        );
      });
    });

  tenants
    .command("signing-keys")
    .description(
      "list a tenant's session signing keys: current, previous (still accepted until verify_until) and withdrawn",
    )
    .argument("<tenant>", "tenant id or slug")
    .action(async (ref: string) => {
      const s = await services();
      await cli.withDb(async (db) => {
        const tenant = await cli.requireTenant(db, ref);
        const keys = await s.listSigningKeys(db, tenant.id);
        cli.output(
          keys.length === 0
            ? `${tenant.slug} has no signing key: its sessions are HS256 (backline tenants rotate-keys ${tenant.slug} --signing-key makes one)`
            : table(keys as unknown as Record<string, unknown>[], [
                "kid",
                "algorithm",
                "status",
                "created_at",
                "retired_at",
                "verify_until",
              ]),
          keys,
        );
      });
    });

  tenants
    .command("set-lead-days")
    .description("days between submission and the earliest release date a tenant accepts (default 7)")
    .argument("<tenant>", "tenant id or slug")
    .requiredOption("--days <days>", "0 to 365", integer(0, 365))
    .action(async (ref: string, opts: { days: number }) => {
      const { days } = opts;
      await cli.withDb(async (db) => {
        const tenant = await cli.requireTenant(db, ref);
        await db.asService((tx) =>
          tx.query(
            `insert into internal.organization_settings (tenant_id, release_lead_days) values ($1, $2)
             on conflict (tenant_id) do update set release_lead_days = excluded.release_lead_days, updated_at = now()`,
            [tenant.id, days],
          ),
        );
        cli.output(`${tenant.slug}: releases are submitted at least ${days} days ahead`, {
          tenant_id: tenant.id,
          release_lead_days: days,
        });
      });
    });

  tenants
    .command("set-portal-domains")
    .description(
      "the host names (pointed at this server) that show the tenant's portal (docs/portal.md); none: only /portal/t/<slug>",
    )
    .argument("<tenant>", "tenant id or slug")
    .argument("<domains...>", "host names such as music.example.com, or none")
    .action(async (ref: string, given: string[]) => {
      const { setPortalDomains, PortalDomainError } = await import("../portal/domains.ts");
      const list = given.length === 1 && given[0] === "none" ? [] : given;
      await cli.withDb(async (db, config) => {
        const tenant = await cli.requireTenant(db, ref);
        const scheme = new URL(config.publicUrl).protocol;
        let result: Awaited<ReturnType<typeof setPortalDomains>>;
        try {
          result = await setPortalDomains(db, tenant.id, list, scheme);
        } catch (error) {
          if (error instanceof PortalDomainError) throw new UsageError(error.message);
          throw error;
        }
        const { domains, siteUrl, siteUrlChanged } = result;
        const links = siteUrlChanged
          ? siteUrl
            ? `Mailed links now lead to ${siteUrl} (settings.auth.site_url).`
            : "Mailed links now lead to the portal under PUBLIC_URL (settings.auth.site_url removed)."
          : siteUrl
            ? `Mailed links still lead to the tenant's own site_url, ${siteUrl}.`
            : "Mailed links lead to the portal under PUBLIC_URL.";
        cli.output(
          [
            domains.length === 0
              ? `${tenant.slug}: no portal domain; its portal is at ${config.publicUrl.replace(/\/+$/, "")}/portal/t/${tenant.slug}/`
              : `${tenant.slug}: the portal answers at ${domains.map((d) => `${scheme}//${d}/portal/`).join(", ")}\nPoint each name's DNS at this server and serve it with a certificate, as PUBLIC_URL is served.`,
            links,
          ].join("\n"),
          { tenant_id: tenant.id, portal_domains: domains, site_url: siteUrl },
        );
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
          throw new UsageError(
            "--gs1-prefix must be 6 to 12 digits (the GS1 Company Prefix in GTIN-13 form) or none",
          );
        }
        change.gs1_company_prefix = v === "none" ? null : v;
      }
      if (opts.isrcRegistrant !== undefined) {
        const v = opts.isrcRegistrant.trim().toUpperCase();
        const m = /^([A-Z]{2})-?([A-Z0-9]{3})$/.exec(v);
        if (v !== "NONE" && !m)
          throw new UsageError("--isrc-registrant must be CC-XXX (e.g. US-XYZ) or none");
        change.isrc_registrant = m ? `${m[1]}-${m[2]}` : null;
      }
      if (Object.keys(change).length === 0) throw new UsageError("say --gs1-prefix or --isrc-registrant");
      await cli.withDb(async (db) => {
        const tenant = await cli.requireTenant(db, ref);
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
        cli.output(
          `${tenant.slug}: GS1 prefix ${result.gs1_company_prefix ?? "none"}, ISRC registrant ${result.isrc_registrant ?? "none"}`,
          result,
        );
      });
    });
}
