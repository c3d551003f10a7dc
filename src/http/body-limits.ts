import type { FastifyReply, FastifyRequest } from "fastify";

/**
 * Bounds on what a request body may be, checked before anything walks it (docs/security.md,
 * "Limits a request runs under"): the JSON parser, idempotency hashing and validators recurse,
 * so a body nested 10,000 levels deep must be refused before any of them sees it.
 */
export const JSON_LIMITS = {
  /** Objects and arrays nested deeper than this are refused. */
  maxDepth: 64,
  /** The most members one object or array may have. */
  maxMembers: 100_000,
} as const;

/** A body refused by a JSON limit: 400 with `code` on every interface. */
export class JsonLimitError extends Error {
  override name = "JsonLimitError";
  readonly statusCode = 400;
  readonly code: "json_too_deep" | "json_too_many_members";

  constructor(code: JsonLimitError["code"], message: string) {
    super(message);
    this.code = code;
  }
}

/**
 * Scans JSON text once, without parsing it, and throws JsonLimitError past a limit. Strings are
 * skipped (a bracket inside a string is text); malformed JSON is left to the parser to refuse.
 */
export function checkJsonLimits(text: string, limits: typeof JSON_LIMITS = JSON_LIMITS): void {
  // members[d] counts the commas seen at depth d + 1, i.e. members after the first.
  const members: number[] = [];
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92 /* \ */) i++;
      else if (c === 34 /* " */) inString = false;
      continue;
    }
    if (c === 34) inString = true;
    else if (c === 123 /* { */ || c === 91 /* [ */) {
      if (members.length >= limits.maxDepth) {
        throw new JsonLimitError(
          "json_too_deep",
          `The JSON body is nested deeper than ${limits.maxDepth} levels.`,
        );
      }
      members.push(0);
    } else if (c === 125 /* } */ || c === 93 /* ] */) members.pop();
    else if (c === 44 /* , */ && members.length > 0) {
      const top = members.length - 1;
      const count = (members[top] ?? 0) + 1;
      members[top] = count;
      if (count >= limits.maxMembers) {
        throw new JsonLimitError(
          "json_too_many_members",
          `An object or array in the JSON body has more than ${limits.maxMembers} members.`,
        );
      }
    }
  }
}

/** The most of an oversized body that is read (and thrown away) so the client can read its 413. */
const DRAIN_MAX_BYTES = 64 * 1024 * 1024;
const DRAIN_MAX_MS = 10_000;

/**
 * A 413 answered while the client is still sending makes many clients see EPIPE or a reset
 * instead of the answer. Before a 413 goes out, read the rest of the body (up to a bound) and
 * discard it, then answer with `Connection: close`. A body past the bound still gets its answer
 * and the connection is closed.
 */
export async function drainBeforeRefusal(request: FastifyRequest, reply: FastifyReply): Promise<void> {
  if (reply.statusCode !== 413) return;
  reply.header("connection", "close");
  const raw = request.raw;
  if (raw.complete || raw.destroyed) return;
  await new Promise<void>((resolve) => {
    let read = 0;
    const done = () => {
      clearTimeout(timer);
      raw.off("data", onData);
      raw.off("end", done);
      raw.off("error", done);
      raw.off("close", done);
      resolve();
    };
    const onData = (chunk: Buffer) => {
      read += chunk.length;
      if (read > DRAIN_MAX_BYTES) done();
    };
    const timer = setTimeout(done, DRAIN_MAX_MS);
    raw.on("data", onData);
    raw.once("end", done);
    raw.once("error", done);
    raw.once("close", done);
    raw.resume();
  });
}
