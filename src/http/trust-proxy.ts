import { BlockList } from "node:net";
import type { FastifyRequest } from "fastify";
import type { TrustProxy } from "../config.ts";

/**
 * The client address of a request is `request.ip`, everywhere (rate limits, the audit log, the
 * request log): Fastify takes it from the socket, walking X-Forwarded-For from its end, right to
 * left, past every address this function trusts (proxy-addr's rule: `hop` 0 is the socket's
 * peer, 1 the last entry, …). The first address it does not trust is the client's. Entries to its
 * left were written by the client itself (or by proxies it chose) and are never believed.
 *
 * A hop count is given as a function, not as Fastify's number option, which this Fastify (5.12)
 * takes as trusting nothing: a count cannot tell a proxy from a client that connects directly, so
 * it is only as good as the promise that every request comes through that many proxies
 * (docs/security.md, "Behind a proxy").
 */
export function trustProxyOption(setting: TrustProxy): false | ((address: string, hop: number) => boolean) {
  if (setting === false) return false;
  if ("hops" in setting) {
    const hops = setting.hops;
    return (_address, hop) => hop < hops;
  }
  const trusted = new BlockList();
  for (const range of setting.proxies) {
    const [address = "", prefix] = range.split("/");
    const family = address.includes(":") ? "ipv6" : "ipv4";
    trusted.addSubnet(address, Number(prefix), family);
  }
  // BlockList matches IPv4-mapped IPv6 peers (::ffff:10.0.0.1) against IPv4 ranges, and an entry
  // that is no address (a client's own writing) against nothing.
  return (address) => trusted.check(address, address.includes(":") ? "ipv6" : "ipv4");
}

export const PROXY_CHAIN_WARNING =
  'TRUST_PROXY=true trusts one proxy: the client address is the last X-Forwarded-For entry. A request came with several entries, so there are more proxies in front of this one or a client wrote the header itself. Set TRUST_PROXY to the number of proxies in front of the server (TRUST_PROXY=1 keeps what true does, without this warning) or to a list of their addresses (docs/security.md, "Behind a proxy").';

/**
 * TRUST_PROXY=true once trusted every X-Forwarded-For entry; it now trusts one proxy. When such a
 * server first sees a header with more than one entry it says once, at warn level, what to set.
 * Until then the cost is a header lookup and a search for a comma; after it, a boolean.
 */
export function proxyChainWarning(setting: TrustProxy): ((request: FastifyRequest) => void) | undefined {
  if (setting === false || !("hops" in setting) || !setting.fromTrue) return undefined;
  let warned = false;
  return (request) => {
    if (warned) return;
    const header = request.headers["x-forwarded-for"];
    if (typeof header !== "string" || !header.includes(",")) return;
    warned = true;
    request.log.warn({ x_forwarded_for_entries: header.split(",").length }, PROXY_CHAIN_WARNING);
  };
}
