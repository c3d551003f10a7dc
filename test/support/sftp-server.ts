import { randomUUID, timingSafeEqual } from "node:crypto";
import fs from "node:fs";
import type { AddressInfo } from "node:net";
import path from "node:path";
import ssh2, { type ParsedKey } from "ssh2";
import type { Db } from "../../src/db/db.ts";
import { Worker } from "../../src/jobs/worker.ts";
import { fingerprintOf } from "../../src/pipeline/ddex/sftp.ts";
import { pipelineHandlers } from "../../src/pipeline/handlers.ts";
import { LocalMedia } from "../../src/storage/media.ts";
import type { TenantKeys } from "../../src/tenancy/keys.ts";
import { type Account, createAccount, createTenant, type Tenant } from "../../src/tenancy/tenants.ts";
import { tempDir } from "./process.ts";

const { Server, utils } = ssh2;
const STATUS = utils.sftp.STATUS_CODE;

/**
 * A real SFTP server for tests, made with ssh2's own server side: it serves one local folder to
 * one user who signs in with a key pair made by the test (or a password). It can be stopped (every
 * connection cut, the port closed) and started again on the same port with the same host key, and
 * told to cut every connection after a number of WRITE requests (a connection lost mid-upload).
 */
export interface TestSftpServer {
  port: number;
  root: string;
  user: string;
  /** The client's private key (OpenSSH format) and the server's host-key fingerprint. */
  clientKey: string;
  fingerprint: string;
  /** Settings for a ddex destination or a store's answer folder, over this server. */
  settings(extra?: Record<string, unknown>): Record<string, unknown>;
  writes: number;
  /** Cut every connection once this many more WRITE requests have arrived. */
  cutAfterWrites(n: number): void;
  maxConcurrent: number;
  stop(): Promise<void>;
  start(): Promise<void>;
}

/**
 * An ed25519 key pair and its public key as ssh2 parses it. ssh2 now and then cannot parse the
 * public key it just generated ("Malformed OpenSSH public key"; a gate run lost the SFTP suite to
 * it once): such a pair is thrown away and another made.
 */
function ed25519Pair(): { private: string; public: string; parsed: ParsedKey } {
  for (let attempt = 1; ; attempt++) {
    const pair = utils.generateKeyPairSync("ed25519");
    const parsed = utils.parseKey(pair.public);
    if (!(parsed instanceof Error)) return { ...pair, parsed };
    if (attempt >= 10) throw parsed;
  }
}

export async function startSftpServer(
  root: string,
  options: { password?: string } = {},
): Promise<TestSftpServer> {
  const host = ed25519Pair();
  const client = ed25519Pair();
  const allowed: ParsedKey = client.parsed;
  const hostKey = host.parsed;
  const user = "store";
  fs.mkdirSync(root, { recursive: true });
  const connections = new Set<{ end(): void }>();
  let cutAt: number | undefined;
  let concurrent = 0;

  const local = (p: string) => {
    const clean = path.posix.normalize(`/${p}`);
    return path.join(root, ...clean.split("/").filter(Boolean));
  };
  const attrsOf = (st: fs.Stats) => ({
    mode: st.mode,
    uid: 0,
    gid: 0,
    size: st.size,
    atime: Math.floor(st.atimeMs / 1000),
    mtime: Math.floor(st.mtimeMs / 1000),
  });

  let server: InstanceType<typeof Server>;
  const me: TestSftpServer = {
    port: 0,
    root,
    user,
    clientKey: client.private,
    fingerprint: fingerprintOf(hostKey.getPublicSSH()),
    writes: 0,
    maxConcurrent: 0,
    settings(extra = {}) {
      return {
        type: "sftp",
        host: "127.0.0.1",
        port: me.port,
        username: user,
        private_key: client.private,
        host_key_sha256: me.fingerprint,
        path: "incoming",
        ...extra,
      };
    },
    cutAfterWrites(n) {
      cutAt = me.writes + n;
    },
    async stop() {
      for (const c of connections) c.end();
      connections.clear();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
    async start() {
      server = makeServer();
      await new Promise<void>((resolve) => server.listen(me.port, "127.0.0.1", () => resolve()));
      me.port = (server.address() as AddressInfo).port;
    },
  };

  function makeServer() {
    return new Server({ hostKeys: [host.private] }, (conn) => {
      connections.add(conn);
      concurrent++;
      me.maxConcurrent = Math.max(me.maxConcurrent, concurrent);
      conn.on("close", () => {
        concurrent--;
        connections.delete(conn);
      });
      conn.on("error", () => {});
      conn.on("authentication", (ctx) => {
        if (ctx.username !== user) return ctx.reject();
        if (ctx.method === "password" && options.password && ctx.password === options.password)
          return ctx.accept();
        if (ctx.method === "publickey") {
          const want = allowed.getPublicSSH();
          if (
            ctx.key.algo !== allowed.type ||
            ctx.key.data.length !== want.length ||
            !timingSafeEqual(ctx.key.data, want)
          ) {
            return ctx.reject();
          }
          if (!ctx.signature) return ctx.accept();
          if (ctx.blob && allowed.verify(ctx.blob, ctx.signature, ctx.hashAlgo) === true) return ctx.accept();
        }
        ctx.reject();
      });
      conn.on("ready", () => {
        conn.on("session", (acceptSession) => {
          const session = acceptSession();
          session.on("sftp", (acceptSftp) => {
            const sftp = acceptSftp();
            const handles = new Map<number, { fd?: number; dir?: string[]; dirPath?: string }>();
            let next = 0;
            const handle = (h: Buffer) => handles.get(h.readUInt32BE(0));
            const newHandle = (v: { fd?: number; dir?: string[]; dirPath?: string }) => {
              const id = next++;
              handles.set(id, v);
              const b = Buffer.alloc(4);
              b.writeUInt32BE(id);
              return b;
            };
            const fail = (reqid: number, e: unknown) =>
              sftp.status(
                reqid,
                (e as { code?: string }).code === "ENOENT" ? STATUS.NO_SUCH_FILE : STATUS.FAILURE,
              );
            sftp.on("OPEN", (reqid, filename, flags) => {
              try {
                const mode = utils.sftp.flagsToString(flags) ?? "r";
                sftp.handle(reqid, newHandle({ fd: fs.openSync(local(filename), mode) }));
              } catch (e) {
                fail(reqid, e);
              }
            });
            sftp.on("WRITE", (reqid, h, offset, data) => {
              me.writes++;
              if (cutAt !== undefined && me.writes >= cutAt) {
                cutAt = undefined;
                for (const c of connections) c.end();
                return;
              }
              const f = handle(h);
              if (f?.fd === undefined) return sftp.status(reqid, STATUS.FAILURE);
              fs.writeSync(f.fd, data, 0, data.length, offset);
              sftp.status(reqid, STATUS.OK);
            });
            sftp.on("READ", (reqid, h, offset, length) => {
              const f = handle(h);
              if (f?.fd === undefined) return sftp.status(reqid, STATUS.FAILURE);
              const buf = Buffer.alloc(length);
              const n = fs.readSync(f.fd, buf, 0, length, offset);
              if (n === 0) return sftp.status(reqid, STATUS.EOF);
              sftp.data(reqid, buf.subarray(0, n));
            });
            sftp.on("FSTAT", (reqid, h) => {
              const f = handle(h);
              if (f?.fd === undefined) return sftp.status(reqid, STATUS.FAILURE);
              sftp.attrs(reqid, attrsOf(fs.fstatSync(f.fd)));
            });
            sftp.on("FSETSTAT", (reqid) => sftp.status(reqid, STATUS.OK));
            sftp.on("SETSTAT", (reqid) => sftp.status(reqid, STATUS.OK));
            sftp.on("CLOSE", (reqid, h) => {
              const f = handle(h);
              if (!f) return sftp.status(reqid, STATUS.FAILURE);
              if (f.fd !== undefined) fs.closeSync(f.fd);
              handles.delete(h.readUInt32BE(0));
              sftp.status(reqid, STATUS.OK);
            });
            for (const ev of ["STAT", "LSTAT"] as const) {
              sftp.on(ev, (reqid: number, p: string) => {
                try {
                  sftp.attrs(reqid, attrsOf(fs.statSync(local(p))));
                } catch (e) {
                  fail(reqid, e);
                }
              });
            }
            sftp.on("MKDIR", (reqid, p) => {
              try {
                fs.mkdirSync(local(p));
                sftp.status(reqid, STATUS.OK);
              } catch (e) {
                fail(reqid, e);
              }
            });
            sftp.on("RMDIR", (reqid, p) => {
              try {
                fs.rmdirSync(local(p));
                sftp.status(reqid, STATUS.OK);
              } catch (e) {
                fail(reqid, e);
              }
            });
            sftp.on("REMOVE", (reqid, p) => {
              try {
                fs.unlinkSync(local(p));
                sftp.status(reqid, STATUS.OK);
              } catch (e) {
                fail(reqid, e);
              }
            });
            sftp.on("RENAME", (reqid, from, to) => {
              // SFTP v3: renaming onto an existing name fails.
              if (fs.existsSync(local(to))) return sftp.status(reqid, STATUS.FAILURE);
              try {
                fs.renameSync(local(from), local(to));
                sftp.status(reqid, STATUS.OK);
              } catch (e) {
                fail(reqid, e);
              }
            });
            sftp.on("OPENDIR", (reqid, p) => {
              try {
                sftp.handle(reqid, newHandle({ dir: fs.readdirSync(local(p)), dirPath: local(p) }));
              } catch (e) {
                fail(reqid, e);
              }
            });
            sftp.on("READDIR", (reqid, h) => {
              const d = handle(h);
              if (!d?.dir || d.dirPath === undefined) return sftp.status(reqid, STATUS.FAILURE);
              if (d.dir.length === 0) return sftp.status(reqid, STATUS.EOF);
              const names = d.dir.splice(0).map((filename) => {
                const st = fs.statSync(path.join(d.dirPath as string, filename));
                return { filename, longname: filename, attrs: attrsOf(st) };
              });
              sftp.name(reqid, names);
            });
            sftp.on("REALPATH", (reqid, p) => {
              sftp.name(reqid, [
                { filename: path.posix.normalize(`/${p}`), longname: "", attrs: {} as never },
              ]);
            });
          });
        });
      });
    });
  }

  await me.start();
  return me;
}

/**
 * What the SFTP store tests share: a real SFTP server over a temporary folder, a temporary media
 * folder, a tenant that approves by itself without media checks (GS1 prefix 2000000) with one
 * account, and a pipeline worker started once the test has configured its stores.
 */
export interface SftpStoreFixture {
  server: TestSftpServer;
  media: LocalMedia;
  tenant: Tenant;
  /** The tenant's API keys (its service-role key reaches the admin API). */
  keys: TenantKeys;
  account: Account;
  /** Starts the pipeline worker (call it after configuring the stores). */
  startWorker(): void;
  /** Wakes the worker (work was queued). */
  wake(): void;
  /** Stops the worker and the server, and removes the temporary folders (and `alsoRemove`). */
  close(alsoRemove?: string[]): Promise<void>;
}

export async function startSftpStoreFixture(
  db: Db,
  names: { prefix: string; tenant: string; account: string },
): Promise<SftpStoreFixture> {
  const server = await startSftpServer(tempDir(`backline-${names.prefix}-sftp-`));
  const media = new LocalMedia(tempDir(`backline-${names.prefix}-media-`));
  const { tenant, keys } = await createTenant(db, {
    name: names.tenant,
    slug: `${names.prefix}-${randomUUID().slice(0, 8)}`,
    settings: { auto_review: true, require_media: false, gs1_company_prefix: "2000000" },
  });
  const account = await createAccount(db, { tenantId: tenant.id, name: names.account });
  let worker: Worker | undefined;
  return {
    server,
    media,
    tenant,
    keys,
    account,
    startWorker() {
      worker = new Worker({ db, handlers: pipelineHandlers(db, { media }), pollMs: 20 });
      worker.start();
    },
    wake() {
      worker?.wake();
    },
    async close(alsoRemove = []) {
      await worker?.stop();
      await server.stop();
      for (const d of [server.root, media.root, ...alsoRemove])
        fs.rmSync(d, { recursive: true, force: true });
    },
  };
}
