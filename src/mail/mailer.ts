import type { Transporter } from "nodemailer";
import type { Logger } from "pino";
import type { Db } from "../db/db.ts";
import type { Tx } from "../db/types.ts";
import { brandMessage, type MailBrand } from "./branding.ts";

/**
 * Every e-mail Backline sends is first a row of internal.mail_outbox, written in the same
 * transaction as the change it is about (a sign-up and its confirmation mail commit together).
 * With SMTP_URL set, `deliver()` then sends the queued rows and marks them sent or failed; without
 * it the rows stay as the local mailbox, read with `backline mail list`, so every flow can be
 * completed on a machine with no mail server.
 *
 * A started mailer (`start()`, the API server's) sends at once whatever is queued, by any code in
 * any process: queuing a message sends a notice on `backline_mail` when its transaction commits
 * (migration 0014's trigger), which wakes every started mailer (Db.listen, on both engines). It
 * also looks every minute, for a lost notice or a message a dead sender left 'sending'.
 */

export const MAIL_CHANNEL = "backline_mail";

/** How often a started mailer looks for queued mail without a notice. */
export const MAIL_POLL_MS = 60_000;
export interface MailMessage {
  tenantId: string | null;
  to: string;
  subject: string;
  text: string;
  html?: string;
  /** What it is about, e.g. 'auth.signup'. */
  kind: string;
  /**
   * How long the link or code the message carries works, in seconds: once the mail has left and
   * that time has passed, its text is blanked (`sweepExpired`). Mail of an `auth.*` kind that does
   * not say is taken to carry one that works at most 7 days (the longest otp_expiry).
   */
  secretTtlSeconds?: number;
}

/** The longest a sign-in link works (auth settings' otp_expiry): the default lifetime of an auth.* mail's link. */
const AUTH_LINK_MAX_SECONDS = 7 * 24 * 3600;

export interface MailRow {
  id: string;
  tenant_id: string | null;
  to_address: string;
  subject: string;
  text_body: string;
  kind: string;
  status: "stored" | "queued" | "sent" | "failed";
  error: string | null;
  created_at: Date;
  sent_at: Date | null;
}

export class Mailer {
  private readonly db: Db;
  private readonly smtpUrl: string | undefined;
  /** The SMTP transport, made when the first mail is sent: nodemailer is loaded only then. */
  private transport: Promise<Transporter> | undefined;
  private readonly from: string;
  private readonly logger: Pick<Logger, "warn" | "error"> | undefined;
  private delivering: Promise<void> = Promise.resolve();
  /** A run that has not begun yet: it will see anything queued before it does. */
  private waiting: Promise<void> | undefined;
  private unlisten: (() => Promise<void>) | undefined;
  private poll: NodeJS.Timeout | undefined;
  private closed = false;
  private started = false;
  private sweeper: NodeJS.Timeout | undefined;

  constructor(
    db: Db,
    options: { smtpUrl: string | undefined; from: string; logger?: Pick<Logger, "warn" | "error"> },
  ) {
    this.db = db;
    this.from = options.from;
    this.logger = options.logger;
    // Sending waits at most 15 s per step: a slow mail server must not hold requests or shutdown.
    this.smtpUrl = options.smtpUrl || undefined;
  }

  private smtp(url: string): Promise<Transporter> {
    this.transport ??= import("nodemailer").then(({ default: nodemailer }) =>
      nodemailer.createTransport({
        url,
        connectionTimeout: 15_000,
        greetingTimeout: 15_000,
        socketTimeout: 15_000,
      } as Parameters<typeof nodemailer.createTransport>[0]),
    );
    return this.transport;
  }

  /** Whether mail leaves by SMTP (else it stays in the local mailbox). */
  get sendsMail(): boolean {
    return this.smtpUrl !== undefined;
  }

  /** Writes the message in `tx`; it is sent (with SMTP) once the transaction commits and `deliver()` runs. */
  async enqueue(tx: Tx, message: MailMessage): Promise<string> {
    const r = await tx.query<{ id: string }>(
      `insert into internal.mail_outbox (tenant_id, to_address, subject, text_body, html_body, kind, status,
         secret_expires_at)
       values ($1, $2, $3, $4, $5, $6, $7, now() + make_interval(secs => $8::double precision)) returning id`,
      [
        message.tenantId,
        message.to,
        message.subject,
        message.text,
        message.html ?? null,
        message.kind,
        this.smtpUrl ? "queued" : "stored",
        message.secretTtlSeconds ?? (message.kind.startsWith("auth.") ? AUTH_LINK_MAX_SECONDS : null),
      ],
    );
    const id = r.rows[0]?.id;
    if (!id) throw new Error("insert into mail_outbox returned no row");
    return id;
  }

  /**
   * With SMTP: sends what is queued now, then whenever mail is queued (the notice on
   * `backline_mail`) and every `pollMs`. Without SMTP there is nothing to send: it does nothing.
   */
  async start(pollMs = MAIL_POLL_MS): Promise<void> {
    if (!this.smtpUrl || this.started || this.closed) return;
    this.started = true;
    try {
      this.unlisten = await this.db.listen(MAIL_CHANNEL, () => void this.deliver());
    } catch (error) {
      this.logger?.warn({ err: error }, "mail: cannot listen for queued mail; polling");
    }
    if (this.closed) {
      // Closed while the listener was opening.
      await this.unlisten?.().catch(() => {});
      this.unlisten = undefined;
      return;
    }
    this.poll = setInterval(() => void this.deliver(), pollMs);
    this.poll.unref();
    void this.deliver();
  }

  /**
   * Sends every queued message. Runs one batch at a time in this process; rows are claimed with
   * FOR UPDATE SKIP LOCKED, so several processes never send the same message. Calls while a run
   * waits to begin share it.
   */
  deliver(): Promise<void> {
    if (!this.smtpUrl) return Promise.resolve();
    if (this.waiting) return this.waiting;
    const run = this.delivering
      .then(() => {
        this.waiting = undefined;
        return this.deliverQueued();
      })
      .catch((error) => {
        this.logger?.error({ err: error }, "mail delivery failed");
      });
    this.waiting = run;
    this.delivering = run;
    return run;
  }

  private async deliverQueued(): Promise<void> {
    const url = this.smtpUrl;
    if (!url) return;
    for (;;) {
      // Claim in one short transaction and send outside it: a slow mail server never holds a
      // database connection (on PGlite, the only one).
      const row = await this.db.asService(
        async (tx) =>
          (
            await tx.query<{
              id: string;
              to_address: string;
              subject: string;
              text_body: string;
              html_body: string | null;
              brand: MailBrand | null;
            }>(
              `update internal.mail_outbox set status = 'sending', claimed_at = now()
               where id = (select id from internal.mail_outbox
                           where status = 'queued' or (status = 'sending' and claimed_at < now() - interval '10 minutes')
                           order by created_at limit 1 for update skip locked)
               returning id, to_address, subject, text_body, html_body,
                 (select jsonb_build_object('display_name', o.display_name, 'logo_url', o.logo_url,
                           'primary_color', o.primary_color, 'support_email', o.support_email)
                  from internal.organization_settings o where o.tenant_id = mail_outbox.tenant_id) as brand`,
            )
          ).rows[0],
      );
      if (!row) return;
      let error: string | null = null;
      try {
        await (await this.smtp(url)).sendMail(this.outgoing(row));
      } catch (e) {
        error = (e instanceof Error ? e.message : String(e)).slice(0, 2000);
        this.logger?.warn({ mail_id: row.id, err: error }, "sending mail failed");
      }
      await this.db.asService((tx) =>
        tx.query(
          `update internal.mail_outbox set status = case when $2::text is null then 'sent' else 'failed' end,
             sent_at = case when $2::text is null then now() end, error = $2 where id = $1`,
          [row.id, error],
        ),
      );
    }
  }

  /**
   * The message as it leaves: a tenant's mail that its sender queued as plain text gets the
   * tenant's branding (src/mail/branding.ts), the sender's name included; other mail as queued.
   */
  private outgoing(row: {
    to_address: string;
    subject: string;
    text_body: string;
    html_body: string | null;
    brand: MailBrand | null;
  }) {
    const base = { to: row.to_address, subject: row.subject };
    if (row.html_body || !row.brand) {
      return {
        ...base,
        from: this.from,
        text: row.text_body,
        ...(row.html_body ? { html: row.html_body } : {}),
      };
    }
    const branded = brandMessage({ subject: row.subject, text: row.text_body }, row.brand);
    const address = /<([^<>]+)>\s*$/.exec(this.from)?.[1] ?? this.from.trim();
    return {
      ...base,
      from: branded.fromName ? { name: branded.fromName, address } : this.from,
      text: branded.text,
      html: branded.html,
    };
  }

  /**
   * Blanks the text of mail whose link or code has expired once it has left (sent, failed, or kept
   * in the local mailbox); mail still queued past that time is not sent any more. Returns how many.
   */
  async sweepExpired(): Promise<number> {
    const r = await this.db.asService((tx) =>
      tx.query(
        `update internal.mail_outbox
         set text_body = format('(This message carried a link or code that expired on %s UTC; its text was removed.)',
               to_char(secret_expires_at at time zone 'UTC', 'YYYY-MM-DD HH24:MI')),
             html_body = null, redacted_at = now(),
             status = case when status = 'queued' then 'failed' else status end,
             error = case when status = 'queued' then 'expired before it was sent' else error end
         where secret_expires_at <= now() and redacted_at is null and status in ('stored', 'sent', 'failed', 'queued')`,
      ),
    );
    return r.rowCount;
  }

  /** Runs `sweepExpired` now and every `intervalMs` until close(). */
  startSweeping(intervalMs = 60_000): void {
    const sweep = () => {
      this.sweepExpired().catch((error: unknown) => this.logger?.error({ err: error }, "mail sweep failed"));
    };
    sweep();
    this.sweeper ??= setInterval(sweep, intervalMs);
    this.sweeper.unref();
  }

  /** Stops listening and sweeping, waits for sending in progress; closes the SMTP connection pool. */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.poll);
    if (this.sweeper) clearInterval(this.sweeper);
    await this.unlisten?.().catch(() => {});
    this.unlisten = undefined;
    await this.delivering;
    (await this.transport?.catch(() => undefined))?.close();
  }
}

/** The mailbox, newest first: what `backline mail list` prints. */
export async function listMail(
  db: Db,
  filter: { tenantId?: string; to?: string; limit?: number } = {},
): Promise<MailRow[]> {
  return db.asService(
    async (tx) =>
      (
        await tx.query<MailRow>(
          `select id, tenant_id, to_address, subject, text_body, kind, status, error, created_at, sent_at
           from internal.mail_outbox
           where ($1::uuid is null or tenant_id = $1) and ($2::text is null or to_address = lower($2))
           order by created_at desc, id limit $3`,
          [filter.tenantId ?? null, filter.to ?? null, filter.limit ?? 50],
        )
      ).rows,
    { readOnly: true },
  );
}
