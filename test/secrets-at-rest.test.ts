import assert from "node:assert/strict";
import { randomBytes, randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { createClient } from "@supabase/supabase-js";
import { jwtVerify } from "jose";
import { asDbError } from "../src/db/errors.ts";
import type { Claims } from "../src/db/types.ts";
import { Mailer } from "../src/mail/mailer.ts";
import { configureStore, showStore, storeSettingsOf } from "../src/pipeline/stores.ts";
import { rotateMasterKey, sealPlainSecrets, splitCredentials } from "../src/secrets/at-rest.ts";
import { keyFiles, keyIdOf, loadSecretBox, SecretBox, SecretKeyError } from "../src/secrets/box.ts";
import { TenantDirectory } from "../src/tenancy/directory.ts";
import { getTenantKeys, getTenantSigningSecret, type Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { copyMigratedDatabase, describeEachEngine, TEST_ENCRYPTION_KEY } from "./support/db.ts";
import { runCli, tempDir } from "./support/process.ts";
import {
  anonClaims,
  seedAccount,
  seedTenant,
  seedUser,
  serviceClaims,
  tenantServiceClaims,
  userClaims,
} from "./support/seed.ts";

/**
 * Issue 26, item 10: secrets at rest. Tenants' signing secrets and store credentials are sealed with
 * the master key as webhook secrets are; plain rows of an older version are sealed by the start-up
 * upgrade; `backline secrets rotate-master-key` seals everything again with a new key, in one
 * transaction, the old key accepted meanwhile; mail blanks its links and codes once sent and
 * expired; and no request role reads store settings.
 */

const TEST_KEY = Buffer.from(TEST_ENCRYPTION_KEY, "base64");
const S3_SECRET = `s3-secret-${randomUUID()}`;
const DDEX_SETTINGS = {
  adapter: "ddex",
  ddex: {
    sender: { dpid: "PADPIDA0000000001", name: "Backline" },
    recipient: { dpid: "PADPIDA0000000002", name: "Store" },
    destination: {
      type: "s3",
      bucket: "drops",
      access_key_id: "AKIDEXAMPLE",
      secret_access_key: S3_SECRET,
    },
  },
};

describe("SecretBox and the key file", () => {
  test("the embedded default's key file is made 0600 whatever the umask, and a readable one is narrowed", () => {
    const dir = tempDir("backline-key-");
    const old = process.umask(0);
    try {
      const box = loadSecretBox({ encryptionKey: undefined, dataDir: dir });
      const file = keyFiles(dir).current;
      assert.equal(fs.statSync(file).mode & 0o777, 0o600);
      assert.equal(Buffer.from(fs.readFileSync(file, "utf8").trim(), "base64").length, 32);
      // Made once: a second load reads the same key.
      assert.equal(loadSecretBox({ encryptionKey: undefined, dataDir: dir }).keyId, box.keyId);
      fs.chmodSync(file, 0o644);
      loadSecretBox({ encryptionKey: undefined, dataDir: dir });
      assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    } finally {
      process.umask(old);
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test("values carry the id of their key; previous keys open, only the current one seals", () => {
    const oldKey = randomBytes(32);
    const newKey = randomBytes(32);
    const sealedOld = new SecretBox(oldKey).encrypt("hello");
    assert.match(sealedOld, new RegExp(`^v2\\.${keyIdOf(oldKey)}\\.`));
    assert.ok(!sealedOld.includes("hello"));
    const rotating = new SecretBox(newKey, [oldKey]);
    assert.equal(rotating.decrypt(sealedOld), "hello");
    assert.equal(rotating.isCurrent(sealedOld), false);
    assert.equal(rotating.isCurrent(rotating.encrypt("x")), true);
    assert.throws(() => new SecretBox(newKey).decrypt(sealedOld), SecretKeyError);
    // A tampered value does not open.
    const parts = sealedOld.split(".");
    parts[4] = Buffer.from("tampered").toString("base64");
    assert.throws(() => rotating.decrypt(parts.join(".")));
  });

  test("v1 values (before key ids) still open, by trying each key", () => {
    const oldKey = randomBytes(32);
    const v2 = new SecretBox(oldKey).encrypt("legacy").split(".");
    const v1 = ["v1", ...v2.slice(2)].join(".");
    assert.equal(new SecretBox(randomBytes(32), [oldKey]).decrypt(v1), "legacy");
    assert.throws(() => new SecretBox(randomBytes(32)).decrypt(v1), SecretKeyError);
  });

  test("credentials are split from settings and put back where they were", () => {
    const { settings, credentials } = splitCredentials(DDEX_SETTINGS);
    assert.ok(!JSON.stringify(settings).includes(S3_SECRET));
    assert.deepEqual(credentials, { ddex: { destination: { secret_access_key: S3_SECRET } } });
  });
});

describeEachEngine("secrets at rest (issue 26, item 10)", (t) => {
  let app: RunningApp;
  const db = () => t().db;
  const owner = (sql: string, params: unknown[] = []) =>
    t().owner.transaction((tx) => tx.query(sql, params), { readOnly: false });
  const rows = async <T>(sql: string, params: unknown[] = []): Promise<T[]> =>
    db().asService(async (tx) => (await tx.query<T & Record<string, unknown>>(sql, params)).rows);

  before(async () => {
    app = await startApp(t());
  });
  after(() => app?.close());

  /** Every text of every row of `table`, as a backup or a database reader would see it. */
  const dump = async (table: string) => JSON.stringify(await rows(`select * from ${table}`));

  test("a tenant's signing secret is kept sealed; its keys and the gateway work from it", async () => {
    const { tenant, keys } = await tenantWithKeys(t(), { auth: { email_confirmation: false } });
    const [row] = await rows<{ jwt_secret: string | null; jwt_secret_sealed: string }>(
      "select jwt_secret, jwt_secret_sealed from internal.tenants where id = $1",
      [tenant.id],
    );
    assert.equal(row?.jwt_secret, null);
    assert.ok(row?.jwt_secret_sealed.startsWith(`v2.${keyIdOf(TEST_KEY)}.`));
    const secret = await getTenantSigningSecret(db(), tenant.id);
    assert.ok(secret && secret.length >= 32);
    assert.ok(!(await dump("internal.tenants")).includes(secret), "the secret is nowhere in plain text");
    await jwtVerify(keys.anon_key, new TextEncoder().encode(secret));
    // A real client signs up and reads with the keys (the directory opened the secret).
    const client = createClient(app.url, keys.anon_key, {
      auth: { persistSession: false, autoRefreshToken: false },
    });
    const signed = await client.auth.signUp({
      email: `u-${randomUUID().slice(0, 8)}@example.com`,
      password: "Correct-Horse-7",
    });
    assert.equal(signed.error, null);
    assert.equal((await client.from("releases").select("id")).error, null);
  });

  test("the directory opens the secret and the signing key once per cache fill, not per request", async () => {
    const tenant = await seedTenant(db());
    let opened = 0;
    const box = db().secrets;
    const decrypt = box.decrypt.bind(box);
    box.decrypt = (v: string) => {
      opened++;
      return decrypt(v);
    };
    try {
      const directory = new TenantDirectory(db());
      for (let i = 0; i < 20; i++) {
        const info = await directory.get(tenant.id);
        assert.ok(info?.jwtSecret && info.signing.current);
      }
      // Two sealed values: the HS256 secret and the ES256 signing key's private half.
      assert.equal(opened, 2);
    } finally {
      box.decrypt = decrypt;
    }
  });

  describe("the upgrade step seals what an older version left in plain text", () => {
    let tenant: Tenant;
    let plainSecret: string;
    let keysBefore: Awaited<ReturnType<typeof getTenantKeys>>;

    before(async () => {
      tenant = await seedTenant(db());
      // As an older version wrote them: the tenant's secret in jwt_secret, the store's credentials
      // in its settings (the rule against that holds for rows written from migration 0016 on).
      plainSecret = randomBytes(32).toString("base64url");
      await owner("update internal.tenants set jwt_secret = $2, jwt_secret_sealed = null where id = $1", [
        tenant.id,
        plainSecret,
      ]);
      keysBefore = await getTenantKeys(db(), tenant.id);
      await owner("alter table internal.stores drop constraint stores_settings_hold_no_credentials");
      await owner("update internal.stores set settings = $1 where code = 'tidal'", [
        JSON.stringify(DDEX_SETTINGS),
      ]);
      await owner(`alter table internal.stores add constraint stores_settings_hold_no_credentials check (not jsonb_path_exists(settings,
        'strict $.** ? (@.type() == "object").keyvalue() ? (@.key like_regex "secret|password|passphrase|private_key|token" flag "i")')) not valid`);
    });
    after(async () => {
      await configureStore(db(), "tidal", {});
    });

    test("plain rows are sealed, once (idempotent), and keep working", async () => {
      const first = await sealPlainSecrets(db());
      assert.ok(first.counts.tenant_signing_secrets >= 1);
      assert.equal(first.counts.store_credentials, 1);
      assert.deepEqual((await sealPlainSecrets(db())).total, 0, "a second run finds nothing to seal");
      assert.ok(!(await dump("internal.tenants")).includes(plainSecret));
      assert.ok(!(await dump("internal.stores")).includes(S3_SECRET));
      // The same secret, sealed: the tenant's keys are unchanged.
      assert.deepEqual(await getTenantKeys(db(), tenant.id), keysBefore);
      const [store] = await rows<{ settings: Record<string, unknown>; credentials_sealed: string }>(
        "select settings, credentials_sealed from internal.stores where code = 'tidal'",
      );
      assert.ok(store);
      assert.deepEqual(storeSettingsOf(db(), store), DDEX_SETTINGS, "the adapter gets the credentials back");
      const shown = await db().asService((tx) => showStore(tx, db(), "tidal"));
      assert.deepEqual(shown?.credentials, ["ddex.destination.secret_access_key"]);
      assert.ok(
        !JSON.stringify(shown).includes(S3_SECRET),
        "stores show names credentials, never prints them",
      );
    });

    test("a process with another key refuses to seal (it would seal what the servers cannot open)", async () => {
      await owner("update internal.tenants set jwt_secret = $2, jwt_secret_sealed = null where id = $1", [
        tenant.id,
        plainSecret,
      ]);
      await assert.rejects(sealPlainSecrets(db(), new SecretBox(randomBytes(32))), SecretKeyError);
      const [row] = await rows<{ jwt_secret: string | null }>(
        "select jwt_secret from internal.tenants where id = $1",
        [tenant.id],
      );
      assert.equal(row?.jwt_secret, plainSecret, "nothing changed");
      assert.equal((await sealPlainSecrets(db())).counts.tenant_signing_secrets, 1);
    });
  });

  describe("rotating the master key", () => {
    let tenant: Tenant;
    let endpointId: string;
    const TOTP_SECRET = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP";
    const WEBHOOK_SECRET = `whsec_${randomBytes(32).toString("base64")}`;

    before(async () => {
      tenant = await seedTenant(db());
      const account = await seedAccount(db(), tenant);
      endpointId = (
        await rows<{ id: string }>(
          `insert into internal.webhook_endpoints (tenant_id, account_id, url, events, secret_ciphertext, previous_secret_ciphertext)
           values ($1, $2, 'https://hooks.example.com/x', '{release.live}', $3, $4) returning id`,
          [
            tenant.id,
            account.id,
            db().secrets.encrypt(WEBHOOK_SECRET),
            db().secrets.encrypt(`${WEBHOOK_SECRET}-old`),
          ],
        )
      )[0]?.id as string;
      await configureStore(db(), "deezer", DDEX_SETTINGS);
      // A user's TOTP factor (migration 0020): its secret is sealed too.
      const userId = (
        await rows<{ id: string }>(
          "insert into internal.users (tenant_id, email) values ($1, $2) returning id",
          [tenant.id, `mfa-${randomUUID().slice(0, 8)}@example.com`],
        )
      )[0]?.id;
      await rows("insert into internal.mfa_factors (tenant_id, user_id, secret_sealed) values ($1, $2, $3)", [
        tenant.id,
        userId,
        db().secrets.encrypt(TOTP_SECRET),
      ]);
    });
    after(async () => {
      await configureStore(db(), "deezer", {});
    });

    /** Every sealed value in the database, by where it is. */
    const sealedValues = async () =>
      (
        await rows<{ v: string }>(
          `select jwt_secret_sealed as v from internal.tenants
           union all select credentials_sealed from internal.stores where credentials_sealed is not null
           union all select secret_ciphertext from internal.webhook_endpoints
           union all select previous_secret_ciphertext from internal.webhook_endpoints where previous_secret_ciphertext is not null
           union all select response_ciphertext from internal.idempotency_keys where response_ciphertext is not null
           union all select secret_sealed from internal.mfa_factors`,
        )
      ).map((r) => r.v);

    test("with ENCRYPTION_KEY and ENCRYPTION_KEY_PREVIOUS: everything sealed again, atomically, idempotently", async () => {
      const keysBefore = await getTenantKeys(db(), tenant.id);
      const newKey = randomBytes(32);
      const settings = {
        encryptionKey: newKey.toString("base64"),
        encryptionKeyPrevious: [TEST_ENCRYPTION_KEY],
        dataDir: "/nonexistent",
      };
      // A stored answer of an idempotent request that showed a secret (a webhook's, kept 24 h).
      const answer = JSON.stringify({ id: "we_1", secret: WEBHOOK_SECRET });
      await rows(
        `insert into internal.idempotency_keys
           (owner, method, path, key, request_hash, status, locked_until, response_status, response_ciphertext, response_headers)
         values ($1, 'POST', '/webhooks', $2, 'h', 'done', now(), 201, $3, '{}')`,
        [`account:${randomUUID()}`, `rotation-${randomUUID()}`, db().secrets.encrypt(answer)],
      );
      const report = await rotateMasterKey(db(), settings);
      assert.equal(report.resealed.idempotent_answers, 1);
      assert.equal(report.key_id, keyIdOf(newKey));
      assert.deepEqual(report.previous_key_ids, [keyIdOf(TEST_KEY)]);
      assert.ok(report.resealed.tenant_signing_secrets >= 1);
      assert.equal(report.resealed.store_credentials, 1);
      assert.equal(report.resealed.webhook_secrets, 2);
      assert.ok(report.resealed.mfa_secrets >= 1);
      const [factor] = await rows<{ v: string }>(
        "select secret_sealed as v from internal.mfa_factors where tenant_id = $1",
        [tenant.id],
      );
      assert.equal(new SecretBox(newKey).decrypt(factor?.v as string), TOTP_SECRET);
      const fresh = new SecretBox(newKey);
      for (const v of await sealedValues()) assert.ok(fresh.isCurrent(v), `${v} is sealed with the new key`);
      const [endpoint] = await rows<{ secret_ciphertext: string; previous_secret_ciphertext: string }>(
        "select secret_ciphertext, previous_secret_ciphertext from internal.webhook_endpoints where id = $1",
        [endpointId],
      );
      assert.equal(fresh.decrypt(endpoint?.secret_ciphertext as string), WEBHOOK_SECRET);
      assert.equal(fresh.decrypt(endpoint?.previous_secret_ciphertext as string), `${WEBHOOK_SECRET}-old`);

      // Run again: nothing left to do.
      const again = await rotateMasterKey(db(), settings);
      assert.deepEqual(again.resealed, {
        tenant_signing_secrets: 0,
        store_credentials: 0,
        webhook_secrets: 0,
        idempotent_answers: 0,
        mfa_secrets: 0,
        session_signing_keys: 0,
        oidc_client_secrets: 0,
      });
      const [stored] = await rows<{ v: string }>(
        "select response_ciphertext as v from internal.idempotency_keys where response_ciphertext is not null",
      );
      assert.equal(fresh.decrypt(stored?.v as string), answer);

      // A value no key opens: the whole rotation is refused and nothing changes.
      const stranger = new SecretBox(randomBytes(32)).encrypt("x");
      await rows("update internal.webhook_endpoints set previous_secret_ciphertext = $2 where id = $1", [
        endpointId,
        stranger,
      ]);
      const before = await sealedValues();
      await assert.rejects(
        rotateMasterKey(db(), {
          encryptionKey: TEST_ENCRYPTION_KEY,
          encryptionKeyPrevious: [settings.encryptionKey],
          dataDir: "/nonexistent",
        }),
        (error: unknown) =>
          error instanceof SecretKeyError &&
          /webhook_endpoints.*previous_secret_ciphertext.*does not have/.test(error.message),
      );
      assert.deepEqual(await sealedValues(), before, "all or nothing");
      await rows("update internal.webhook_endpoints set previous_secret_ciphertext = $2 where id = $1", [
        endpointId,
        fresh.encrypt(`${WEBHOOK_SECRET}-old`),
      ]);

      // Back to the test key (the old one accepted meanwhile): the tenant's keys never changed.
      await rotateMasterKey(db(), {
        encryptionKey: TEST_ENCRYPTION_KEY,
        encryptionKeyPrevious: [settings.encryptionKey],
        dataDir: "/nonexistent",
      });
      assert.deepEqual(await getTenantKeys(db(), tenant.id), keysBefore);
      for (const v of await sealedValues()) assert.ok(db().secrets.isCurrent(v));
    });

    test("on the embedded default: a new key file, 0600, replaces the old one once everything is sealed with it", async () => {
      const dir = tempDir("backline-rotate-");
      try {
        const files = keyFiles(dir);
        fs.writeFileSync(files.current, `${TEST_ENCRYPTION_KEY}\n`, { mode: 0o600 });
        // An interrupted rotation left its next key: the server accepts it, the next run finishes with it.
        const next = randomBytes(32);
        fs.writeFileSync(files.next, `${next.toString("base64")}\n`, { mode: 0o600 });
        assert.deepEqual(loadSecretBox({ encryptionKey: undefined, dataDir: dir }).keyIds, [
          keyIdOf(TEST_KEY),
          keyIdOf(next),
        ]);
        const report = await rotateMasterKey(db(), { encryptionKey: undefined, dataDir: dir });
        assert.equal(report.key_id, keyIdOf(next));
        assert.equal(report.key_source, files.current);
        assert.equal(fs.existsSync(files.next), false);
        assert.equal(fs.statSync(files.current).mode & 0o777, 0o600);
        const box = loadSecretBox({ encryptionKey: undefined, dataDir: dir });
        assert.equal(box.keyId, keyIdOf(next));
        for (const v of await sealedValues()) assert.ok(box.isCurrent(v));
        // A fresh rotation makes a key of its own.
        const second = await rotateMasterKey(db(), { encryptionKey: undefined, dataDir: dir });
        assert.notEqual(second.key_id, keyIdOf(next));
        assert.equal(fs.statSync(files.current).mode & 0o777, 0o600);
        await rotateMasterKey(db(), {
          encryptionKey: TEST_ENCRYPTION_KEY,
          encryptionKeyPrevious: [fs.readFileSync(files.current, "utf8").trim()],
          dataDir: dir,
        });
        for (const v of await sealedValues()) assert.ok(db().secrets.isCurrent(v));
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });
  });

  describe("store settings are the operator's", () => {
    const ROLES: { name: string; claims: () => Promise<Claims> }[] = [
      { name: "anon", claims: async () => anonClaims(await seedTenant(db())) },
      {
        name: "authenticated (a user)",
        claims: async () => {
          const tenant = await seedTenant(db());
          const account = await seedAccount(db(), tenant);
          return userClaims(await seedUser(db(), tenant, [{ account, role: "owner" }]));
        },
      },
      { name: "tenant_service", claims: async () => tenantServiceClaims(await seedTenant(db())) },
    ];
    const attempt = async (claims: Claims, sql: string) => {
      try {
        return { ok: (await db().withRequestContext(claims, (tx) => tx.query(sql))).rowCount };
      } catch (error) {
        return { error: asDbError(error)?.sqlstate };
      }
    };

    before(() => configureStore(db(), "anghami", DDEX_SETTINGS));
    after(() => configureStore(db(), "anghami", {}));

    for (const role of ROLES) {
      test(`${role.name} reads the store list but never its settings or credentials`, async () => {
        const claims = await role.claims();
        for (const sql of [
          "select settings from internal.stores",
          "select credentials_sealed from internal.stores",
          "select * from internal.stores",
          "select code from internal.stores where settings ? 'adapter'",
        ]) {
          assert.deepEqual(await attempt(claims, sql), { error: "42501" }, sql);
        }
        const listed = await attempt(
          claims,
          "select code, name, kind, enabled, offers_oac, sort from internal.stores",
        );
        assert.ok((listed.ok ?? 0) > 0);
      });
    }

    test("the operator reads them; credentials are refused in plain settings by the database", async () => {
      assert.ok(
        ((await attempt(serviceClaims, "select settings, credentials_sealed from internal.stores")).ok ?? 0) >
          0,
      );
      assert.deepEqual(
        await attempt(
          serviceClaims,
          `update internal.stores set settings = '{"ddex": {"destination": {"password": "x"}}}' where code = 'anghami'`,
        ),
        { error: "23514" },
      );
      assert.ok(!(await dump("internal.stores")).includes(S3_SECRET));
    });
  });

  describe("mail keeps links and codes only while they work", () => {
    test("a sign-up mail's link and code are blanked once it has left and expired; live ones are kept", async () => {
      const { keys } = await tenantWithKeys(t(), { auth: { email_confirmation: true } });
      const email = `m-${randomUUID().slice(0, 8)}@example.com`;
      const res = await fetch(`${app.url}/auth/v1/signup`, {
        method: "POST",
        headers: { apikey: keys.anon_key, "content-type": "application/json" },
        body: JSON.stringify({ email, password: "Correct-Horse-7" }),
      });
      assert.equal(res.status, 200);
      const [mail] = await rows<{ id: string; text_body: string; lifetime: number }>(
        `select id, text_body, extract(epoch from secret_expires_at - created_at)::int as lifetime
         from internal.mail_outbox where to_address = $1`,
        [email],
      );
      assert.ok(mail);
      assert.equal(mail.lifetime, 3600, "the mail lives as long as its link (otp_expiry)");
      const token = /token=([^&\s]+)/.exec(mail.text_body)?.[1];
      const code = /code: (\d{6})/.exec(mail.text_body)?.[1];
      assert.ok(token && code);

      const mailer = new Mailer(db(), { smtpUrl: undefined, from: "Backline <no-reply@example.com>" });
      // Not expired yet: kept.
      await mailer.sweepExpired();
      assert.ok(
        (
          await rows<{ text_body: string }>("select text_body from internal.mail_outbox where id = $1", [
            mail.id,
          ])
        )[0]?.text_body.includes(token),
      );

      // Expired: blanked; a queued one past its time is not sent any more; one being sent is left alone.
      const others = await rows<{ id: string; status: string }>(
        `insert into internal.mail_outbox (to_address, subject, text_body, kind, status, secret_expires_at)
         values ($1, 's', 'code: 111111', 'api_key.reveal', 'queued', now() - interval '1 minute'),
                ($1, 's', 'code: 222222', 'api_key.reveal', 'sending', now() - interval '1 minute'),
                ($1, 's', 'no secret here', 'webhook.disabled', 'sent', null)
         returning id, status`,
        [email],
      );
      await rows(
        "update internal.mail_outbox set secret_expires_at = now() - interval '1 second' where id = $1",
        [mail.id],
      );
      assert.ok((await mailer.sweepExpired()) >= 2);
      const after = await rows<{
        id: string;
        status: string;
        text_body: string;
        html_body: string | null;
        redacted_at: Date | null;
      }>(
        "select id, status, text_body, html_body, redacted_at from internal.mail_outbox where to_address = $1",
        [email],
      );
      const byId = new Map(after.map((r) => [r.id, r]));
      const signup = byId.get(mail.id);
      assert.ok(signup?.redacted_at);
      assert.ok(!signup.text_body.includes(token) && !signup.text_body.includes(code), signup.text_body);
      assert.match(signup.text_body, /expired/);
      const [queued, sending, plain] = others.map((o) => byId.get(o.id));
      assert.equal(queued?.status, "failed");
      assert.ok(!queued?.text_body.includes("111111"));
      assert.equal(sending?.text_body, "code: 222222");
      assert.equal(plain?.text_body, "no secret here");
      assert.ok(!(await dump("internal.mail_outbox")).includes(token), "the link is nowhere any more");
      await mailer.close();
    });
  });
});

describe("backline secrets rotate-master-key", () => {
  const dataDir = tempDir();
  const env = { DATA_DIR: dataDir, PUBLIC_URL: "https://api.example.com" };
  const json = async (...args: string[]) => {
    const r = await runCli(["--json", ...args], env, 120_000);
    assert.equal(r.code, 0, `backline ${args.join(" ")} failed: ${r.stderr}`);
    return JSON.parse(r.stdout);
  };
  // A migrated database to start from: this suite is about the commands, not a first start.
  before(() => copyMigratedDatabase(dataDir));
  after(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  test("on the embedded default: a new key, every secret sealed with it, the tenant's keys unchanged", async () => {
    const created = await json("tenants", "create", "--name", "Rotate Me");
    // A store's credentials: sealed by `stores configure`, named and never printed by `stores show`.
    const configured = await json(
      "stores",
      "configure",
      "tidal",
      "--settings",
      JSON.stringify(DDEX_SETTINGS),
    );
    const shown = await json("stores", "show", "tidal");
    for (const out of [configured, shown]) {
      assert.deepEqual(out.credentials, ["ddex.destination.secret_access_key"]);
      assert.ok(!JSON.stringify(out).includes(S3_SECRET));
    }
    assert.equal(shown.settings.ddex.destination.access_key_id, "AKIDEXAMPLE");
    const file = path.join(dataDir, "encryption.key");
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    const before = fs.readFileSync(file, "utf8");
    const report = await json("secrets", "rotate-master-key");
    assert.equal(report.key_source, file);
    assert.equal(report.resealed.tenant_signing_secrets, 1);
    assert.equal(report.resealed.store_credentials, 1);
    assert.notEqual(fs.readFileSync(file, "utf8"), before);
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    assert.equal(report.key_id, keyIdOf(Buffer.from(fs.readFileSync(file, "utf8").trim(), "base64")));
    const keys = await json("tenants", "keys", created.slug);
    assert.equal(keys.anon_key, created.anon_key);

    // With a key that sealed none of it: every command stops at once with one line saying what
    // to do, and nothing changes.
    const wrongEnv = { ...env, ENCRYPTION_KEY: randomBytes(32).toString("base64") };
    for (const args of [
      ["secrets", "rotate-master-key"],
      ["tenants", "list"],
    ]) {
      const wrong = await runCli(args, wrongEnv);
      assert.equal(wrong.code, 1);
      assert.match(
        wrong.stderr,
        /^backline: internal\.tenants\.jwt_secret_sealed: a secret is sealed with key [0-9a-f]{8}, which this server does not have \(set ENCRYPTION_KEY_PREVIOUS/,
      );
      assert.equal(wrong.stderr.trim().split("\n").length, 1, wrong.stderr);
      // With --json, the same as a JSON object (docs/cli.md).
      const json = await runCli(["--json", ...args], wrongEnv);
      assert.equal(json.code, 1);
      const { error } = JSON.parse(json.stderr) as { error: { code: string; message: string } };
      assert.equal(error.code, "secret_key");
      assert.match(error.message, /^internal\.tenants\.jwt_secret_sealed: a secret is sealed with key/);
    }
    assert.equal((await json("tenants", "keys", created.slug)).anon_key, created.anon_key);
  });
});
