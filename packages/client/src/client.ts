import createClient, { type Client, type ClientOptions } from "openapi-fetch";
import type { paths } from "./generated/openapi.ts";
import { type RetryOptions, retryingFetch } from "./retry.ts";

export interface BacklineClientOptions extends RetryOptions {
  /** The API's base URL, `https://backline.example.com/api/public/v1`. */
  baseUrl: string;
  /** An API key (`bk_live_…` or `bk_test_…`). */
  apiKey?: string;
  /** Or a signed-in member's access token from `/auth/v1`, with `account`. */
  accessToken?: string;
  /** The account a member's token acts for (`Backline-Account`); with a key, only the key's own. */
  account?: string;
  /** Headers sent with every request. */
  headers?: Record<string, string>;
  /** The fetch to send with (default: the global one). */
  fetch?: (request: Request) => Promise<Response>;
  /** Other options of openapi-fetch's `createClient`. */
  clientOptions?: Omit<ClientOptions, "baseUrl" | "fetch" | "headers">;
}

export type BacklineClient = Client<paths>;

/**
 * A typed client of `/api/public/v1`: openapi-fetch over the types generated from its OpenAPI
 * document, authenticated, retrying as `retryingFetch` describes. Calls answer `{data, error,
 * response}`; `unwrap()` turns them into the data or a thrown `BacklineApiError`.
 */
export function createBacklineClient(options: BacklineClientOptions): BacklineClient {
  const credential = options.apiKey ?? options.accessToken;
  if (!credential) throw new TypeError("createBacklineClient needs an apiKey (or an accessToken)");
  const headers: Record<string, string> = { ...options.headers, Authorization: `Bearer ${credential}` };
  if (options.account) headers["Backline-Account"] = options.account;
  return createClient<paths>({
    ...options.clientOptions,
    baseUrl: options.baseUrl.replace(/\/+$/, ""),
    headers,
    fetch: retryingFetch(options, options.fetch),
  });
}
