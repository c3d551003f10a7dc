import { ApiError } from "../api/errors.ts";

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

// A field path at the start of a message, as the API writes it: `src`, `genres.hip-hop`,
// `connect_origins[1]`, `ddex.destination.path`; then ": ", or the space before "is …" (the
// field as the sentence's subject).
const LEADING_PATH =
  /^([a-z_][a-z0-9_]*(?:\.[A-Za-z0-9_-]+|\[\d+\])*)(: | (?=(?:is|are|must|has|cannot|may) ))/;

/**
 * A sentence: a capital first (unless it starts with what was typed, an address or a quoted
 * value) and a full stop last.
 */
function sentence(text: string): string {
  let t = text.trim();
  if (t === "") return t;
  if (/^[a-z]+(\s|$)/.test(t)) t = t.charAt(0).toUpperCase() + t.slice(1);
  return /[.!?]$/.test(t) ? t : `${t}.`;
}

/**
 * The message of the API about `param`, without the path it starts with: `src: only https
 * addresses…` is "Only https addresses….", `src is required` is "This is required.". A message
 * that starts otherwise (an origin the person typed) is kept as it is, ended as a sentence.
 */
export function withoutPath(param: string, message: string): string {
  const m = LEADING_PATH.exec(message);
  const path = m?.[1];
  if (m && path && (path === param || param.endsWith(`.${path}`))) {
    const rest = message.slice(m[0].length);
    return sentence(m[2] === ": " ? rest : `This ${rest}`);
  }
  return sentence(message);
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
