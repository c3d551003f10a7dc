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
