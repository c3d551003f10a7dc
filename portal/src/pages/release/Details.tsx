import { useQueryClient } from "@tanstack/react-query";
import { useCallback, useEffect, useRef, useState } from "react";
import { PlainError } from "../../api/portal.ts";
import { type ApiRelease, patchRelease, type Rules } from "../../api/public.ts";
import { Field, SelectField } from "../../ui.tsx";
import { fieldId } from "./fields.ts";

/** The release's own fields the form edits, all as the text of their control. */
const FIELDS = [
  "title",
  "version",
  "release_type",
  "release_date",
  "primary_genre",
  "licensed_territories_include",
  "label_name",
  "upc",
  "copyright",
  "phonographic_copyright",
] as const;
type Name = (typeof FIELDS)[number];
type Draft = Record<Name, string>;

/** Fields that may be emptied (sent as null); the others are only sent when filled in. */
const NULLABLE = new Set<Name>(["version", "label_name", "upc", "copyright", "phonographic_copyright"]);

/** How long after the last keystroke a change is saved (leaving the field saves at once). */
const SAVE_AFTER_MS = 1200;

const draftOf = (r: ApiRelease): Draft =>
  Object.fromEntries(FIELDS.map((f) => [f, String(r[f] ?? "")])) as Draft;

function addDays(days: number): string {
  const d = new Date();
  d.setDate(d.getDate() + days);
  return d.toISOString().slice(0, 10);
}

type SaveState = { kind: "idle" | "saving" | "saved" } | { kind: "failed"; message: string };

/**
 * The release's details, saved as they are typed (a moment after the last keystroke, or on
 * leaving the field): only what changed is sent, and a field the server refuses says why beside
 * it while the others are kept.
 */
export function Details({
  accountId,
  release,
  rules,
}: {
  accountId: string;
  release: ApiRelease;
  rules: Rules;
}) {
  const client = useQueryClient();
  const [draft, setDraft] = useState<Draft>(() => draftOf(release));
  const saved = useRef<Draft>(draftOf(release));
  const [errors, setErrors] = useState<Partial<Record<Name, string>>>({});
  const [state, setState] = useState<SaveState>({ kind: "idle" });
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  const inFlight = useRef<Promise<void> | null>(null);
  const latest = useRef(draft);
  latest.current = draft;
  const [someCountries, setSomeCountries] = useState(
    () => !!release.licensed_territories_include && release.licensed_territories_include !== "WW",
  );

  const save = useCallback(async (): Promise<void> => {
    if (inFlight.current) await inFlight.current;
    const now = latest.current;
    const changes: Record<string, unknown> = {};
    const local: Partial<Record<Name, string>> = {};
    for (const f of FIELDS) {
      if (now[f] === saved.current[f]) continue;
      const text = now[f].trim();
      if (text === "") {
        if (NULLABLE.has(f)) changes[f] = null;
        else if (f === "title") local.title = "Give the release a title.";
        continue;
      }
      changes[f] = f === "licensed_territories_include" ? text.toUpperCase().replace(/\s+/g, "") : text;
    }
    setErrors((e) => {
      const next = { ...e, ...local };
      for (const f of Object.keys(changes) as Name[]) delete next[f];
      return next;
    });
    if (Object.keys(changes).length === 0) {
      if (Object.keys(local).length > 0)
        setState({ kind: "failed", message: "Not saved: see the message beside the field." });
      return;
    }
    setState({ kind: "saving" });
    const run = (async () => {
      try {
        await patchRelease(accountId, release.id, changes);
        for (const f of Object.keys(changes) as Name[]) saved.current[f] = now[f];
        setState({ kind: "saved" });
      } catch (e) {
        const fields = e instanceof PlainError ? e.fields : {};
        const known = FIELDS.filter((f) => fields[f]);
        // What the server accepted is not known field by field: the next save sends all again.
        if (known.length > 0)
          setErrors((prev) => ({ ...prev, ...Object.fromEntries(known.map((f) => [f, fields[f]])) }));
        setState({
          kind: "failed",
          message:
            known.length > 0
              ? "Not saved: see the messages beside the fields."
              : `Not saved: ${e instanceof PlainError ? e.message : "try again."}`,
        });
      } finally {
        inFlight.current = null;
        void client.invalidateQueries({ queryKey: ["problems", release.id] });
      }
    })();
    inFlight.current = run;
    await run;
  }, [accountId, release.id, client]);

  useEffect(() => () => clearTimeout(timer.current), []);
  const change = (f: Name, value: string) => {
    setDraft((d) => ({ ...d, [f]: value }));
    clearTimeout(timer.current);
    timer.current = setTimeout(() => void save(), SAVE_AFTER_MS);
  };
  const leave = () => {
    clearTimeout(timer.current);
    void save();
  };
  const text = (f: Name, label: string, hint?: string, extra: Record<string, unknown> = {}) => (
    <Field
      id={fieldId(f)}
      label={label}
      hint={hint}
      value={draft[f]}
      onChange={(e) => change(f, e.target.value)}
      onBlur={leave}
      error={errors[f]}
      testid={`edit-${f}`}
      {...extra}
    />
  );
  const choice = (f: Name, label: string, options: readonly (readonly [string, string])[], hint?: string) => (
    <SelectField
      id={fieldId(f)}
      label={label}
      hint={hint}
      value={draft[f]}
      options={options}
      onChange={(e) => {
        setDraft((d) => ({ ...d, [f]: e.target.value }));
        latest.current = { ...latest.current, [f]: e.target.value };
        void save();
      }}
      error={errors[f]}
      testid={`edit-${f}`}
    />
  );
  const earliest = addDays(rules.release_lead_days);

  return (
    <section className="card" aria-labelledby="details-heading" data-testid="release-details">
      <div className="section-head">
        <h2 id="details-heading">Details</h2>
        <p className={`save-state ${state.kind}`} role="status" aria-live="polite" data-testid="save-state">
          {state.kind === "saving"
            ? "Saving…"
            : state.kind === "saved"
              ? "All changes saved"
              : state.kind === "failed"
                ? state.message
                : "Changes are saved as you type"}
        </p>
      </div>
      <div className="form-grid">
        {text("title", "Title")}
        {text("version", "Version", "Optional, such as Deluxe Edition or Remastered 2024.")}
        {choice(
          "release_type",
          "Type",
          rules.release_types.map(
            (t) => [t, t === "ep" ? "EP" : t.charAt(0).toUpperCase() + t.slice(1)] as const,
          ),
          `A single has at most ${rules.max_tracks_on_single} tracks.`,
        )}
        {text("release_date", "Release date", `The earliest the stores accept is ${earliest}.`, {
          type: "date",
          min: earliest,
        })}
        {choice("primary_genre", "Genre", [
          ["", "Choose a genre"],
          ...rules.genres.map((g) => [g.code, g.name] as const),
        ])}
        <SelectField
          id={someCountries ? "territory-choice" : fieldId("licensed_territories_include")}
          label="Where it is sold"
          value={someCountries ? "some" : draft.licensed_territories_include === "WW" ? "WW" : ""}
          options={[
            ["", "Choose where"],
            ["WW", "The whole world"],
            ["some", "Only some countries"],
          ]}
          onChange={(e) => {
            const v = e.target.value;
            setSomeCountries(v === "some");
            if (v === "WW") {
              setDraft((d) => ({ ...d, licensed_territories_include: "WW" }));
              latest.current = { ...latest.current, licensed_territories_include: "WW" };
              void save();
            }
          }}
          error={someCountries ? undefined : errors.licensed_territories_include}
          testid="edit-territory-choice"
        />
        {someCountries
          ? text(
              "licensed_territories_include",
              "Countries",
              "Two-letter country codes separated by commas, such as US,CA,GB.",
            )
          : null}
        {text("label_name", "Label", "The label name the stores show; optional.")}
        {text(
          "upc",
          "UPC",
          "The barcode number, 12 or 13 digits. Leave it empty to get one from the platform.",
          {
            inputMode: "numeric",
          },
        )}
        {text("copyright", "© line", "Optional, such as 2026 Moonlight Records.")}
        {text("phonographic_copyright", "℗ line", "Optional, such as 2026 Moonlight Records.")}
      </div>
    </section>
  );
}
