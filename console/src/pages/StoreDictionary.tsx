import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useEffect, useId, useState } from "react";
import { DICTIONARIES, dictionaryApi, type StoreDictionaryPatch } from "../api/dictionaries.ts";
import { ApiError } from "../api/errors.ts";
import { ErrorState, Loading, TableWrap } from "../ui/common.tsx";
import { type FieldProblem, fieldProblems } from "../ui/field-errors.ts";

const listName = (id: string) => DICTIONARIES.find((x) => x.id === id)?.name ?? id;

/**
 * What a refused mapping is told, beside it: the API's sentence without its field path
 * (`roles.arranger is blank: …, or null to remove the override` names JSON, not this form), and a
 * dictionary named as the list is on the page.
 */
function mappingWords(p: FieldProblem): string {
  if (p.code === "blank")
    return "Only spaces: type the store's name, or leave the field empty for the name shown greyed.";
  return p.message.replace(
    /\bthe (apple-music|amazon-music|beatport) dictionary\b/g,
    (_, id: string) => `the ${listName(id)} list`,
  );
}

const and = new Intl.ListFormat("en-GB", { type: "conjunction" });

/**
 * A store's dictionary on its page (docs/ddex.md, "Store dictionaries"), for platform admins: the
 * built-in dictionary it uses and where that list comes from, every Backline genre with the store
 * genre it goes as, every contributor role with the store's name for it, and their change
 * (PATCH /admin/v1/stores/{code}/dictionary). An override is set by choosing another of the
 * dictionary's genres, removed by choosing the dictionary's own again.
 */
export function StoreDictionarySection({ code, canEdit }: { code: string; canEdit: boolean }) {
  const ids = useId();
  if (!canEdit) {
    return (
      <section className="card" aria-labelledby={`${ids}-h`} data-testid="store-dictionary">
        <h2 id={`${ids}-h`}>Dictionary</h2>
        <p className="muted">Only platform admins see and change a store's dictionary.</p>
      </section>
    );
  }
  return <Editor code={code} headingId={`${ids}-h`} />;
}

function Editor({ code, headingId }: { code: string; headingId: string }) {
  const client = useQueryClient();
  const ids = useId();
  const view = useQuery({
    queryKey: ["store-dictionary", code],
    queryFn: () => dictionaryApi.storeDictionary(code),
  });
  const [choice, setChoice] = useState("");
  // Genre code / role → what the form says now (a store genre, or "" for the dictionary's own).
  const [genres, setGenres] = useState<Record<string, string>>({});
  const [roles, setRoles] = useState<Record<string, string>>({});
  useEffect(() => {
    if (!view.data) return;
    setChoice(view.data.dictionary?.id ?? "");
    setGenres(
      Object.fromEntries(
        view.data.genres.map((g) => [g.genre, g.from === "override" ? (g.store_genre ?? "") : ""]),
      ),
    );
    setRoles(
      Object.fromEntries(
        view.data.roles.map((r) => [r.role, r.from === "override" ? (r.store_role ?? "") : ""]),
      ),
    );
  }, [view.data]);
  const save = useMutation({
    mutationFn: (body: StoreDictionaryPatch) => dictionaryApi.patchStoreDictionary(code, body),
    onSuccess: (d) => client.setQueryData(["store-dictionary", code], d),
  });

  const d = view.data;
  if (view.isPending)
    return (
      <section className="card span-all" aria-labelledby={headingId} data-testid="store-dictionary">
        <h2 id={headingId}>Dictionary</h2>
        <Loading />
      </section>
    );
  if (view.isError || !d)
    return (
      <section className="card span-all" aria-labelledby={headingId} data-testid="store-dictionary">
        <h2 id={headingId}>Dictionary</h2>
        <ErrorState error={view.error} onRetry={() => view.refetch()} />
      </section>
    );

  /** Only what changed: an override set, replaced or removed. */
  function changes<T extends { from: string | null }>(
    rows: T[],
    key: (r: T) => string,
    value: (r: T) => string | null,
    form: Record<string, string>,
  ): Record<string, string | null> {
    const out: Record<string, string | null> = {};
    for (const r of rows) {
      const now = form[key(r)] ?? "";
      const was = r.from === "override" ? (value(r) ?? "") : "";
      if (now !== was) out[key(r)] = now === "" ? null : now;
    }
    return out;
  }
  function submit(event: FormEvent) {
    event.preventDefault();
    if (!d) return;
    const body: StoreDictionaryPatch = {};
    if (choice !== (d.dictionary?.id ?? "")) body.dictionary = choice === "" ? null : choice;
    const g = changes(
      d.genres,
      (r) => r.genre,
      (r) => r.store_genre,
      genres,
    );
    const r = changes(
      d.roles,
      (x) => x.role,
      (x) => x.store_role,
      roles,
    );
    if (Object.keys(g).length > 0) body.genres = g;
    if (Object.keys(r).length > 0) body.roles = r;
    save.mutate(body);
  }
  // A refused field (400 or 422) is said beside it: the list chosen, a genre's row or a role's
  // row. Other refusals (409 not_ddex, a missing store, a role too low) are the ErrorState's.
  const problems =
    save.error instanceof ApiError && (save.error.status === 400 || save.error.status === 422)
      ? fieldProblems(save.error)
      : [];
  const problemOf = (param: string) => problems.find((p) => p.param === param);
  const invalid = (param: string) => (problemOf(param) ? true : undefined);
  const errorId = (param: string) => `${ids}-error-${param}`;
  const describedBy = (param: string) => (problemOf(param) ? errorId(param) : undefined);
  const problemText = (param: string) => {
    const p = problemOf(param);
    return p ? (
      <p id={errorId(param)} className="error-text" data-testid="dictionary-field-error">
        {mappingWords(p)}
      </p>
    ) : null;
  };
  // Below Save: what was refused, by the names on the page (never a field path).
  const marked = problems.flatMap((p) => {
    if (p.param === "dictionary") return ["the list chosen"];
    const genre = d.genres.find((g) => p.param === `genres.${g.genre}`);
    if (genre) return [`the genre ${genre.name}`];
    const role = d.roles.find((r) => p.param === `roles.${r.role}`);
    return role ? [`the role ${role.role}`] : [];
  });
  const elsewhere = problems
    .filter(
      (p) =>
        p.param !== "dictionary" &&
        !d.genres.some((g) => p.param === `genres.${g.genre}`) &&
        !d.roles.some((r) => p.param === `roles.${r.role}`),
    )
    .map((p) =>
      p.param.startsWith("settings.")
        ? `The store's settings need a change first: ${p.message}`
        : mappingWords(p),
    );
  const summary =
    problems.length === 0
      ? undefined
      : [
          "Nothing was saved:",
          marked.length > 0 ? `check ${and.format([...new Set(marked)])}, marked above.` : "",
          ...elsewhere,
        ]
          .filter(Boolean)
          .join(" ");
  const choosing = choice !== (d.dictionary?.id ?? "");
  const storeGenres = d.dictionary?.genres ?? [];

  return (
    <section className="card span-all" aria-labelledby={headingId} data-testid="store-dictionary">
      <h2 id={headingId}>Dictionary</h2>
      {d.adapter !== "ddex" ? (
        <p className="help" data-testid="dictionary-not-ddex">
          This store does not deliver through DDEX: a dictionary applies once its adapter is ddex.
        </p>
      ) : (
        <form onSubmit={submit} data-testid="dictionary-form">
          <label htmlFor={`${ids}-choice`}>The store's genre list and role names</label>
          <select
            id={`${ids}-choice`}
            value={choice}
            onChange={(e) => setChoice(e.target.value)}
            aria-invalid={invalid("dictionary")}
            aria-describedby={describedBy("dictionary")}
            data-testid="dictionary-choice"
          >
            <option value="">None: Backline's genre names</option>
            {DICTIONARIES.map((x) => (
              <option key={x.id} value={x.id}>
                {x.name}
              </option>
            ))}
          </select>
          {problemText("dictionary")}
          {d.dictionary ? (
            <p className="help" data-testid="dictionary-source">
              From {d.dictionary.source.document}, {d.dictionary.source.version}.{" "}
              {d.dictionary.source.transcribed}
            </p>
          ) : null}
          <p className={d.checks_genres ? "warn" : "help"} data-testid="dictionary-checks">
            {d.checks_genres
              ? "A release whose genre has no store genre here cannot be submitted to this store."
              : "Releases' genres go as Backline's names; submission does not check them for this store."}
          </p>
          {choosing ? (
            <p className="help" role="status">
              Save to use the new list; its mappings show once saved.
            </p>
          ) : null}

          <h3>Genres</h3>
          <TableWrap label="Genre mappings">
            <table data-testid="dictionary-genres">
              <thead>
                <tr>
                  <th scope="col">Backline genre</th>
                  <th scope="col">Goes to the store as</th>
                </tr>
              </thead>
              <tbody>
                {d.genres.map((g) => {
                  // What choosing no override means for this genre.
                  const dictionaryOwn =
                    g.from === "override"
                      ? "Remove the override (the dictionary's mapping)"
                      : g.store_genre
                        ? `${g.store_genre} (the dictionary's)`
                        : "No mapping: refused at submit";
                  return (
                    <tr
                      key={g.genre}
                      data-testid="dictionary-genre"
                      data-genre={g.genre}
                      data-from={g.from ?? ""}
                    >
                      <th scope="row">
                        {g.name} <code className="muted">{g.genre}</code>
                        {g.from === "override" ? <span className="muted"> · override</span> : null}
                      </th>
                      <td>
                        {d.dictionary ? (
                          <select
                            aria-label={`Store genre for ${g.name}`}
                            value={genres[g.genre] ?? ""}
                            onChange={(e) => setGenres({ ...genres, [g.genre]: e.target.value })}
                            aria-invalid={invalid(`genres.${g.genre}`)}
                            aria-describedby={describedBy(`genres.${g.genre}`)}
                            className="mapping-choice"
                            data-testid="dictionary-genre-select"
                          >
                            <option value="">{dictionaryOwn}</option>
                            {storeGenres.map((s) => (
                              <option key={s.name} value={s.name}>
                                {s.parent ? `${s.parent} › ${s.name}` : s.name}
                              </option>
                            ))}
                          </select>
                        ) : (
                          <input
                            aria-label={`Store genre for ${g.name}`}
                            value={genres[g.genre] ?? ""}
                            placeholder={g.name}
                            onChange={(e) => setGenres({ ...genres, [g.genre]: e.target.value })}
                            aria-invalid={invalid(`genres.${g.genre}`)}
                            aria-describedby={describedBy(`genres.${g.genre}`)}
                            className="mapping-choice"
                            maxLength={100}
                            data-testid="dictionary-genre-input"
                          />
                        )}
                        {problemText(`genres.${g.genre}`)}
                      </td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          </TableWrap>

          <h3>Contributor roles</h3>
          <TableWrap label="Role mappings">
            <table data-testid="dictionary-roles">
              <thead>
                <tr>
                  <th scope="col">Backline role</th>
                  <th scope="col">DDEX role</th>
                  <th scope="col">The store's name</th>
                </tr>
              </thead>
              <tbody>
                {d.roles.map((r) => (
                  <tr key={r.role} data-testid="dictionary-role" data-role={r.role}>
                    <th scope="row">
                      <code>{r.role}</code>
                    </th>
                    <td>{r.ddex_role}</td>
                    <td>
                      <input
                        aria-label={`The store's name for ${r.role}`}
                        value={roles[r.role] ?? ""}
                        placeholder={r.from === "dictionary" ? (r.store_role ?? "") : r.ddex_role}
                        onChange={(e) => setRoles({ ...roles, [r.role]: e.target.value })}
                        aria-invalid={invalid(`roles.${r.role}`)}
                        aria-describedby={describedBy(`roles.${r.role}`)}
                        className="mapping-choice"
                        maxLength={100}
                        data-testid="dictionary-role-input"
                      />
                      {problemText(`roles.${r.role}`)}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableWrap>
          <p className="help">
            An empty field keeps the dictionary's name (shown greyed), or DDEX's where the dictionary has
            none.
          </p>
          <button type="submit" className="primary" disabled={save.isPending} data-testid="dictionary-save">
            Save dictionary
          </button>
          {save.isSuccess ? (
            <p role="status" data-testid="dictionary-saved">
              Saved.
            </p>
          ) : null}
          {summary ? (
            <p className="error-text" role="alert" data-testid="dictionary-error">
              {summary}
            </p>
          ) : save.isError ? (
            <ErrorState error={save.error} />
          ) : null}
        </form>
      )}
    </section>
  );
}
