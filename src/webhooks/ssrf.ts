import dns from "node:dns";
import net from "node:net";

/**
 * The server-side request forgery guard for webhooks (docs/webhooks.md, "Register an endpoint").
 * An endpoint's URL is chosen by a client, and Backline POSTs to it from inside the operator's
 * network: unless the operator allows private targets (development), only `https` URLs whose
 * host resolves to public addresses are accepted.
 *
 * The check runs twice: at registration (`checkWebhookUrl`, for a helpful 422) and at every
 * connection (`guardedLookup`, given to the socket as its `lookup`): every address the name
 * resolves to is checked, and the socket connects to the checked addresses only. A name that
 * resolved to a public address at registration and to 127.0.0.1 later (DNS rebinding) is refused
 * when it matters, and no second resolution happens between the check and the connection.
 */

/** What an address is; everything but `public` is refused. */
export type AddressClass =
  | "public"
  | "loopback"
  | "private"
  | "link_local"
  | "cgnat"
  | "unspecified"
  | "multicast"
  | "broadcast"
  | "metadata"
  | "reserved"
  | "invalid";

type V4Rule = [network: number, prefix: number, cls: AddressClass];

const v4 = (a: number, b: number, c: number, d: number): number =>
  ((a << 24) | (b << 16) | (c << 8) | d) >>> 0;

/** First match wins: the metadata addresses before the ranges that hold them. */
const V4_RULES: V4Rule[] = [
  [v4(169, 254, 169, 254), 32, "metadata"], // AWS, GCP, Azure, OpenStack, Oracle…
  [v4(169, 254, 170, 2), 32, "metadata"], // AWS ECS task metadata
  [v4(100, 100, 100, 200), 32, "metadata"], // Alibaba Cloud
  [v4(255, 255, 255, 255), 32, "broadcast"],
  [v4(0, 0, 0, 0), 8, "unspecified"], // "this network"
  [v4(10, 0, 0, 0), 8, "private"],
  [v4(100, 64, 0, 0), 10, "cgnat"],
  [v4(127, 0, 0, 0), 8, "loopback"],
  [v4(169, 254, 0, 0), 16, "link_local"],
  [v4(172, 16, 0, 0), 12, "private"],
  [v4(192, 0, 0, 0), 24, "reserved"], // IETF protocol assignments
  [v4(192, 0, 2, 0), 24, "reserved"], // TEST-NET-1
  [v4(192, 88, 99, 0), 24, "reserved"], // 6to4 relay anycast
  [v4(192, 168, 0, 0), 16, "private"],
  [v4(198, 18, 0, 0), 15, "reserved"], // benchmarking
  [v4(198, 51, 100, 0), 24, "reserved"], // TEST-NET-2
  [v4(203, 0, 113, 0), 24, "reserved"], // TEST-NET-3
  [v4(224, 0, 0, 0), 4, "multicast"],
  [v4(240, 0, 0, 0), 4, "reserved"],
];

function parseV4(address: string): number | undefined {
  if (!net.isIPv4(address)) return undefined;
  const parts = address.split(".").map(Number);
  return v4(parts[0] ?? 0, parts[1] ?? 0, parts[2] ?? 0, parts[3] ?? 0);
}

function classifyV4(n: number): AddressClass {
  for (const [network, prefix, cls] of V4_RULES) {
    const mask = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
    if ((n & mask) >>> 0 === network) return cls;
  }
  return "public";
}

/** The eight 16-bit groups of an IPv6 address (a zone, `%eth0`, ignored); undefined when it is not one. */
export function parseV6(address: string): number[] | undefined {
  const bare = address.replace(/^\[|\]$/g, "").replace(/%.*$/, "");
  if (!net.isIPv6(bare)) return undefined;
  let text = bare.toLowerCase();
  // A dotted IPv4 tail (::ffff:127.0.0.1) becomes two groups.
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted?.[1]) {
    const n = parseV4(dotted[1]);
    if (n === undefined) return undefined;
    text = `${text.slice(0, dotted.index)}${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
  }
  const [head = "", tail] = text.split("::");
  const left = head ? head.split(":") : [];
  const right = tail ? tail.split(":") : [];
  const missing = 8 - left.length - right.length;
  if (tail === undefined ? missing !== 0 : missing < 1) return undefined;
  const groups = [...left, ...Array<string>(tail === undefined ? 0 : missing).fill("0"), ...right].map((g) =>
    Number.parseInt(g, 16),
  );
  return groups.length === 8 && groups.every((g) => g >= 0 && g <= 0xffff) ? groups : undefined;
}

function classifyV6(g: number[]): AddressClass {
  const [g0 = 0, g1 = 0, g2 = 0, g3 = 0, g4 = 0, g5 = 0, g6 = 0, g7 = 0] = g;
  const embedded = ((g6 << 16) | g7) >>> 0;
  if (
    g0 === 0xfd00 &&
    g1 === 0x0ec2 &&
    g2 === 0 &&
    g3 === 0 &&
    g4 === 0 &&
    g5 === 0 &&
    g6 === 0 &&
    g7 === 0x254
  )
    return "metadata"; // AWS over IPv6
  if (g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0 && g4 === 0) {
    if (g5 === 0xffff) return classifyV4(embedded); // IPv4-mapped ::ffff:a.b.c.d
    if (g5 === 0) {
      if (g6 === 0 && g7 === 0) return "unspecified";
      if (g6 === 0 && g7 === 1) return "loopback";
      return "reserved"; // IPv4-compatible ::a.b.c.d (deprecated)
    }
    return "reserved";
  }
  if (g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0 && g4 === 0xffff && g5 === 0) {
    return classifyV4(embedded); // IPv4-translated ::ffff:0:a.b.c.d
  }
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0) {
    return classifyV4(embedded); // NAT64 64:ff9b::a.b.c.d reaches that IPv4 address
  }
  if (g0 === 0x2002) return classifyV4(((g1 << 16) | g2) >>> 0); // 6to4 2002:aabb:ccdd::
  if ((g0 & 0xfe00) === 0xfc00) return "private"; // unique local fc00::/7
  if ((g0 & 0xffc0) === 0xfe80) return "link_local"; // fe80::/10
  if ((g0 & 0xffc0) === 0xfec0) return "reserved"; // site-local fec0::/10 (deprecated)
  if ((g0 & 0xff00) === 0xff00) return "multicast";
  if (g0 === 0x2001 && g1 === 0x0db8) return "reserved"; // documentation
  if (g0 === 0x2001 && g1 < 0x0200) return "reserved"; // 2001::/23: Teredo, ORCHID, benchmarking…
  if ((g0 & 0xe000) !== 0x2000) return "reserved"; // outside global unicast 2000::/3
  return "public";
}

/** What kind of address `address` (IPv4 or IPv6, brackets and zone allowed) is. */
export function classifyAddress(address: string): AddressClass {
  const n = parseV4(address);
  if (n !== undefined) return classifyV4(n);
  const g = parseV6(address);
  if (g) return classifyV6(g);
  return "invalid";
}

/** Whether a webhook may not be sent to `address` (unless private targets are allowed). */
export function isBlockedAddress(address: string): boolean {
  return classifyAddress(address) !== "public";
}

export interface LookupAddress {
  address: string;
  family: number;
}

/** Resolves a host name to every address it has (the default: the system resolver, dns.lookup). */
export type Resolve = (hostname: string) => Promise<LookupAddress[]>;

export const systemResolve: Resolve = (hostname) =>
  dns.promises.lookup(hostname, { all: true, order: "verbatim" });

/** A host whose address is refused; `code` is `EBLOCKEDADDRESS` so the sender can tell it from others. */
export class BlockedAddressError extends Error {
  readonly code = "EBLOCKEDADDRESS";
  readonly address: string;
  readonly addressClass: AddressClass;

  constructor(hostname: string, address: string, cls: AddressClass) {
    super(
      hostname === address
        ? `${address} is a ${describe(cls)} address; webhooks go to public addresses only`
        : `${hostname} resolves to ${address}, a ${describe(cls)} address; webhooks go to public addresses only`,
    );
    this.name = "BlockedAddressError";
    this.address = address;
    this.addressClass = cls;
  }
}

/** A name that could not be resolved; `code` is the resolver's (ENOTFOUND, EAI_AGAIN, …) or ENOTFOUND. */
export class DnsError extends Error {
  readonly code: string;

  constructor(hostname: string, cause: unknown) {
    const code = (cause as NodeJS.ErrnoException | undefined)?.code ?? "ENOTFOUND";
    super(`${hostname} could not be resolved (${code})`, { cause });
    this.name = "DnsError";
    this.code = code;
  }
}

function describe(cls: AddressClass): string {
  return (
    {
      public: "public",
      loopback: "loopback",
      private: "private",
      link_local: "link-local",
      cgnat: "carrier-grade NAT",
      unspecified: "unspecified",
      multicast: "multicast",
      broadcast: "broadcast",
      metadata: "cloud metadata",
      reserved: "reserved",
      invalid: "invalid",
    } satisfies Record<AddressClass, string>
  )[cls];
}

const RESOLVE_TIMEOUT_MS = 5000;

/** Resolves `hostname` with a time limit; throws DnsError when it has no address. */
async function resolveAll(resolve: Resolve, hostname: string, timeoutMs = RESOLVE_TIMEOUT_MS) {
  let timer: NodeJS.Timeout | undefined;
  try {
    const addresses = await Promise.race([
      resolve(hostname),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(Object.assign(new Error("timed out"), { code: "ETIMEOUT" })),
          timeoutMs,
        );
      }),
    ]);
    if (addresses.length === 0) throw Object.assign(new Error("no addresses"), { code: "ENODATA" });
    return addresses;
  } catch (error) {
    throw error instanceof DnsError ? error : new DnsError(hostname, error);
  } finally {
    clearTimeout(timer);
  }
}

/** The first refused address of `addresses`, if any. */
function firstBlocked(addresses: LookupAddress[]): { address: string; cls: AddressClass } | undefined {
  for (const { address } of addresses) {
    const cls = classifyAddress(address);
    if (cls !== "public") return { address, cls };
  }
  return undefined;
}

export type UrlCheck =
  | { ok: true }
  | {
      ok: false;
      code: "url_invalid" | "url_not_https" | "url_blocked_address" | "url_unresolvable";
      message: string;
    };

export interface UrlCheckOptions {
  /** Allow http:// and private, loopback and link-local targets (development and tests). */
  allowPrivate: boolean;
  /** The resolver (tests inject one); the system's by default. */
  lookup?: Resolve;
}

/** The URL's host without IPv6 brackets. */
export function bareHostname(url: URL): string {
  return url.hostname.replace(/^\[|\]$/g, "");
}

/**
 * Whether a webhook may be registered for `url`: a well-formed http(s) URL without credentials,
 * and — unless `allowPrivate` — https, to a host whose every address is public. A name with any
 * refused address is refused (an attacker controls which answer a client uses).
 */
export async function checkWebhookUrl(url: string, options: UrlCheckOptions): Promise<UrlCheck> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { ok: false, code: "url_invalid", message: "Not a valid URL." };
  }
  if (url.length > 2048)
    return { ok: false, code: "url_invalid", message: "The URL is longer than 2048 characters." };
  if (parsed.protocol !== "https:" && parsed.protocol !== "http:") {
    return { ok: false, code: "url_invalid", message: "The URL must start with https://." };
  }
  if (parsed.username || parsed.password) {
    return { ok: false, code: "url_invalid", message: "The URL must not contain a user name or password." };
  }
  const hostname = bareHostname(parsed);
  if (!hostname) return { ok: false, code: "url_invalid", message: "The URL has no host." };
  if (options.allowPrivate) return { ok: true };
  if (parsed.protocol !== "https:") {
    return { ok: false, code: "url_not_https", message: "Webhook URLs must use https." };
  }
  if (net.isIP(hostname)) {
    const cls = classifyAddress(hostname);
    return cls === "public"
      ? { ok: true }
      : {
          ok: false,
          code: "url_blocked_address",
          message: `${hostname} is a ${describe(cls)} address; webhooks go to public addresses only.`,
        };
  }
  if (hostname === "localhost" || hostname.endsWith(".localhost") || hostname === "localhost.") {
    return { ok: false, code: "url_blocked_address", message: `${hostname} is a loopback name.` };
  }
  let addresses: LookupAddress[];
  try {
    addresses = await resolveAll(options.lookup ?? systemResolve, hostname);
  } catch (error) {
    return {
      ok: false,
      code: "url_unresolvable",
      message: `${hostname} could not be resolved (${(error as DnsError).code}).`,
    };
  }
  const blocked = firstBlocked(addresses);
  if (blocked) {
    return {
      ok: false,
      code: "url_blocked_address",
      message: `${hostname} resolves to ${blocked.address}, a ${describe(blocked.cls)} address; webhooks go to public addresses only.`,
    };
  }
  return { ok: true };
}

type LookupCallback = (
  error: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

/**
 * A `lookup` for net/http/https sockets: resolves with `resolve`, refuses the connection when any
 * address is refused (unless `allowPrivate`), and hands the socket exactly the addresses it
 * checked — the connection is pinned to them. Honours the socket's `family` and `all` options
 * (Node's happy-eyeballs connect asks for all addresses).
 *
 * Note: sockets do not call `lookup` for a host that is an IP literal; the sender checks those itself.
 */
export function guardedLookup(options: { allowPrivate: boolean; lookup?: Resolve }) {
  const resolve = options.lookup ?? systemResolve;
  return (
    hostname: string,
    lookupOptions: dns.LookupOptions | number | undefined,
    callback: LookupCallback,
  ) => {
    const opts = typeof lookupOptions === "object" ? lookupOptions : { family: lookupOptions };
    resolveAll(resolve, hostname).then(
      (all) => {
        const family =
          opts.family === 4 || opts.family === "IPv4"
            ? 4
            : opts.family === 6 || opts.family === "IPv6"
              ? 6
              : 0;
        // Every answer is checked, not only the ones of the family asked for.
        const blocked = options.allowPrivate ? undefined : firstBlocked(all);
        if (blocked) {
          callback(new BlockedAddressError(hostname, blocked.address, blocked.cls), opts.all ? [] : "");
          return;
        }
        const usable = family ? all.filter((a) => a.family === family) : all;
        const first = usable[0];
        if (!first) {
          callback(new DnsError(hostname, { code: "ENODATA" }), opts.all ? [] : "");
          return;
        }
        if (opts.all) callback(null, usable);
        else callback(null, first.address, first.family);
      },
      (error: unknown) => callback(error as NodeJS.ErrnoException, opts.all ? [] : ""),
    );
  };
}
