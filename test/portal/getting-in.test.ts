import assert from "node:assert/strict";
import http from "node:http";
import { describe, test } from "node:test";
import { createClient } from "@supabase/supabase-js";
import type { Page } from "playwright-core";
import { totpCode, totpStep } from "../../src/auth/totp.ts";
import { waitForMail } from "../support/console.ts";
import { tid } from "../support/console-ui.ts";
import { portalSkip, portalSuite } from "../support/portal-browser.ts";
import { BRAND, PASSWORD } from "../support/portal-seed.ts";

/**
 * The portal (docs/portal.md, issue 38's first slice) in headless Chromium against `npm start`'s
 * server on the embedded database: a branded tenant made as `backline tenants create` makes one;
 * an artist signs up, confirms through the mailbox and lands signed in on an empty releases list
 * with the tenant's name, logo and colour; an invited viewer accepts and chooses a password in
 * one visit and sees the label's release without an edit button; a member of another account
 * sees nothing of it; a wrong password is said in plain words beside the form. Every page is
 * checked by axe-core and photographed on a desktop and on a phone (artifacts/console/portal-*).
 * The stories run side by side, each in its own browser context.
 */

const skip = portalSkip();

// Two stories at a time: on CI's 2 cores, beside the suite's other file, four at once left steps
// waiting past their timeout now and then (two gate runs of 2026-12-04 lost one story each).
describe("the portal in Chromium: getting in", { skip, concurrency: 2 }, () => {
  const stories = portalSuite();
  const portal = stories.portal;
  const story = stories.story;
  const signIn = (page: Page, email: string, password: string) =>
    stories.signIn(page, portal(), email, password);

  const channels = (css: string) => (css.match(/\d+(\.\d+)?/g) ?? []).slice(0, 3).map(Number);
  const luminance = (rgb: number[]) =>
    rgb
      .map((v) => v / 255)
      .map((s) => (s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4))
      .reduce((sum, v, i) => sum + v * ([0.2126, 0.7152, 0.0722][i] as number), 0);

  test("an artist signs up, confirms through the mailbox, and lands on a branded, empty releases list", async () => {
    await story("sign-up", async ({ page, record }) => {
      await page.goto(`${portal()}/`);
      await page.locator(tid("page-sign-in")).waitFor();
      // The tenant's branding: its name (heading and header), its logo, its colour made readable.
      assert.equal(await page.locator(tid("brand-name")).innerText(), BRAND.display_name);
      assert.equal(
        await page.getByRole("heading", { level: 1 }).innerText(),
        `Sign in to ${BRAND.display_name}`,
      );
      await page.locator(tid("brand-logo")).waitFor({ state: "visible" });
      // The operator's custom CSS is loaded after the portal's own and wins.
      const spacing = await page
        .locator(tid("brand-name"))
        .evaluate(
          (el) =>
            (
              globalThis as unknown as { getComputedStyle(e: unknown): Record<string, string> }
            ).getComputedStyle(el).letterSpacing,
        );
      assert.notEqual(spacing, "normal", "the tenant's custom CSS applies");
      const button = page.getByRole("button", { name: "Sign in", exact: true });
      const [bg, fg] = await button.evaluate((el) => {
        const style = (
          globalThis as unknown as { getComputedStyle(e: unknown): Record<string, string> }
        ).getComputedStyle(el);
        return [style.backgroundColor ?? "", style.color ?? ""];
      });
      const [r, g, b] = channels(bg) as [number, number, number];
      assert.ok(r > b && g > b, `the button is in the brand's yellow hue, darkened: ${bg}`);
      const ratio = (luminance(channels(fg)) + 0.05) / (luminance([r, g, b]) + 0.05);
      assert.ok(ratio >= 4.5, `white on the brand colour reaches 4.5:1 (${ratio.toFixed(2)})`);
      assert.match((await page.locator("footer").innerText()) ?? "", /help@moonlight\.test/);
      await record("sign-in", "page-sign-in");

      await page.getByRole("link", { name: "Create an account" }).click();
      await page.locator(tid("page-sign-up")).waitFor();
      await record("sign-up", "page-sign-up");
      const email = "artist@moonlight.test";
      const mails = stories.stack.smtp.received.length;
      // A password that is too short is refused beside its field, in plain words.
      await page.getByLabel("Email", { exact: true }).fill(email);
      await page.getByLabel("Password", { exact: true }).fill("short");
      await page.getByRole("button", { name: "Create account" }).click();
      assert.match(await page.locator(tid("signup-password-error")).innerText(), /at least 8 characters/);
      await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
      await page.getByRole("button", { name: "Create account" }).click();
      await page.locator(tid("signup-check-mail")).waitFor();
      await record("check-mail", "signup-check-mail");

      // The confirmation link in the mail brings the artist back to this portal, signed in.
      const { match } = await waitForMail(
        stories.stack.smtp,
        email,
        /https?:\/\/\S+\/auth\/v1\/verify\?\S+/,
        {
          after: mails,
        },
      );
      const link = new URL(match[0]);
      assert.equal(link.searchParams.get("type"), "signup");
      await page.goto(link.toString());
      await page.locator(tid("page-releases")).waitFor();
      assert.equal(new URL(page.url()).pathname, `/portal/t/${stories.world.tenant.slug}/releases`);
      assert.equal(new URL(page.url()).hash, "", "the session left the address bar");
      await page.locator(tid("releases-empty")).waitFor();
      assert.match(await page.locator(tid("releases-empty")).innerText(), /New release/);
      assert.equal(await page.locator(tid("user-email")).innerText(), email);
      assert.equal(await page.locator(tid("brand-name")).innerText(), BRAND.display_name);
      assert.equal(await page.locator(tid("release-row")).count(), 0);
      assert.ok(await page.getByRole("link", { name: "Releases", exact: true }).isVisible());
      await record("releases-empty", "releases-empty");

      // Signed out, then in again with the password chosen at sign-up.
      await page.locator(tid("sign-out")).click();
      await page.locator(tid("page-sign-in")).waitFor();
      await signIn(page, email, PASSWORD);
      await page.locator(tid("releases-empty")).waitFor();

      // The first write: a draft with a title and an artist, which opens in the editor.
      await page.locator(tid("release-new")).click();
      await page.locator(tid("page-new-release")).waitFor();
      await page.getByRole("button", { name: "Create draft" }).click();
      assert.match(await page.locator(tid("release-title-error")).innerText(), /title/);
      await record("new-release-error", "release-title-error");
      await page.getByLabel("Title", { exact: true }).fill("First Light");
      await page.getByLabel("Artist", { exact: true }).fill("Ada Moon");
      await page.getByRole("button", { name: "Create draft" }).click();
      await page.getByRole("heading", { name: "First Light" }).waitFor();
      assert.match(await page.locator(tid("release-editing")).innerText(), /draft[\s\S]*By Ada Moon/);
      await page.locator(tid("tracks-empty")).waitFor();
      await page.locator(tid("problem")).first().waitFor();
      await record("release-draft", "problems");
      await page.getByRole("link", { name: "Releases", exact: true }).click();
      await page.locator(tid("release-row")).first().waitFor();
      assert.equal(await page.locator(tid("release-row")).count(), 1);
    });
  });

  test("an invited viewer accepts and chooses a password in one visit, then signs in with it", async () => {
    await story("invite", async ({ page, record }) => {
      // The link `accounts add-member` mailed, as mailed: the tenant has no site_url of its own,
      // so it lands in the tenant's portal.
      const link = new URL(stories.world.inviteLink);
      assert.equal(link.searchParams.get("type"), "invite");
      assert.equal(link.searchParams.get("redirect_to"), null);
      await page.goto(link.toString());
      await page.locator(tid("page-set-password")).waitFor();
      assert.equal(new URL(page.url()).pathname, `/portal/t/${stories.world.tenant.slug}/welcome`);
      await page.locator(tid("invitation-accepted")).filter({ hasText: "Moonlight Records" }).waitFor();
      await record("welcome", "invitation-accepted");
      await page.getByLabel("Password", { exact: true }).fill("tiny");
      await page.getByRole("button", { name: "Save password" }).click();
      assert.match(await page.locator(tid("password-new-error")).innerText(), /at least 8 characters/);
      await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
      await page.getByRole("button", { name: "Save password" }).click();
      await page.locator(tid("password-saved")).waitFor();

      // A viewer: the label's release, read-only, and no edit button anywhere.
      const row = page.locator(tid("release-row")).filter({ hasText: "Harbour Lights" });
      await row.waitFor();
      assert.match(
        await page.locator(tid("releases-of")).innerText(),
        /Moonlight Records · your role: viewer/,
      );
      assert.equal(await page.locator(tid("release-new")).count(), 0, "a viewer is offered no New release");
      assert.equal(await page.locator(tid("nav-developers")).count(), 0, "nor keys and webhooks");
      await record("releases", "release-row");
      await row.getByRole("link").click();
      await page.getByRole("heading", { name: "Harbour Lights" }).waitFor();
      assert.equal(await page.locator(tid("release-track")).count(), 2);
      assert.match(await page.locator(tid("release-tracks")).innerText(), /Low Tide[\s\S]*3:33/);
      assert.equal(await page.getByRole("button", { name: /edit|delete|submit/i }).count(), 0);
      await record("release", "release-tracks");
      // The page for a new release refuses a viewer in words, with no form.
      await page.goto(`${portal()}/releases/new`);
      await page.locator(tid("new-release-refused")).waitFor();
      assert.equal(await page.getByLabel("Title", { exact: true }).count(), 0);

      // Signed out, and in again with the password chosen on the welcome page.
      await page.locator(tid("sign-out")).click();
      await page.locator(tid("page-sign-in")).waitFor();
      await signIn(page, stories.world.viewerEmail, PASSWORD);
      await page.locator(tid("release-row")).filter({ hasText: "Harbour Lights" }).waitFor();
      // The invite link works once.
      await page.goto(link.toString());
      await page.locator(tid("page-auth-callback")).getByRole("alert").waitFor();
      assert.match(await page.locator(tid("page-auth-callback")).innerText(), /expired or was already used/);
      await record("link-used", "page-auth-callback");
    });
  });

  test("a member of another account sees nothing of this one", async () => {
    await story("other-account", async ({ page, record }) => {
      await signIn(page, stories.world.far.email, PASSWORD);
      await page.locator(tid("release-row")).filter({ hasText: "Elsewhere Song" }).waitFor();
      assert.doesNotMatch(await page.locator("main").innerText(), /Harbour Lights|Moonlight Records/);
      assert.equal(await page.locator(tid("release-row")).count(), 1);
      // A member of two accounts switches between them; the choice survives a reload.
      const account = page.getByLabel("Account", { exact: true });
      assert.deepEqual(await account.locator("option").allTextContents(), ["Far Away Label", "Second Label"]);
      await account.selectOption({ label: "Second Label" });
      await page.locator(tid("release-row")).filter({ hasText: "Second Song" }).waitFor();
      assert.equal(await page.locator(tid("release-row")).count(), 1);
      await record("account-switched", "release-row");
      await page.reload();
      await page.locator(tid("release-row")).filter({ hasText: "Second Song" }).waitFor();
      // This account's release by its address: not found, nothing of it on the page.
      await page.goto(`${portal()}/releases/${stories.world.label.releaseId}`);
      await page.locator(tid("release-not-found")).waitFor();
      assert.doesNotMatch(await page.locator("body").innerText(), /Harbour Lights|Low Tide/);
      await record("release-not-found", "release-not-found");
      // And what the page asks through supabase-js, asked directly with the same token: nothing.
      const token = await page.evaluate((key) => {
        const ls = (globalThis as unknown as { localStorage: { getItem(k: string): string | null } })
          .localStorage;
        return (JSON.parse(ls.getItem(key) ?? "{}") as { access_token?: string }).access_token ?? "";
      }, `backline-portal-${stories.world.tenant.id}`);
      assert.ok(token, "the session is in localStorage");
      const headers = { apikey: stories.world.tenant.anonKey, authorization: `Bearer ${token}` };
      const rest = await fetch(
        `${stories.stack.url}/rest/v1/releases?id=eq.${stories.world.label.releaseId}&select=id`,
        {
          headers,
        },
      );
      assert.deepEqual(await rest.json(), []);
      const mine = (await (await fetch(`${stories.stack.url}/portal/accounts.json`, { headers })).json()) as {
        accounts: { name: string; role: string }[];
      };
      assert.deepEqual(
        mine.accounts.map((a) => [a.name, a.role]),
        [
          ["Far Away Label", "owner"],
          ["Second Label", "member"],
        ],
      );
    });
  });

  test("a wrong password is said in plain words next to the form", async () => {
    await story("wrong-password", async ({ page, record }) => {
      // By keyboard only: the first field, Tab to the next, Enter sends the form.
      await page.goto(`${portal()}/`);
      await page.getByLabel("Email", { exact: true }).focus();
      await page.keyboard.type(stories.world.far.email);
      await page.keyboard.press("Tab");
      await page.keyboard.type("not the password at all");
      await page.keyboard.press("Enter");
      const message = page.locator(tid("signin-password-error"));
      await message.waitFor();
      const text = await message.innerText();
      assert.match(text, /do not match/);
      assert.doesNotMatch(text, /error|\b4\d\d\b|invalid_credentials|password:/i);
      assert.equal(await page.getByLabel("Password", { exact: true }).getAttribute("aria-invalid"), "true");
      await record("wrong-password", "signin-password-error");
      await page.getByRole("link", { name: "Forgot your password?" }).click();
      await record("reset-password", "page-reset-password");

      // The other way in: a code mailed to the address.
      await page.getByRole("link", { name: "Back to sign in" }).click();
      await page.getByRole("button", { name: "Sign in with a code by e-mail instead" }).click();
      await page.getByLabel("Email", { exact: true }).fill(stories.world.far.email);
      const sent = stories.stack.smtp.received.length;
      await page.getByRole("button", { name: "Email me a code" }).click();
      await page.locator(tid("signin-code-sent")).waitFor();
      const { match } = await waitForMail(
        stories.stack.smtp,
        stories.world.far.email,
        /Or enter this code: (\d{6})/,
        {
          after: sent,
        },
      );
      await page.getByLabel("Code", { exact: true }).fill("123");
      await page.getByRole("button", { name: "Sign in with the code" }).click();
      assert.match(await page.locator(tid("signin-code-error")).innerText(), /six-digit code/);
      await record("sign-in-code", "signin-code-error");
      await page.getByLabel("Code", { exact: true }).fill(match[1] as string);
      await page.getByRole("button", { name: "Sign in with the code" }).click();
      await page.locator(tid("release-row")).first().waitFor();
    });
  });

  test("an account that requires a second factor asks for the authenticator code, then shows its releases", async () => {
    // The member adds an authenticator app through supabase-js, as any app of theirs would.
    const supabase = createClient(stories.stack.url, stories.world.tenant.anonKey, {
      auth: { persistSession: false, autoRefreshToken: false },
    });
    const signedIn = await supabase.auth.signInWithPassword({
      email: stories.world.vault.email,
      password: PASSWORD,
    });
    assert.equal(signedIn.error, null);
    const enrolled = await supabase.auth.mfa.enroll({ factorType: "totp", friendlyName: "phone" });
    assert.equal(enrolled.error, null);
    const { id: factorId, totp } = enrolled.data as { id: string; totp: { secret: string } };
    // The code of the step before this one: the browser's, of this step, is then a later one.
    const verified = await supabase.auth.mfa.challengeAndVerify({
      factorId,
      code: totpCode(totp.secret, totpStep() - 1),
    });
    assert.equal(verified.error, null);

    await story("mfa", async ({ page, record }) => {
      await signIn(page, stories.world.vault.email, PASSWORD);
      await page.locator(tid("page-mfa")).waitFor();
      assert.equal(
        await page.locator(tid("release-row")).count(),
        0,
        "nothing of the account before the code",
      );
      await page.getByLabel("Code", { exact: true }).fill("000000");
      await page.getByRole("button", { name: "Verify" }).click();
      assert.match(await page.locator(tid("mfa-code-error")).innerText(), /not right/);
      await record("mfa", "page-mfa");
      await page.getByLabel("Code", { exact: true }).fill(totpCode(totp.secret, totpStep()));
      await page.getByRole("button", { name: "Verify" }).click();
      await page.locator(tid("release-row")).filter({ hasText: "Locked Away" }).waitFor();
    });
  });

  test("a forgotten password: the mailed link opens the portal, which asks for a new one", async () => {
    await story("reset", async ({ page }) => {
      const email = "reset@moonlight.test";
      // A member who signed up and confirmed long ago (through the API, as any app may).
      const supabase = createClient(stories.stack.url, stories.world.tenant.anonKey, {
        auth: { persistSession: false, autoRefreshToken: false },
      });
      const before = stories.stack.smtp.received.length;
      assert.equal((await supabase.auth.signUp({ email, password: "the first password" })).error, null);
      const confirm = await waitForMail(stories.stack.smtp, email, /https?:\/\/\S+\/auth\/v1\/verify\?\S+/, {
        after: before,
      });
      await page.goto(confirm.match[0]);
      await page.locator(tid("page-releases")).waitFor();
      await page.locator(tid("sign-out")).click();
      await page.locator(tid("page-sign-in")).waitFor();
      await page.getByRole("link", { name: "Forgot your password?" }).click();
      await page.getByLabel("Email", { exact: true }).fill(email);
      const sent = stories.stack.smtp.received.length;
      await page.getByRole("button", { name: "Email me a link" }).click();
      await page.locator(tid("reset-sent")).waitFor();
      const { match } = await waitForMail(
        stories.stack.smtp,
        email,
        /https?:\/\/\S+\/auth\/v1\/verify\?\S+/,
        {
          after: sent,
        },
      );
      assert.equal(new URL(match[0]).searchParams.get("type"), "recovery");
      await page.goto(match[0]);
      await page.getByRole("heading", { name: "Choose a new password" }).waitFor();
      await page.getByLabel("Password", { exact: true }).fill("the second password");
      await page.getByRole("button", { name: "Save password" }).click();
      await page.locator(tid("password-saved")).waitFor();
      await page.locator(tid("sign-out")).click();
      await page.locator(tid("page-sign-in")).waitFor();
      await signIn(page, email, "the second password");
      await page.locator(tid("page-releases")).waitFor();
    });
  });

  test("an address with no tenant says there is no portal; the development tenant at /portal", async () => {
    await story("no-portal", async ({ page, record }) => {
      await page.goto(`${stories.stack.url}/portal/t/no-such-tenant/releases`);
      await page.getByRole("heading", { name: "There is no portal at this address" }).waitFor();
      await record("no-portal", "page-no-portal");
      // /portal without a slug: the development tenant (npm start makes it on first start).
      await page.goto(`${stories.stack.url}/portal/`);
      await page.locator(tid("page-sign-in")).waitFor();
      assert.notEqual(await page.locator(tid("brand-name")).innerText(), BRAND.display_name);
    });
  });

  test("the tenant by host name: its own domain shows it, and only it", async () => {
    const ask = (host: string, query = "") =>
      new Promise<{ status: number; body: Record<string, unknown> }>((resolve, reject) => {
        const url = new URL(`${stories.stack.url}/portal/tenant.json${query}`);
        http
          .get(
            { hostname: url.hostname, port: url.port, path: url.pathname + url.search, headers: { host } },
            (res) => {
              let text = "";
              res.on("data", (c: Buffer) => {
                text += c.toString();
              });
              res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
            },
          )
          .on("error", reject);
      });
    const own = await ask("music.moonlight.test");
    assert.equal(own.status, 200);
    assert.equal(own.body.slug, "moonlight");
    assert.equal(own.body.via, "domain");
    assert.equal(own.body.portal_url, `http://music.moonlight.test/portal/`);
    const cssUrl = String((own.body.branding as { custom_css_url?: unknown }).custom_css_url);
    assert.match(cssUrl, new RegExp(`^/brand/${stories.world.tenant.id}/custom\\.css\\?v=`));
    assert.deepEqual(own.body.branding, {
      display_name: BRAND.display_name,
      logo_url: `${stories.stack.url}/portal/favicon.svg`,
      primary_color: BRAND.primary_color,
      support_email: BRAND.support_email,
      custom_css_url: cssUrl,
    });
    assert.equal(own.body.signup, true);
    // Another tenant's slug under this tenant's domain: no portal, never the other one's.
    assert.equal((await ask("music.moonlight.test:8443", "?slug=dev")).status, 404);
    assert.equal((await ask("MUSIC.moonlight.test", "?slug=moonlight")).body.slug, "moonlight");
    // An unknown host: the slug, else the development tenant.
    assert.equal((await ask("elsewhere.test", "?slug=moonlight")).body.via, "slug");
    assert.equal((await ask("elsewhere.test")).body.via, "development");
    assert.equal((await ask("elsewhere.test", "?slug=nope")).status, 404);
  });
});
