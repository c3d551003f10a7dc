import { withoutPath } from "../../../ui-shared/field-errors.ts";
import { ApiError } from "../api/errors.ts";

export { withoutPath };

/**
 * A refused field as a form shows it: the API's field (`src`, `roles.arranger`,
 * `connect_origins[1]`) to find the input at fault, its code, and the message in plain words —
 * without the field path the API writes before its sentences (`src: only https…`,
 * `roles.arranger is blank…`), which names a JSON field, not anything on the page.
 */
export interface FieldProblem {
  param: string;
  code: string;
  message: string;
}

/**
 * The fields an API error refuses, each in plain words: a 422's `errors`, or the one `param` of
 * an error that names a field (a 409 about a taken name). None for other errors (a network
 * failure, a refusal of the whole request): those are the page's to say.
 */
export function fieldProblems(error: unknown): FieldProblem[] {
  if (!(error instanceof ApiError)) return [];
  const listed = error.errors.flatMap((e) =>
    e.param ? [{ param: e.param, code: e.code ?? "", message: withoutPath(e.param, e.message ?? "") }] : [],
  );
  if (listed.length > 0) return listed;
  if (error.errors.length === 0 && error.param)
    return [{ param: error.param, code: error.code, message: withoutPath(error.param, error.message) }];
  return [];
}
