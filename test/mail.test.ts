import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { SMTPServer } from "smtp-server";
import { listMail, Mailer } from "../src/mail/mailer.ts";
import { createAccount } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { freePort } from "./support/process.ts";

/** Mail leaves by SMTP when SMTP_URL is set; the receiving server is a fake, the one true edge here. */

interface Received {
  from: string;
  to: string[];
  data: string;
}

async function fakeSmtp(): Promise<{ url: string; received: Received[]; close(): Promise<void> }> {
  const received: Received[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ["STARTTLS"],
    onData(stream, session, callback) {
      let data = "";
      stream.on("data", (chunk: Buffer) => {
        data += chunk.toString("utf8");
      });
      stream.on("end", () => {
        received.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
          to: session.envelope.rcptTo.map((r) => r.address),
          data,
        });
        callback();
      });
    },
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  return {
    url: `smtp://127.0.0.1:${port}`,
    received,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** The message with quoted-printable soft breaks and escapes undone (enough to read it in a test). */
function decodeQuotedPrintable(data: string): string {
  return data
    .replace(/=\r?\n/g, "")
    .replace(/=([0-9A-F]{2})/g, (_m, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
}

async function waitFor<T>(fn: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error("timed out waiting");
    await new Promise((r) => setTimeout(r, 50));
  }
}

describeEachEngine("mail over SMTP", (t) => {
  let smtp: Awaited<ReturnType<typeof fakeSmtp>>;
  let running: RunningApp;
  before(async () => {
    smtp = await fakeSmtp();
    running = await startApp(t(), { SMTP_URL: smtp.url, MAIL_FROM: "Label Desk <desk@example.com>" });
  });
  after(async () => {
    await running.close();
    await smtp.close();
  });

  test("a sign-up's confirmation mail is sent and marked sent", async () => {
    const { tenant, keys } = await tenantWithKeys(t());
    const res = await fetch(`${running.url}/auth/v1/signup`, {
      method: "POST",
      headers: { apikey: keys.anon_key, "content-type": "application/json" },
      body: JSON.stringify({ email: "Mira@Example.com", password: "long enough" }),
    });
    assert.equal(res.status, 200);
    const user = (await res.json()) as {
      email: string;
      confirmation_sent_at?: string;
      access_token?: string;
    };
    assert.equal(user.email, "mira@example.com");
    assert.ok(user.confirmation_sent_at);
    assert.equal(user.access_token, undefined, "no session before confirmation");

    const mail = await waitFor(async () => smtp.received.find((m) => m.to.includes("mira@example.com")));
    assert.equal(mail.from, "desk@example.com");
    assert.match(mail.data, /Subject: Confirm your sign-up/);
    assert.match(mail.data, /\/auth\/v1\/verify\?token=/);
    assert.match(mail.data, /code: \d{6}/);

    const row = await waitFor(async () =>
      (await listMail(t().db, { tenantId: tenant.id })).find((m) => m.status === "sent"),
    );
    assert.equal(row.to_address, "mira@example.com");
    assert.equal(row.kind, "auth.signup");
  });

  test("a tenant's mail carries its branding: the sender's name, its logo and colour in the HTML part, its support address in both parts", async () => {
    const { tenant, keys } = await tenantWithKeys(t());
    await t().db.asService((tx) =>
      tx.query(
        `insert into internal.organization_settings (tenant_id, display_name, logo_url, primary_color, support_email)
         values ($1, 'Nightjar <Records>', 'https://cdn.example.com/nightjar.png', '#d1495b', 'help@nightjar.example')
         on conflict (tenant_id) do update set display_name = excluded.display_name, logo_url = excluded.logo_url,
           primary_color = excluded.primary_color, support_email = excluded.support_email`,
        [tenant.id],
      ),
    );
    const res = await fetch(`${running.url}/auth/v1/otp`, {
      method: "POST",
      headers: { apikey: keys.anon_key, "content-type": "application/json" },
      body: JSON.stringify({ email: "branded@example.com" }),
    });
    assert.equal(res.status, 200);
    const mail = await waitFor(async () => smtp.received.find((m) => m.to.includes("branded@example.com")));
    const raw = decodeQuotedPrintable(mail.data);
    assert.equal(mail.from, "desk@example.com", "the envelope keeps MAIL_FROM's address");
    assert.match(raw, /^From: "Nightjar <Records>" <desk@example\.com>/m);
    assert.match(raw, /Content-Type: multipart\/alternative/);
    const html = raw.slice(raw.indexOf("<!doctype html>"), raw.indexOf("</html>"));
    assert.ok(html.length > 0, "an HTML part");
    assert.match(
      html,
      /<img src="https:\/\/cdn\.example\.com\/nightjar\.png" alt="Nightjar &lt;Records&gt;"/,
    );
    // #d1495b reads better with near-black text than with white (5.2:1 against 4.0:1).
    assert.match(html, /background:#d1495b;color:#111111/, "the link is a button in the tenant's colour");
    assert.match(html, /href="http[^"]+\/auth\/v1\/verify\?token=/);
    assert.match(html, /mailto:help@nightjar\.example/);
    assert.doesNotMatch(html, /<Records>/, "the display name is escaped in HTML");
    assert.match(
      raw,
      /Questions\? Write to help@nightjar\.example/,
      "the text part ends with the support address",
    );
    assert.match(raw, /code: \d{6}/);
  });

  test("an API key's reveal code reaches the mail server within a second, with no other mail to flush the queue", async () => {
    const { tenant, keys } = await tenantWithKeys(t(), { auth: { email_confirmation: false } });
    const label = await createAccount(t().db, { tenantId: tenant.id, name: "Reveal Records" });
    const email = `owner-${Math.random().toString(36).slice(2, 8)}@example.com`;
    // Invited as the owner; the invitation is accepted once the address is proven (migration 0015).
    await t().owner.transaction(
      (tx) =>
        tx.query(
          "insert into internal.invitations (tenant_id, account_id, email, role) values ($1, $2, $3, 'owner')",
          [tenant.id, label.id, email],
        ),
      { readOnly: false },
    );
    const signup = await fetch(`${running.url}/auth/v1/signup`, {
      method: "POST",
      headers: { apikey: keys.anon_key, "content-type": "application/json" },
      body: JSON.stringify({ email, password: "long enough" }),
    });
    assert.equal(signup.status, 200);
    const { access_token: token } = (await signup.json()) as { access_token: string };
    assert.ok(token, "no confirmation asked: a session at once");
    await t().owner.transaction(
      (tx) => tx.query("update internal.users set email_proven_at = now() where email = $1", [email]),
      { readOnly: false },
    );
    // Nothing else is sent meanwhile: whatever arrives, the reveal code's own notice sent it.
    await new Promise((r) => setTimeout(r, 200));
    assert.deepEqual(
      (await listMail(t().db, { tenantId: tenant.id })).filter((m) => m.status === "queued"),
      [],
    );

    const call = (path: string, body: unknown) =>
      fetch(`${running.url}/api/public/v1${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    const codes = async (since: number) => {
      const mail = await waitFor(async () => {
        const found = smtp.received
          .slice(since)
          .find((m) => m.to.includes(email) && /Verification code: \d{6}/.test(m.data));
        return found;
      }, 1000);
      return /Verification code: (\d{6})/.exec(mail.data)?.[1];
    };

    let seen = smtp.received.length;
    const created = await call("/api-keys", { name: "CI deploys" });
    assert.equal(created.status, 201, await created.clone().text());
    const key = (await created.json()) as { id: string };
    const first = await codes(seen);
    assert.ok(first, "the code of the new key, within a second");

    seen = smtp.received.length;
    const again = await call(`/api-keys/${key.id}/verification`, {});
    assert.equal(again.status, 201, await again.clone().text());
    const second = await codes(seen);
    assert.ok(second, "a new code, within a second");
    const reveal = await call(`/api-keys/${key.id}/reveal`, { code: second });
    assert.equal(reveal.status, 200, await reveal.clone().text());
  });

  test("mail queued by any code, in any process, wakes the server's mailer: sent within a second", async () => {
    const { tenant } = await tenantWithKeys(t());
    // Another process's mailer: it queues (with SMTP configured) but is never started nor asked to deliver.
    const elsewhere = new Mailer(t().db, { smtpUrl: smtp.url, from: "desk@example.com" });
    const to = `queued-${Math.random().toString(36).slice(2, 8)}@example.com`;
    await t().db.asService((tx) =>
      elsewhere.enqueue(tx, {
        tenantId: tenant.id,
        to,
        subject: "Queued elsewhere",
        text: "hello",
        kind: "test.queued",
      }),
    );
    const mail = await waitFor(async () => smtp.received.find((m) => m.to.includes(to)), 1000);
    assert.match(mail.data, /Subject: Queued elsewhere/);
    await elsewhere.close();
  });

  test("a mail server that refuses leaves the mail failed with the reason, and the request still succeeds", async () => {
    await smtp.close();
    const { tenant, keys } = await tenantWithKeys(t());
    const res = await fetch(`${running.url}/auth/v1/recover`, {
      method: "POST",
      headers: { apikey: keys.anon_key, "content-type": "application/json" },
      body: JSON.stringify({ email: "nobody@example.com" }),
    });
    assert.equal(res.status, 200);
    await fetch(`${running.url}/auth/v1/signup`, {
      method: "POST",
      headers: { apikey: keys.anon_key, "content-type": "application/json" },
      body: JSON.stringify({ email: "later@example.com", password: "long enough" }),
    });
    const row = await waitFor(async () =>
      (await listMail(t().db, { tenantId: tenant.id })).find((m) => m.status === "failed"),
    );
    assert.match(row.error ?? "", /ECONNREFUSED|connect/i);
  });
});
