import { generateKeyPairSync, type KeyObject } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { decodeJwt, decodeProtectedHeader, SignJWT } from "jose";
import Provider from "oidc-provider";

/**
 * A real OpenID provider on loopback for tests (oidc-provider): one confidential client with PKCE,
 * development interactions (a login form taking any account name, then a consent form) that
 * `signIn` fills in by HTTP, and a switch that re-signs the ID token the token endpoint answers
 * with a wrong nonce, a wrong audience or a key the provider does not publish.
 */

export interface Account {
  email?: string;
  email_verified?: boolean;
  name?: string;
}

export type Tamper = "nonce" | "aud" | "key" | undefined;

export interface LoopbackProvider {
  issuer: string;
  clientId: string;
  clientSecret: string;
  accounts: Map<string, Account>;
  tamper: Tamper;
  close(): Promise<void>;
}

export async function startOidcProvider(options: { redirectUri: string }): Promise<LoopbackProvider> {
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const jwk = { ...privateKey.export({ format: "jwk" }), kid: "test-key", use: "sig", alg: "RS256" };
  const stranger: KeyObject = generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey;
  const accounts = new Map<string, Account>();
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const state: LoopbackProvider = {
    issuer,
    clientId: "backline-test",
    clientSecret: "a-client-secret-nobody-may-see",
    accounts,
    tamper: undefined,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: state.clientId,
        client_secret: state.clientSecret,
        redirect_uris: [options.redirectUri],
        grant_types: ["authorization_code"],
        response_types: ["code"],
        token_endpoint_auth_method: "client_secret_basic",
      },
    ],
    jwks: { keys: [jwk] },
    cookies: { keys: ["loopback-cookie-key"] },
    ttl: { Interaction: 600, Session: 3600, Grant: 3600, AccessToken: 600, IdToken: 600 },
    claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["name"] },
    pkce: { required: () => true },
    features: { devInteractions: { enabled: true } },
    findAccount: async (_ctx: unknown, id: string) => {
      const account = accounts.get(id);
      return account ? { accountId: id, claims: async () => ({ sub: id, ...account }) } : undefined;
    },
  });
  // The switch: the token endpoint's ID token, re-signed with one thing wrong.
  provider.use(async (ctx: { path: string; body: unknown }, next: () => Promise<void>) => {
    await next();
    // The development pages ask for a web font: a browser test's page stays on loopback.
    if (typeof ctx.body === "string")
      ctx.body = ctx.body.replace(/@import url\(https:\/\/fonts\.googleapis[^)]*\);/g, "");
    const body = ctx.body as { id_token?: string } | undefined;
    if (ctx.path !== "/token" || !state.tamper || !body?.id_token) return;
    const claims = decodeJwt(body.id_token);
    const header = decodeProtectedHeader(body.id_token);
    if (state.tamper === "nonce") claims.nonce = "another-nonce";
    if (state.tamper === "aud") claims.aud = "another-client";
    body.id_token = await new SignJWT(claims)
      .setProtectedHeader({ alg: "RS256", kid: header.kid as string })
      .sign(state.tamper === "key" ? stranger : privateKey);
  });
  server.on("request", provider.callback());
  return state;
}

/** A browser's cookies for one host, enough for the provider's interaction and session cookies. */
class CookieJar {
  private readonly cookies = new Map<string, string>();
  take(res: Response) {
    for (const line of res.headers.getSetCookie()) {
      const [pair] = line.split(";");
      const at = pair?.indexOf("=") ?? -1;
      if (pair && at > 0) this.cookies.set(pair.slice(0, at).trim(), pair.slice(at + 1));
    }
  }
  header(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; ");
  }
}

/**
 * Plays the browser from `startUrl` (the /authorize URL signInWithOAuth gave): follows redirects,
 * signs in at the provider as `account` and consents, and stops at the first address outside the
 * provider and the server (the client's redirect_to), which it returns. `rewrite` maps the
 * server's PUBLIC_URL to where it listens. `stopAt` stops earlier (at the callback, say).
 */
export async function playBrowser(
  startUrl: string,
  options: {
    account: string;
    provider: LoopbackProvider;
    rewrite: (url: string) => string;
    stopAt?: (url: string) => boolean;
  },
): Promise<string> {
  const jar = new CookieJar();
  const issuer = new URL(options.provider.issuer);
  let url = options.rewrite(startUrl);
  let method = "GET";
  let form: URLSearchParams | undefined;
  for (let hop = 0; hop < 20; hop++) {
    const here = new URL(url);
    const atProvider = here.origin === issuer.origin;
    const res = await fetch(url, {
      method,
      redirect: "manual",
      headers: {
        ...(atProvider ? { cookie: jar.header() } : {}),
        ...(form ? { "content-type": "application/x-www-form-urlencoded" } : {}),
      },
      ...(form ? { body: form } : {}),
    });
    if (atProvider) jar.take(res);
    method = "GET";
    form = undefined;
    const location = res.headers.get("location");
    if (res.status >= 300 && res.status < 400 && location) {
      const next = new URL(location, url).toString();
      if (options.stopAt?.(next)) return next;
      const rewritten = options.rewrite(next);
      const nextUrl = new URL(rewritten);
      if (nextUrl.origin !== issuer.origin && !rewritten.includes("/auth/v1/")) return next;
      url = rewritten;
      continue;
    }
    const html = await res.text();
    const prompt = /name="prompt" value="(\w+)"/.exec(html)?.[1];
    const action = /<form[^>]*action="([^"]+)"/.exec(html)?.[1];
    if (!atProvider || !prompt || !action)
      throw new Error(`unexpected answer ${res.status} at ${url}: ${html.slice(0, 300)}`);
    method = "POST";
    form = new URLSearchParams(
      prompt === "login" ? { prompt, login: options.account, password: "any" } : { prompt },
    );
    url = new URL(action.replace(/&amp;/g, "&"), url).toString();
  }
  throw new Error("too many redirects");
}
