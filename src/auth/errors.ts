/**
 * Auth errors with GoTrue's codes and statuses (docs/auth.md lists them). A client mistake is
 * never a 5xx: auth-js retries 502, 503 and 504, and shows the rest to the user.
 */
export class AuthError extends Error {
  readonly status: number;
  readonly code: string;
  readonly extra: Record<string, unknown> | undefined;
  readonly retryAfter: number | undefined;

  constructor(
    status: number,
    code: string,
    message: string,
    options: { extra?: Record<string, unknown>; retryAfter?: number } = {},
  ) {
    super(message);
    this.name = "AuthError";
    this.status = status;
    this.code = code;
    this.extra = options.extra;
    this.retryAfter = options.retryAfter;
  }
}

export const invalidCredentials = () =>
  new AuthError(400, "invalid_credentials", "Invalid login credentials");
export const validationFailed = (message: string) => new AuthError(400, "validation_failed", message);
export const sessionNotFound = () =>
  new AuthError(403, "session_not_found", "Session from session_id claim in JWT does not exist");
export const otpExpired = () => new AuthError(403, "otp_expired", "Token has expired or is invalid");
/** The answer once an address's wrong codes reached max_code_attempts: its codes are void. */
export const codesVoid = () =>
  new AuthError(
    403,
    "otp_expired",
    "Too many wrong codes were entered for this address: its codes no longer work. Request a new code.",
  );

/**
 * A refusal whose transaction must still commit: a wrong code is counted in the same transaction
 * that looked at it, so the flow returns this instead of throwing, and the caller throws `error`
 * once the transaction has committed (`refusedAfterCommit`).
 */
export class Refusal {
  readonly error: AuthError;
  constructor(error: AuthError) {
    this.error = error;
  }
}

/** The outcome of a transaction that may have returned a Refusal: thrown now that it committed. */
export function refusedAfterCommit<T>(outcome: T | Refusal): T {
  if (outcome instanceof Refusal) throw outcome.error;
  return outcome;
}

/** The API version whose error shape a client asked for (X-Supabase-Api-Version). */
export const API_VERSION_2024 = "2024-01-01";

/**
 * GoTrue's two error shapes: since API version 2024-01-01 `{code, message}`; before it
 * `{code: <status>, error_code, msg}`. Both carry any extra members (weak_password).
 */
export function authErrorBody(error: AuthError, apiVersion: string | undefined): Record<string, unknown> {
  if (apiVersion && apiVersion >= API_VERSION_2024) {
    return { code: error.code, message: error.message, ...error.extra };
  }
  return { code: error.status, error_code: error.code, msg: error.message, ...error.extra };
}
