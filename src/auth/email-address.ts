import { validationFailed } from "./errors.ts";

/**
 * An e-mail address as GoTrue accepts one, on every /auth/v1 route that takes one: present, at most
 * 255 characters, and of the form local@domain, where the local part uses the characters RFC 5322
 * allows unquoted and the domain is dot-separated labels of letters, digits and inner hyphens.
 * Anything else is 400 validation_failed "Unable to validate email address: invalid format",
 * GoTrue's words, before anything is read or written. Stored lower-cased.
 */
const LOCAL = "[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+";
const LABEL = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
const FORMAT = new RegExp(`^${LOCAL}@${LABEL}(?:\\.${LABEL})*$`);

export const MAX_EMAIL_LENGTH = 255;

export function isEmailAddress(value: string): boolean {
  return value.length <= MAX_EMAIL_LENGTH && FORMAT.test(value);
}

/** GoTrue's validateEmail: the address lower-cased, or its error. */
export function validateEmail(email: unknown): string {
  if (email === undefined || email === null || email === "")
    throw validationFailed("An email address is required");
  if (typeof email !== "string") throw validationFailed("Unable to validate email address: invalid format");
  const e = email.trim();
  if (e === "") throw validationFailed("An email address is required");
  if (e.length > MAX_EMAIL_LENGTH) throw validationFailed("An email address is too long");
  if (!FORMAT.test(e)) throw validationFailed("Unable to validate email address: invalid format");
  return e.toLowerCase();
}
