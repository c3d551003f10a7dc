/**
 * /storage/v1's errors in Supabase Storage's words (docs/uploads.md, "Errors"): the body is
 * `{ statusCode, code, error, message }` as Storage renders it — `statusCode` the status as a string,
 * `code` Storage's error code (`NoSuchBucket`, `NoSuchKey`, …), `error` its short name, `message`
 * what storage-js shows. Storage itself sends most of these with HTTP 400 and the real status only
 * in the body; Backline sends the status the body names, as it always has on this interface.
 */
export class StorageError extends Error {
  readonly status: number;
  readonly code: string;
  readonly error: string;

  constructor(status: number, code: string, message: string, error: string = code) {
    super(message);
    this.name = "StorageError";
    this.status = status;
    this.code = code;
    this.error = error;
  }
}

export const STORAGE_ERRORS = {
  noSuchBucket: () => new StorageError(404, "NoSuchBucket", "Bucket not found", "Bucket not found"),
  noSuchKey: () => new StorageError(404, "NoSuchKey", "Object not found", "not_found"),
  bucketExists: () =>
    new StorageError(409, "BucketAlreadyExists", "The resource already exists", "Duplicate"),
  keyExists: () => new StorageError(409, "KeyAlreadyExists", "The resource already exists", "Duplicate"),
  /** Storage's code for a move onto an existing object (a copy's is KeyAlreadyExists). */
  resourceExists: () =>
    new StorageError(409, "ResourceAlreadyExists", "The resource already exists", "Duplicate"),
  bucketNotEmpty: () =>
    new StorageError(409, "ResourceNotEmpty", "The bucket you tried to delete is not empty"),
  invalidBucketName: () => new StorageError(400, "InvalidBucketName", "Bucket name invalid", "Invalid Input"),
  invalidKey: (key: string) => new StorageError(400, "InvalidKey", `Invalid key: ${key}`),
  invalidMimeType: (type: string) =>
    new StorageError(415, "InvalidMimeType", `mime type ${type} is not supported`, "invalid_mime_type"),
  tooLarge: (limit = "the maximum allowed size") =>
    new StorageError(413, "EntityTooLarge", `The object exceeded ${limit}`, "Payload too large"),
  invalidRequest: (message: string) => new StorageError(400, "InvalidRequest", message),
  missingParameter: (name: string) =>
    new StorageError(400, "MissingParameter", `Missing Required Parameter ${name}`),
  invalidParameter: (name: string, message?: string) =>
    new StorageError(400, "InvalidParameter", message ?? `Invalid Parameter ${name}`),
  accessDenied: (message = "Access denied") => new StorageError(403, "AccessDenied", message),
  notSupported: (feature: string) =>
    new StorageError(400, "NotSupported", `The feature ${feature} is not supported by this server`),
  /**
   * Storage's words for an unknown route, with the path as Storage sees it on Supabase (behind
   * the gateway, without the /storage/v1 prefix).
   */
  routeNotFound: (method: string, url: string) =>
    new StorageError(
      404,
      "InvalidRequest",
      `Route ${method}:${url.replace(/^\/storage\/v1(?=\/|$)/, "") || "/"} not found`,
      "Not Found",
    ),
} as const;

/** Storage's name rule for buckets (and the database's check, migration 0046). */
export function validBucketName(name: unknown): name is string {
  return (
    typeof name === "string" &&
    /^[A-Za-z0-9_!.*'()&$@=;:+,? -]{1,100}$/.test(name) &&
    name !== "." &&
    name !== ".."
  );
}

/**
 * Storage's rule for object names (S3's safe characters), without empty, `.` or `..` segments and
 * at most 1,024 characters. Bytes are stored under an id, never under the name.
 */
export function validKey(key: unknown): key is string {
  if (typeof key !== "string" || key.length === 0 || key.length > 1024) return false;
  if (!/^[\w/!\-.*'() &$@=;:+,?]+$/u.test(key)) return false;
  return key.split("/").every((segment) => segment !== "" && segment !== "." && segment !== "..");
}
