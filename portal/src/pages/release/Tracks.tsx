import { useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useState } from "react";
import { Empty } from "../../../../ui-shared/common.tsx";
import { PlainError } from "../../api/portal.ts";
import { type ApiRelease, type ApiTrack, addTrack, patchTrack, type Split } from "../../api/public.ts";
import { errorFor, Field, FormError } from "../../ui.tsx";
import { fieldId } from "./fields.ts";
import { UploadControl } from "./Upload.tsx";

const AUDIO = "audio/wav,audio/x-wav,audio/wave,audio/flac,audio/x-flac,.wav,.flac";

/** A share as hundredths of a percent ("33.33" → 3333), or null when it is no such number. */
function hundredths(text: string): number | null {
  const m = /^\s*(\d{1,3})(?:[.,](\d{1,2}))?\s*$/.exec(text);
  if (!m) return null;
  return Number(m[1]) * 100 + Number((m[2] ?? "").padEnd(2, "0"));
}

const percent = (h: number) =>
  `${Math.floor(h / 100)}${h % 100 ? `.${String(h % 100).padStart(2, "0")}` : ""}%`;

interface SplitRow {
  name: string;
  share: string;
  email: string;
}

/** Who is paid how much of a track: rows of name, share and e-mail, their total said while typing. */
function SplitsEditor({
  rows,
  onChange,
  id,
  error,
  testid,
}: {
  rows: SplitRow[];
  onChange: (rows: SplitRow[]) => void;
  id: string;
  error: string | undefined;
  testid: string;
}) {
  const shares = rows.map((r) => hundredths(r.share));
  const total = shares.reduce<number>((sum, h) => sum + (h ?? 0), 0);
  const bad = shares.some((h, i) => h === null && rows[i]?.share.trim() !== "");
  const set = (i: number, change: Partial<SplitRow>) =>
    onChange(rows.map((r, j) => (j === i ? { ...r, ...change } : r)));
  return (
    <fieldset className="splits" id={id} tabIndex={-1} data-testid={testid}>
      <legend>Splits</legend>
      <p className="hint">
        Who is paid what share of this track's earnings. Leave it empty when it all goes to the account.
      </p>
      {rows.map((r, i) => (
        // biome-ignore lint/suspicious/noArrayIndexKey: rows have no identity of their own until saved
        <div className="split-row" key={i} data-testid={`${testid}-row`}>
          <Field
            label={`Name ${i + 1}`}
            value={r.name}
            onChange={(e) => set(i, { name: e.target.value })}
            testid={`${testid}-name-${i}`}
          />
          <Field
            label={`Share ${i + 1} (%)`}
            inputMode="decimal"
            value={r.share}
            onChange={(e) => set(i, { share: e.target.value })}
            testid={`${testid}-share-${i}`}
            error={
              shares[i] === null && r.share.trim() !== "" ? "A percentage such as 50 or 33.33." : undefined
            }
          />
          <Field
            label={`E-mail ${i + 1}`}
            type="email"
            hint="Optional: where their statements go."
            value={r.email}
            onChange={(e) => set(i, { email: e.target.value })}
            testid={`${testid}-email-${i}`}
          />
          <button
            type="button"
            className="secondary"
            onClick={() => onChange(rows.filter((_, j) => j !== i))}
          >
            Remove {r.name.trim() || `share ${i + 1}`}
          </button>
        </div>
      ))}
      <div className="buttons">
        <button
          type="button"
          className="secondary"
          onClick={() => onChange([...rows, { name: "", share: rows.length === 0 ? "100" : "", email: "" }])}
          data-testid={`${testid}-add`}
        >
          Add a share
        </button>
        {rows.length > 0 ? (
          <p
            className={total === 10000 && !bad ? "split-total good" : "split-total bad"}
            aria-live="polite"
            data-testid={`${testid}-total`}
          >
            {total === 10000 && !bad
              ? "Total: 100%."
              : `Total: ${percent(total)}. The shares must add up to exactly 100%${total > 10000 ? `: ${percent(total - 10000)} too much` : `: ${percent(10000 - total)} missing`}.`}
          </p>
        ) : null}
      </div>
      {error ? (
        <p className="field-error" role="alert" data-testid={`${testid}-error`}>
          {error}
        </p>
      ) : null}
    </fieldset>
  );
}

/** One track: its audio (upload and verdict) and, folded, its title, ISRC and splits. */
function TrackBlock({
  accountId,
  release,
  track,
  index,
  editable,
  onChanged,
}: {
  accountId: string;
  release: ApiRelease;
  track: ApiTrack;
  index: number;
  editable: boolean;
  onChanged: () => void;
}) {
  const [title, setTitle] = useState(track.title);
  const [isrc, setIsrc] = useState(track.isrc ?? "");
  const [splits, setSplits] = useState<SplitRow[]>(() =>
    track.splits.map((s) => ({ name: s.name, share: String(s.share), email: s.email ?? "" })),
  );
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [saved, setSaved] = useState(false);
  const p = `tracks[${index}]`;
  const save = async (event: FormEvent) => {
    event.preventDefault();
    setError(null);
    setSaved(false);
    const shares = splits.map((s) => hundredths(s.share));
    const fields: Record<string, string> = {};
    if (!title.trim()) fields.title = "Give the track a title.";
    if (splits.some((s) => !s.name.trim())) fields.splits = "Give every share a name, or remove it.";
    else if (shares.some((h) => h === null || h === 0))
      fields.splits = "Give every share a percentage above 0.";
    else if (splits.length > 0 && shares.reduce<number>((a, h) => a + (h ?? 0), 0) !== 10000)
      fields.splits = "The shares must add up to exactly 100%.";
    if (Object.keys(fields).length > 0) {
      setError(new PlainError("Some fields need a change.", { fields }));
      return;
    }
    setBusy(true);
    try {
      await patchTrack(accountId, release.id, track.id, {
        title: title.trim(),
        isrc: isrc.trim() || null,
        splits: splits.map(
          (s, i): Split => ({
            name: s.name.trim(),
            share: (shares[i] ?? 0) / 100,
            ...(s.email.trim() ? { email: s.email.trim() } : {}),
          }),
        ),
      });
      setSaved(true);
      onChanged();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const fieldError = (name: string) => {
    if (!(error instanceof PlainError)) return undefined;
    const own = error.fields[name];
    if (own) return own;
    // The server names a split's own field (splits[1].share); the list shows it.
    if (name === "splits") return Object.entries(error.fields).find(([k]) => k.startsWith("splits"))?.[1];
    return undefined;
  };
  return (
    <li className="track" id={fieldId(p)} tabIndex={-1} data-testid="edit-track">
      <h3>
        {track.track_number ?? index + 1}. {track.title}
        {track.isrc ? <span className="muted"> · {track.isrc}</span> : null}
      </h3>
      <UploadControl
        accountId={accountId}
        releaseId={release.id}
        trackId={track.id}
        current={track.audio}
        label={`Audio of track ${index + 1}`}
        hint="The master recording: WAV or FLAC, 44.1 kHz or more, 16 or 24 bit."
        accept={AUDIO}
        id={fieldId(`${p}.audio`)}
        testid={`track-audio-${index}`}
        disabled={!editable}
        onChecked={onChanged}
      />
      {editable ? (
        <details>
          <summary>Title, ISRC and splits</summary>
          <form onSubmit={save} noValidate className="form" aria-label={`Track ${index + 1}`}>
            <Field
              id={fieldId(`${p}.title`)}
              label="Track title"
              value={title}
              onChange={(e) => setTitle(e.target.value)}
              error={fieldError("title")}
              testid={`track-title-${index}`}
            />
            <Field
              id={fieldId(`${p}.isrc`)}
              label="ISRC"
              hint="The recording's code, such as GB-ABC-26-00001. Leave it empty if the platform gives one."
              value={isrc}
              onChange={(e) => setIsrc(e.target.value)}
              error={fieldError("isrc")}
              testid={`track-isrc-${index}`}
            />
            <SplitsEditor
              id={fieldId(`${p}.splits`)}
              rows={splits}
              onChange={setSplits}
              error={fieldError("splits")}
              testid={`track-splits-${index}`}
            />
            <FormError error={error} testid={`track-error-${index}`} />
            <div className="buttons">
              <button type="submit" disabled={busy} data-testid={`track-save-${index}`}>
                Save track
              </button>
              {saved ? (
                <span role="status" data-testid={`track-saved-${index}`}>
                  Saved.
                </span>
              ) : null}
            </div>
          </form>
        </details>
      ) : null}
    </li>
  );
}

/** The release's tracks, each with its audio, and a form that adds one. */
export function Tracks({
  accountId,
  release,
  editable,
}: {
  accountId: string;
  release: ApiRelease;
  editable: boolean;
}) {
  const client = useQueryClient();
  const [title, setTitle] = useState("");
  const [isrc, setIsrc] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const changed = () => {
    void client.invalidateQueries({ queryKey: ["api-release", release.id] });
    void client.invalidateQueries({ queryKey: ["problems", release.id] });
    void client.invalidateQueries({ queryKey: ["release", release.id] });
  };
  const add = async (event: FormEvent) => {
    event.preventDefault();
    setError(null);
    if (!title.trim()) {
      setError(new PlainError("Give the track a title.", { field: "title" }));
      return;
    }
    setBusy(true);
    try {
      await addTrack(accountId, release.id, {
        title: title.trim(),
        ...(isrc.trim() ? { isrc: isrc.trim() } : {}),
      });
      setTitle("");
      setIsrc("");
      changed();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section className="card" aria-labelledby="tracks-heading" data-testid="release-tracks-editor">
      <h2 id="tracks-heading">Tracks</h2>
      {release.tracks.length === 0 ? (
        <Empty>
          <span data-testid="tracks-empty">
            No tracks yet: add the first one below, then upload its audio.
          </span>
        </Empty>
      ) : (
        <ol className="tracks">
          {release.tracks.map((t, i) => (
            <TrackBlock
              key={t.id}
              accountId={accountId}
              release={release}
              track={t}
              index={i}
              editable={editable}
              onChanged={changed}
            />
          ))}
        </ol>
      )}
      {editable ? (
        <form onSubmit={add} noValidate className="form add-track" aria-label="Add a track">
          <h3>Add a track</h3>
          <Field
            id={fieldId("tracks")}
            label="Track title"
            value={title}
            onChange={(e) => setTitle(e.target.value)}
            error={errorFor(error, "title")}
            testid="new-track-title"
          />
          <Field
            label="ISRC"
            hint="Optional: such as GB-ABC-26-00001. Leave it empty if the platform gives one."
            value={isrc}
            onChange={(e) => setIsrc(e.target.value)}
            error={errorFor(error, "isrc")}
            testid="new-track-isrc"
          />
          <FormError error={error} testid="new-track-error" />
          <div className="buttons">
            <button type="submit" disabled={busy} data-testid="new-track-add">
              Add track
            </button>
          </div>
        </form>
      ) : null}
    </section>
  );
}
