import pino, { type Logger, type LoggerOptions } from "pino";

/**
 * What never reaches a log (docs/security.md, "What is logged and what never is"): the secrets a
 * request carries in its URL (`?apikey=`, signed download and upload tokens, e-mail links' tokens
 * and codes, S3 signatures and credentials, OAuth tokens), in its headers (Authorization, apikey,
 * cookies) or in an error's message and properties. The one place this is decided: every logger
 * Backline makes goes through `loggerOptions` (the root logger) or `redactingLogger` (the app's,
 * whatever logger it was given), which serialize requests and errors with the secrets replaced by
 * `[REDACTED]` and scrub every string logged beside them.
 */

export const REDACTED = "[REDACTED]";

/**
 * Words that make a query parameter, header or logged field a secret when its name is, or ends
 * with, one of them (`apikey`, `x-api-key`, `access_token`, `X-Amz-Signature`, `token_hash`,
 * `client_secret`, `set-cookie`). Generous on purpose: a redacted `country_code` costs a little
 * detail, a logged `code` costs an account.
 */
const SECRET_WORDS = new Set([
  "apikey",
  "key",
  "token",
  "secret",
  "signature",
  "sig",
  "password",
  "passwd",
  "pwd",
  "passphrase",
  "credential",
  "credentials",
  "otp",
  "jwt",
  "auth",
  "authorization",
  "cookie",
  "session",
  "hash",
  "nonce",
  "ticket",
  "ciphertext",
  "assertion",
]);

/**
 * Whether a header or logged field's name names a secret; for a query parameter (`query`), a
 * `code` too (an e-mail link's, an OAuth authorization code) — in a logged field `code` is an
 * error code and stays.
 */
export function isSecretName(name: string, options: { query?: boolean } = {}): boolean {
  const words = name
    .replace(/([a-z0-9])([A-Z])/g, "$1_$2")
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter(Boolean);
  const last = words[words.length - 1];
  if (last === undefined) return false;
  if (options.query && last === "code") return true;
  return SECRET_WORDS.has(words.join("")) || SECRET_WORDS.has(last);
}

/**
 * Values that are secrets wherever they appear, whatever they are called: bearer credentials,
 * JWTs (tenant keys, sessions), Backline API keys, webhook signing secrets, storage tokens
 * (`<payload>.<HMAC-SHA-256>` in base64url), and the password of a URL with credentials.
 */
const SECRET_VALUES: [RegExp, string][] = [
  [/\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}/gi, `$1 ${REDACTED}`],
  [/\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*/g, REDACTED],
  [/\bbk_(live|test)_[0-9A-Za-z]{8,}/g, `bk_$1_${REDACTED}`],
  [/\bwhsec_[A-Za-z0-9+/=]{8,}/g, `whsec_${REDACTED}`],
  [/\b[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{43}\b/g, REDACTED],
  [/\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#@"'<>]*@/gi, `$1${REDACTED}@`],
];

/** `name=value` pairs of a query string (or of a URL inside a text), up to the next `&`, `#`, quote or space. */
const PARAM = /([?&;])([^=&#\s"'<>?]+)=([^&#\s"'<>]*)/g;

/** A text (a message, an error's stack, a URL) with every secret in it replaced. */
export function redactText(text: string): string {
  let out = text.replace(PARAM, (whole, sep: string, name: string, value: string) => {
    if (isSecretName(safeDecode(name), { query: true })) return `${sep}${name}=${REDACTED}`;
    // A URL inside a parameter (redirect_to=https://app/cb?code=…) is a URL like any other.
    const decoded = safeDecode(value);
    if (/[?&;]/.test(decoded)) {
      const inner = redactText(decoded);
      if (inner !== decoded) return `${sep}${name}=${decoded === value ? inner : encodeURIComponent(inner)}`;
    }
    return whole;
  });
  for (const [pattern, replacement] of SECRET_VALUES) out = out.replace(pattern, replacement);
  return out;
}

/**
 * A request URL fit for a log: secret query parameters' values and path segments that are
 * tokens (a JWT, an API key, a storage token) replaced; the rest kept, so the log still says
 * which route and which filters.
 */
export function redactUrl(url: string): string {
  const q = url.indexOf("?");
  const path = q === -1 ? url : url.slice(0, q);
  const query = q === -1 ? "" : url.slice(q);
  const segments = path
    .split("/")
    .map((segment) => (isTokenSegment(safeDecode(segment)) ? REDACTED : segment));
  return redactText(`${segments.join("/")}${query}`);
}

function isTokenSegment(segment: string): boolean {
  if (segment.length < 16) return false;
  return (
    /^eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(segment) ||
    /^bk_(live|test)_/.test(segment) ||
    /^whsec_/.test(segment) ||
    /^[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{43}$/.test(segment)
  );
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text.replace(/\+/g, " "));
  } catch {
    return text;
  }
}

/** Headers fit for a log: the values of secret ones (Authorization, apikey, Cookie, X-Api-Key, …) replaced. */
export function redactHeaders(headers: Record<string, unknown>): Record<string, unknown> {
  return scrub(headers, 0) as Record<string, unknown>;
}

const MAX_DEPTH = 8;

/**
 * A copy of `value` with secrets gone, shaped as it would be written (pino writes an object's own
 * enumerable fields, or its toJSON()): strings scrubbed with `redactText`, the values of fields
 * with secret names replaced, errors serialized, URLs redacted, Buffers summarized.
 */
function scrub(value: unknown, depth: number, seen: WeakSet<object> = new WeakSet()): unknown {
  if (typeof value === "string") return redactText(value);
  if (value === null || typeof value !== "object") return value;
  if (depth > MAX_DEPTH) return "[…]";
  if (seen.has(value)) return "[Circular]";
  seen.add(value);
  // pino's serialized error is not a plain object (its prototype is pino's): walk its fields here.
  if (value instanceof Error) return scrubEntries(pino.stdSerializers.err(value), depth + 1, seen);
  if (value instanceof URL) return redactUrl(value.href);
  if (Buffer.isBuffer(value) || ArrayBuffer.isView(value)) return `[${value.byteLength} bytes]`;
  if (Array.isArray(value)) return value.map((v) => scrub(v, depth + 1, seen));
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === "function") return scrub(toJSON.call(value), depth + 1, seen);
  return scrubEntries(value, depth, seen);
}

function scrubEntries(value: object, depth: number, seen: WeakSet<object>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = scrubField(k, v, depth + 1, seen);
  return out;
}

function scrubField(name: string, value: unknown, depth: number, seen?: WeakSet<object>): unknown {
  if (value === null || value === undefined) return value;
  return isSecretName(name) ? REDACTED : scrub(value, depth, seen);
}

interface LoggedRequest {
  method?: string;
  url?: string;
  host?: string;
  hostname?: string;
  ip?: string;
  socket?: { remotePort?: number };
  raw?: { url?: string };
}

/**
 * Serializers for pino: `req` (Fastify's request log: method, the redacted URL, host, client
 * address; never headers or body) and `err` (pino's, then scrubbed: message, stack and every
 * property an error carries, such as a failed HTTP call's URL or headers).
 */
export const redactingSerializers = {
  req(req: LoggedRequest) {
    return {
      method: req.method,
      url: redactUrl(String(req.url ?? req.raw?.url ?? "")),
      host: req.host ?? req.hostname,
      remoteAddress: req.ip,
      remotePort: req.socket?.remotePort,
    };
  },
  err(error: unknown) {
    return scrub(error, 0);
  },
};

/** Every field logged beside the message, scrubbed; `req`, `res` and `err` are left to their serializers. */
function scrubFields(object: object): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(object)) {
    out[k] = k === "req" || k === "res" || k === "err" ? v : scrubField(k, v, 0);
  }
  return out;
}

/**
 * Options for a root pino logger: the serializers, the field scrubber, and a hook that scrubs the
 * message itself (`Route GET:/x?apikey=… not found`, an error's message used as the log line).
 */
export function loggerOptions(options: LoggerOptions = {}): LoggerOptions {
  return {
    ...options,
    serializers: { ...options.serializers, ...redactingSerializers },
    formatters: { ...options.formatters, log: scrubFields },
    hooks: {
      logMethod(args, method) {
        const [first, ...rest] = args as unknown[];
        // pino makes an error's message the line's message when none is given: scrub it here.
        const error =
          first instanceof Error
            ? first
            : first && typeof first === "object" && (first as { err?: unknown }).err instanceof Error
              ? ((first as { err: Error }).err as Error)
              : undefined;
        const scrubbed: unknown[] = [
          first instanceof Error ? { err: first } : typeof first === "string" ? redactText(first) : first,
          ...rest.map((a) => (typeof a === "string" ? redactText(a) : a)),
        ];
        if (error && typeof first !== "string" && typeof rest[0] !== "string") {
          scrubbed.splice(1, 0, redactText(error.message));
        }
        return method.apply(this, scrubbed as Parameters<typeof method>);
      },
    },
  };
}

/**
 * The app's logger: a child of whatever logger it was given, with the serializers and the field
 * scrubber, so a request, an error or a field logged through it carries no secret even when the
 * root logger was not made with `loggerOptions` (a test's, an embedding program's). Its messages
 * are scrubbed by the root's hook when the root was made with `loggerOptions`.
 */
export function redactingLogger(logger: Logger): Logger {
  return logger.child({}, { serializers: redactingSerializers, formatters: { log: scrubFields } });
}
