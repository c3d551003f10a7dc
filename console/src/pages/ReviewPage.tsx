import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useEffect, useId, useState } from "react";
import { api } from "../api/admin.ts";
import type { Problem, ReleaseForReview, TrackForReview } from "../api/types.ts";
import { Link, navigate } from "../router.tsx";
import { ErrorState, Fields, Loading, Page, Status, TableWrap, Value, When } from "../ui/common.tsx";
import { Dialog } from "../ui/Dialog.tsx";
import { reviewQueueFirstPage } from "./ReviewQueue.tsx";

/** Used when the server has no GET /review-reasons yet. */
const FALLBACK_REASONS = [
  "The cover art does not meet the store guidelines (size, text, logos, URLs).",
  "The artist name does not match the artist's existing store profile.",
  "The audio is of poor quality, silent, or cut short.",
  "The track titles or version information are formatted wrongly.",
  "The release contains material the account holds no rights to.",
  "The metadata is incomplete or inconsistent with the audio.",
];

const SHOWN_ELSEWHERE = new Set(["tracks", "cover", "checks", "media_checks", "correction", "history"]);

function coverUrl(release: ReleaseForReview): string | null {
  return release.cover?.url ?? null;
}

function audioUrl(track: TrackForReview): string | null {
  return track.audio?.url ?? null;
}

/** Seconds as m:ss. */
function duration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds) || seconds <= 0) return "—";
  const s = Math.round(seconds);
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
}

/** A release's review: everything the reviewer looks at, and the decision with its shortcuts. */
export default function ReviewPage({ id }: { id: string }) {
  const client = useQueryClient();
  // Its media URLs are signed for 15 minutes: the release is fetched again (new URLs) only once
  // they are about to expire, so a track being played is not reloaded by a refetch on focus.
  const release = useQuery({
    queryKey: ["release", id],
    queryFn: () => api.release(id),
    staleTime: 12 * 60_000,
  });
  // The queue's first page, for j/k and "next after deciding".
  const queue = useQuery(reviewQueueFirstPage);
  const ids = queue.data?.data.map((r) => r.id) ?? [];
  const index = ids.indexOf(id);
  const next = index >= 0 ? ids[index + 1] : ids.find((other) => other !== id);
  const previous = index > 0 ? ids[index - 1] : undefined;
  const [rejecting, setRejecting] = useState(false);
  // The `a` key asks before approving (a stray key must not send a release to the stores);
  // the Approve button, a deliberate click, does not.
  const [confirming, setConfirming] = useState(false);
  const [help, setHelp] = useState(false);
  const [done, setDone] = useState<string | null>(null);

  const afterDecision = (status: string) => {
    setDone(status);
    void client.invalidateQueries({ queryKey: ["reviews"] });
    void client.invalidateQueries({ queryKey: ["release", id] });
  };
  const approve = useMutation({
    mutationFn: () => api.approve(id),
    onSuccess: (d) => {
      setConfirming(false);
      afterDecision(d.status);
    },
  });
  const reject = useMutation({
    mutationFn: (reason: string) => api.reject(id, reason),
    onSuccess: (d) => {
      setRejecting(false);
      afterDecision(d.status);
    },
  });

  useEffect(() => {
    function onKey(event: KeyboardEvent) {
      if (event.defaultPrevented || event.metaKey || event.ctrlKey || event.altKey) return;
      const target = event.target as HTMLElement | null;
      if (target?.closest("input, textarea, select, [contenteditable=true], dialog")) return;
      if (rejecting || help || confirming) return;
      if (event.key === "j" && next) navigate(`/reviews/${next}`);
      else if (event.key === "k" && previous) navigate(`/reviews/${previous}`);
      else if (event.key === "a" && !approve.isPending && !done) setConfirming(true);
      else if (event.key === "r" && !done) setRejecting(true);
      else if (event.key === "?") setHelp(true);
      else return;
      event.preventDefault();
    }
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [next, previous, rejecting, help, confirming, approve, done]);

  // biome-ignore lint/correctness/useExhaustiveDependencies: a new release starts undecided
  useEffect(() => setDone(null), [id]);

  const r = release.data;
  // While the release loads, its title from the queue's row (already in the cache).
  const queued = queue.data?.data.find((row) => row.id === id);
  const title = r?.title ?? queued?.title;
  return (
    <Page
      title={title ? `Review: ${title}` : "Review"}
      testid="page-review"
      actions={
        <>
          <Link to="/reviews" className="button-link" data-testid="review-back">
            Queue
          </Link>
          <button
            type="button"
            onClick={() => previous && navigate(`/reviews/${previous}`)}
            disabled={!previous}
          >
            ← Previous <kbd className="hint">k</kbd>
          </button>
          <button type="button" onClick={() => next && navigate(`/reviews/${next}`)} disabled={!next}>
            Next <kbd className="hint">j</kbd> →
          </button>
          <button
            type="button"
            className="shortcut-hint"
            onClick={() => setHelp(true)}
            data-testid="review-help"
          >
            Shortcuts <kbd>?</kbd>
          </button>
        </>
      }
    >
      {r ? (
        <div className="decision" data-testid="review-decision">
          <span>
            Status: <Status value={done ?? r.status} />
          </span>
          {done ? (
            <span role="status" data-testid="review-done">
              {done === "approved" ? "Approved." : done === "rejected" ? "Rejected." : `Now ${done}.`}{" "}
              {next ? (
                <Link to={`/reviews/${next}`} data-testid="review-next">
                  Next release →
                </Link>
              ) : (
                <Link to="/reviews">Back to the queue</Link>
              )}
            </span>
          ) : (
            <>
              <button
                type="button"
                className="approve"
                onClick={() => approve.mutate()}
                disabled={approve.isPending}
                data-testid="review-approve"
              >
                Approve <kbd className="hint">a</kbd>
              </button>
              <button
                type="button"
                className="reject"
                onClick={() => setRejecting(true)}
                data-testid="review-reject"
              >
                Reject… <kbd className="hint">r</kbd>
              </button>
            </>
          )}
          {approve.isError ? <ErrorState error={approve.error} /> : null}
        </div>
      ) : null}

      {release.isPending ? (
        <Loading />
      ) : release.isError ? (
        <ErrorState error={release.error} onRetry={() => release.refetch()} />
      ) : r ? (
        <ReleaseBody release={r} />
      ) : null}

      <RejectDialog
        open={rejecting}
        onClose={() => setRejecting(false)}
        onReject={(reason) => reject.mutate(reason)}
        busy={reject.isPending}
        error={reject.error}
      />
      <Dialog
        open={confirming}
        onClose={() => setConfirming(false)}
        title="Approve this release?"
        testid="approve-dialog"
        actions={
          <>
            <button
              type="button"
              className="approve"
              // biome-ignore lint/a11y/noAutofocus: Enter confirms the `a` shortcut
              autoFocus
              onClick={() => approve.mutate()}
              disabled={approve.isPending}
              data-testid="approve-confirm"
            >
              Approve
            </button>
            <button type="button" onClick={() => setConfirming(false)} data-testid="approve-cancel">
              Cancel
            </button>
          </>
        }
      >
        <p>
          {title ? <strong>{title}</strong> : "The release"} is scheduled for delivery to its stores once
          approved.
        </p>
        {approve.isError ? <ErrorState error={approve.error} /> : null}
      </Dialog>
      <Dialog
        open={help}
        onClose={() => setHelp(false)}
        title="Keyboard shortcuts"
        testid="shortcuts-dialog"
        actions={
          <button
            type="button"
            className="primary"
            onClick={() => setHelp(false)}
            data-testid="shortcuts-close"
          >
            Close
          </button>
        }
      >
        <dl className="fields">
          <dt>
            <kbd>j</kbd>
          </dt>
          <dd>next release in the queue</dd>
          <dt>
            <kbd>k</kbd>
          </dt>
          <dd>previous release</dd>
          <dt>
            <kbd>a</kbd>
          </dt>
          <dd>approve (asks first; Enter confirms)</dd>
          <dt>
            <kbd>r</kbd>
          </dt>
          <dd>reject (choose or write a reason)</dd>
          <dt>
            <kbd>?</kbd>
          </dt>
          <dd>this help</dd>
        </dl>
      </Dialog>
    </Page>
  );
}

function ReleaseBody({ release }: { release: ReleaseForReview }) {
  const cover = coverUrl(release);
  const tracks = release.tracks ?? [];
  const problems: Problem[] = release.checks ?? [];
  const correction = release.correction;
  const trackTitle = new Map(tracks.map((t, i) => [t.id, `${t.track_number ?? i + 1}. ${t.title ?? ""}`]));
  const metadata = Object.fromEntries(Object.entries(release).filter(([k]) => !SHOWN_ELSEWHERE.has(k)));
  return (
    <div className="grid">
      <section className="card" aria-labelledby="cover-h" data-testid="review-cover">
        <h2 id="cover-h">Cover</h2>
        {cover ? (
          <img
            className="cover"
            src={cover}
            alt={`Cover of ${release.title}`}
            data-testid="review-cover-image"
          />
        ) : (
          <p className="muted">No cover image.</p>
        )}
        {release.cover ? (
          <details>
            <summary>The cover file</summary>
            <Fields record={release.cover} omit={["url"]} />
          </details>
        ) : null}
      </section>

      <section className="card" aria-labelledby="checks-h" data-testid="review-checks">
        <h2 id="checks-h">Automatic checks</h2>
        {problems.length === 0 ? (
          <p className="ok" data-testid="review-checks-pass">
            Every check passes.
          </p>
        ) : (
          <ul>
            {problems.map((p) => (
              <li key={`${p.param}-${p.code}`} data-testid="review-problem">
                <strong>{p.param ?? "release"}</strong>: {p.message} <code>{p.code}</code>
              </li>
            ))}
          </ul>
        )}
        <h2>Media checks</h2>
        <div data-testid="review-media-checks">
          {!release.media_checks || release.media_checks.length === 0 ? (
            <p className="muted">No media to check.</p>
          ) : (
            <ul>
              {release.media_checks.map((m) => (
                <li key={`${m.slot}-${m.track_id ?? ""}`} data-testid="review-media-check">
                  {m.slot === "cover"
                    ? "Cover"
                    : `Audio of ${trackTitle.get(m.track_id ?? "") ?? m.track_id}`}
                  : <Status value={m.status} />
                  {m.problems && m.problems.length > 0 ? (
                    <ul>
                      {m.problems.map((p) => (
                        <li key={p.code}>
                          {p.message} <code>{p.code}</code>
                        </li>
                      ))}
                    </ul>
                  ) : null}
                </li>
              ))}
            </ul>
          )}
        </div>
      </section>

      <section className="card" aria-labelledby="tracks-h" data-testid="review-tracks">
        <h2 id="tracks-h">Tracks ({tracks.length})</h2>
        <ol className="tracks">
          {tracks.map((t, i) => {
            const url = audioUrl(t);
            const label = `${t.track_number ?? i + 1}. ${t.title ?? "(untitled)"}${t.version ? ` (${t.version})` : ""}`;
            return (
              <li key={t.id} data-testid="review-track" data-track-id={t.id}>
                <strong>{label}</strong>{" "}
                <span className="muted">
                  ISRC {t.isrc ?? "—"} · {duration(t.duration)}
                </span>
                {url ? (
                  // biome-ignore lint/a11y/useMediaCaption: reviewers listen to music; there is no speech to caption
                  <audio
                    controls
                    preload="none"
                    src={url}
                    aria-label={`Audio of ${label}`}
                    data-testid="review-audio"
                  />
                ) : (
                  <p className="warn">No audio uploaded.</p>
                )}
                <details>
                  <summary>Every field of this track</summary>
                  <Fields record={t} omit={["audio"]} />
                  {t.audio ? <Fields record={t.audio} omit={["url"]} /> : null}
                </details>
              </li>
            );
          })}
        </ol>
      </section>

      {correction ? (
        <section className="card" aria-labelledby="diff-h" data-testid="review-correction">
          <h2 id="diff-h">Correction: difference against what was delivered</h2>
          <CorrectionDiff value={correction} />
        </section>
      ) : null}

      <section className="card" aria-labelledby="meta-h" data-testid="review-metadata">
        <h2 id="meta-h">Metadata</h2>
        <Fields record={metadata} />
      </section>

      {release.history && release.history.length > 0 ? (
        <section className="card" aria-labelledby="hist-h" data-testid="review-history">
          <h2 id="hist-h">History</h2>
          <ol>
            {release.history.map((h) => (
              <li key={`${h.created_at}-${h.to_status}`}>
                <When at={h.created_at} /> {h.from_status ?? "—"} → <Status value={h.to_status} />{" "}
                <span className="muted">by {h.actor}</span>
                {h.reason ? <div>“{h.reason}”</div> : null}
              </li>
            ))}
          </ol>
        </section>
      ) : null}
    </div>
  );
}

interface Change {
  field: string;
  before: unknown;
  after: unknown;
}

/** A correction's changes, whichever of the usual shapes the server sends them in. */
function changesOf(value: unknown): Change[] | null {
  if (Array.isArray(value)) {
    return value.map((c: Record<string, unknown>) => ({
      field: String(c.field ?? c.path ?? c.param ?? "?"),
      before: c.before ?? c.old ?? c.from ?? c.delivered,
      after: c.after ?? c.new ?? c.to ?? c.current,
    }));
  }
  if (value && typeof value === "object") {
    const v = value as Record<string, unknown>;
    if (Array.isArray(v.changes)) return changesOf(v.changes);
    if ("changes" in v && v.changes === null) return null;
    const before = v.delivered ?? v.before;
    const after = v.current ?? v.after;
    if (before && after && typeof before === "object" && typeof after === "object") {
      const b = before as Record<string, unknown>;
      const a = after as Record<string, unknown>;
      return [...new Set([...Object.keys(b), ...Object.keys(a)])]
        .filter((k) => JSON.stringify(b[k]) !== JSON.stringify(a[k]))
        .map((k) => ({ field: k, before: b[k], after: a[k] }));
    }
  }
  return null;
}

function CorrectionDiff({ value }: { value: unknown }) {
  const changes = changesOf(value);
  const v = value as {
    version?: number;
    corrected_at?: string;
    delivered?: { store?: string; delivered_at?: string } | null;
  };
  const about = (
    <p className="help">
      Correction {v.version ?? ""} of <When at={v.corrected_at} />
      {v.delivered ? (
        <>
          , against what {v.delivered.store ?? "the store"} got on <When at={v.delivered.delivered_at} />
        </>
      ) : null}
      .
    </p>
  );
  if (!changes)
    return (
      <>
        {about}
        <p className="muted" data-testid="review-diff-unknown">
          What was delivered was sent before Backline recorded deliveries' contents: no difference to show.
        </p>
      </>
    );
  if (changes.length === 0)
    return (
      <>
        {about}
        <p className="muted">No field differs.</p>
      </>
    );
  return (
    <TableWrap label="Correction differences">
      {about}
      <table data-testid="review-diff">
        <thead>
          <tr>
            <th scope="col">Field</th>
            <th scope="col">Delivered</th>
            <th scope="col">Now</th>
          </tr>
        </thead>
        <tbody>
          {changes.map((c) => (
            <tr key={c.field}>
              <th scope="row">{c.field}</th>
              <td className="diff-old">
                <Value value={c.before} />
              </td>
              <td className="diff-new">
                <Value value={c.after} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </TableWrap>
  );
}

function RejectDialog({
  open,
  onClose,
  onReject,
  busy,
  error,
}: {
  open: boolean;
  onClose: () => void;
  onReject: (reason: string) => void;
  busy: boolean;
  error: unknown;
}) {
  const reasons = useQuery({
    queryKey: ["review-reasons"],
    queryFn: api.reviewReasons,
    enabled: open,
    retry: false,
  });
  const list = reasons.data
    ? reasons.data.data.map((r) => r.text ?? r.reason ?? r.label ?? r.code ?? "").filter(Boolean)
    : reasons.isError
      ? FALLBACK_REASONS
      : [];
  const [choice, setChoice] = useState<string>("");
  const [written, setWritten] = useState("");
  const ids = useId();
  const reason = choice === "__other" || choice === "" ? written.trim() : choice;

  // biome-ignore lint/correctness/useExhaustiveDependencies: each opening starts empty
  useEffect(() => {
    setChoice("");
    setWritten("");
  }, [open]);

  function submit(event: FormEvent) {
    event.preventDefault();
    if (reason) onReject(reason);
  }
  // The buttons sit below the scrolling list (ui/Dialog.tsx), outside the form: `form` ties Reject to it.
  const formId = `${ids}-form`;
  return (
    <Dialog
      open={open}
      onClose={onClose}
      title="Reject this release"
      testid="reject-dialog"
      actions={
        <>
          <button
            type="submit"
            form={formId}
            className="reject"
            disabled={!reason || busy}
            data-testid="reject-confirm"
          >
            {busy ? "Rejecting…" : "Reject"}
          </button>
          <button type="button" onClick={onClose} data-testid="reject-cancel">
            Cancel
          </button>
          {!reason ? (
            <span className="muted" data-testid="reject-needs-reason">
              Choose or write a reason first.
            </span>
          ) : null}
        </>
      }
    >
      <form id={formId} onSubmit={submit}>
        <fieldset>
          <legend>Reason (the account sees it)</legend>
          {reasons.isPending ? <p className="muted">Loading the common reasons…</p> : null}
          <ul className="choices" data-testid="reject-reasons">
            {list.map((text, i) => (
              <li key={text}>
                <input
                  type="radio"
                  name="reason"
                  id={`${ids}-r${i}`}
                  value={text}
                  checked={choice === text}
                  onChange={() => setChoice(text)}
                  data-testid="reject-reason-option"
                />
                <label htmlFor={`${ids}-r${i}`} className="inline-label">
                  {text}
                </label>
              </li>
            ))}
            <li>
              <input
                type="radio"
                name="reason"
                id={`${ids}-other`}
                value="__other"
                checked={choice === "__other"}
                onChange={() => setChoice("__other")}
                data-testid="reject-reason-other"
              />
              <label htmlFor={`${ids}-other`} className="inline-label">
                Another reason
              </label>
            </li>
          </ul>
        </fieldset>
        <label htmlFor={`${ids}-text`}>Write the reason</label>
        <textarea
          id={`${ids}-text`}
          rows={3}
          maxLength={2000}
          value={written}
          onChange={(e) => {
            setWritten(e.target.value);
            setChoice("__other");
          }}
          data-testid="reject-reason-text"
        />
        {error ? <ErrorState error={error} /> : null}
      </form>
    </Dialog>
  );
}
