/** An HTTP error from one of Backline's interfaces, with its machine code when it sent one. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly param: string | undefined;
  readonly errors: { param?: string; code?: string; message?: string }[];

  constructor(
    status: number,
    code: string,
    message: string,
    param?: string,
    errors: { param?: string; code?: string; message?: string }[] = [],
  ) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.param = param;
    this.errors = errors;
  }
}

/** Reads an error body of any of Backline's shapes (problem details, GoTrue's, PostgREST's). */
export async function errorFrom(response: Response): Promise<ApiError> {
  let body: Record<string, unknown> = {};
  try {
    body = (await response.json()) as Record<string, unknown>;
  } catch {
    // Not JSON (a proxy's page): the status says enough.
  }
  // GoTrue's `code` is the status number and its machine code is `error_code`.
  const code = String(
    (typeof body.code === "string" ? body.code : undefined) ??
      body.error_code ??
      body.error ??
      `http_${response.status}`,
  );
  const message = String(
    body.detail ?? body.msg ?? body.message ?? body.error_description ?? body.title ?? response.statusText,
  );
  const errors = Array.isArray(body.errors) ? (body.errors as ApiError["errors"]) : [];
  return new ApiError(
    response.status,
    code,
    message || `HTTP ${response.status}`,
    typeof body.param === "string" ? body.param : undefined,
    errors,
  );
}

/** A status's meaning in plain words, as the title of an error a person reads. */
const TITLES: Record<number, string> = {
  400: "Check what you entered",
  403: "Not allowed",
  404: "Not found",
  409: "This changed or already exists",
  413: "Too large",
  415: "This kind of file or data is not accepted",
  422: "Check what you entered",
  429: "Too many requests: wait a moment",
};

/**
 * An error as a person reads it: a plain title and what to do. No status numbers or machine codes
 * (they stay in the ApiError for the page's tests and for support).
 */
export function describeError(error: unknown): { title: string; detail: string } {
  if (error instanceof ApiError) {
    if (error.status === 404 && error.code === "not_found")
      return {
        title: "Not available",
        detail: `${error.message} (this server may not have this part of the admin API yet).`,
      };
    if (error.status === 401)
      return { title: "Signed out", detail: "Your session has ended: sign in again." };
    if (error.code === "invalid_credentials" || /invalid login credentials/i.test(error.message))
      return {
        title: "Wrong e-mail or password",
        detail: "Check the e-mail address and the password, or sign in with a code instead.",
      };
    if (error.code === "not_staff")
      return {
        title: "Not staff here",
        detail: "You are not staff of this tenant: ask one of its admins to add you.",
      };
    if (error.code === "insufficient_role") return { title: "Your role is too low", detail: error.message };
    if (error.code === "aal2_required")
      return {
        title: "A second factor is needed",
        detail:
          "This needs a sign-in confirmed with a code from an authenticator app. Add one under “Two-step sign-in” (top of the page), then try again.",
      };
    const fields = error.errors
      .filter((e) => e.message && !error.message.includes(e.message))
      .map((e) => (e.param ? `${e.param}: ${e.message}` : e.message))
      .join("; ");
    let detail = fields ? `${error.message} ${fields}` : error.message;
    if (error.status === 415 && /^unsupported media type/i.test(detail))
      detail = "The server does not take this type here: choose a file of one of the types the form names.";
    const title =
      TITLES[error.status] ?? (error.status >= 500 ? "The server could not do this" : "That did not work");
    return { title, detail };
  }
  if (error instanceof TypeError)
    return { title: "Network error", detail: "The server could not be reached." };
  return { title: "Something went wrong", detail: error instanceof Error ? error.message : String(error) };
}
