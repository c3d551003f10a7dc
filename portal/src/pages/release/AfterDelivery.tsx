import { useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useState } from "react";
import { PlainError, type ReleaseDetail } from "../../api/portal.ts";
import { correctMetadata, requestTakedown } from "../../api/public.ts";
import { errorFor, Field, FormError, Notice } from "../../ui.tsx";

/** What a correction may change (PATCH /releases/{id}/metadata), as the text of its field. */
const CORRECTABLE = [
  ["title", "Title"],
  ["version", "Version"],
  ["label_name", "Label"],
] as const;
type Name = (typeof CORRECTABLE)[number][0];

/**
 * For a delivered or live release: correct its display metadata (sent to every store as an
 * update), or take it down from the stores (each store's progress shows in the timeline above).
 */
export function AfterDelivery({ accountId, release }: { accountId: string; release: ReleaseDetail }) {
  const client = useQueryClient();
  const initial = Object.fromEntries(CORRECTABLE.map(([f]) => [f, String(release[f] ?? "")])) as Record<
    Name,
    string
  >;
  const [values, setValues] = useState(initial);
  const [error, setError] = useState<unknown>(null);
  const [done, setDone] = useState<string | null>(null);
  const [reason, setReason] = useState("");
  const [takedownError, setTakedownError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const refresh = () =>
    Promise.all([
      client.invalidateQueries({ queryKey: ["release", release.id] }),
      client.invalidateQueries({ queryKey: ["release-status", release.id] }),
    ]);

  const correct = async (e: FormEvent) => {
    e.preventDefault();
    setError(null);
    setDone(null);
    const changes: Record<string, unknown> = {};
    for (const [f] of CORRECTABLE) {
      if (values[f] === initial[f]) continue;
      const text = values[f].trim();
      if (f === "title" && !text) {
        setError(new PlainError("Give the release a title.", { field: "title" }));
        return;
      }
      changes[f] = text || null;
    }
    if (Object.keys(changes).length === 0) {
      setError(new PlainError("Change a field first: nothing would be sent."));
      return;
    }
    setBusy(true);
    try {
      await correctMetadata(accountId, release.id, changes);
      setDone("The correction is on its way to every store that has the release.");
      await refresh();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  const takedown = async (e: FormEvent) => {
    e.preventDefault();
    setTakedownError(null);
    if (
      !confirm(
        `Take “${release.title}” down from every store? Its listeners lose it; this cannot be undone here.`,
      )
    )
      return;
    setBusy(true);
    try {
      await requestTakedown(accountId, release.id, reason.trim());
      await refresh();
    } catch (err) {
      setTakedownError(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <>
      <section className="card" aria-labelledby="correct-heading" data-testid="release-correct">
        <h2 id="correct-heading">Correct the details</h2>
        <p className="hint">
          A change here is sent to every store that has the release, as an update: its identifiers, tracks and
          date stay as delivered.
        </p>
        <form className="form" onSubmit={correct} noValidate aria-label="Correct the details">
          {CORRECTABLE.map(([f, label]) => (
            <Field
              key={f}
              label={label}
              value={values[f]}
              onChange={(e) => setValues((v) => ({ ...v, [f]: e.target.value }))}
              error={errorFor(error, f)}
              testid={`correct-${f}`}
            />
          ))}
          <FormError error={error} testid="correct-error" />
          {done ? <Notice testid="correct-done">{done}</Notice> : null}
          <div className="buttons">
            <button type="submit" disabled={busy} data-testid="correct-send">
              Send the correction
            </button>
          </div>
        </form>
      </section>
      <section className="card" aria-labelledby="takedown-heading" data-testid="release-takedown">
        <h2 id="takedown-heading">Take it down</h2>
        <form className="form" onSubmit={takedown} noValidate aria-label="Take the release down">
          <Field
            label="Why (optional)"
            hint="For the platform's team; the stores are not told."
            value={reason}
            onChange={(e) => setReason(e.target.value)}
            error={errorFor(takedownError, "reason")}
            testid="takedown-reason"
          />
          <FormError error={takedownError} testid="takedown-error" />
          <div className="buttons">
            <button type="submit" className="danger-fill" disabled={busy} data-testid="takedown-send">
              Take it down from every store
            </button>
          </div>
        </form>
      </section>
    </>
  );
}
