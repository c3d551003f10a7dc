/**
 * A refused field's message in plain words, for both apps (the console's forms and the portal's):
 * the API writes its field path before its sentences (`src: only https…`, `roles.arranger is
 * blank…`, `tracks[0].title: …`), which names a JSON field, not anything on the page. The form
 * shows the message beside the field at fault, so the path is left out.
 */

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
