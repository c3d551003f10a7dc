/**
 * Industry identifiers, checked the same way as the database checks them (migration 0003), so a
 * client hears about a bad value with its field name before any write.
 */

/** ISRC: CC-XXX-YY-NNNNN; hyphens, spaces and case are forgiven. Undefined when malformed. */
export function normaliseIsrc(value: string): string | undefined {
  const v = value.replace(/[\s-]/g, "").toUpperCase();
  return /^[A-Z]{2}[A-Z0-9]{3}[0-9]{7}$/.test(v) ? v : undefined;
}

/** UPC-A (12 digits), EAN-13 or GTIN-14 with a correct check digit. */
export function gtinIsValid(code: string): boolean {
  if (!/^[0-9]{12,14}$/.test(code)) return false;
  const digits = [...code].reverse().map(Number);
  let sum = 0;
  for (let i = 1; i < digits.length; i++) sum += (digits[i] ?? 0) * (i % 2 === 1 ? 3 : 1);
  return (10 - (sum % 10)) % 10 === digits[0];
}
