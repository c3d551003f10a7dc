import { useQueryClient } from "@tanstack/react-query";
import { useEffect, useRef, useState } from "react";
import { PlainError } from "../../api/portal.ts";
import { getUpload, type MediaAsset, upload } from "../../api/public.ts";
import { problemsQuery } from "./queries.ts";

/** How long the page follows a file's checks before it says they take long. */
const CHECK_FOR_MS = 120_000;

/** What the checks measured, in a few words: "3000 × 3000 jpeg" or "0:30, 44.1 kHz, 2 channels". */
function measured(asset: MediaAsset): string {
  const m = asset.metadata as Record<string, unknown>;
  if (asset.kind === "artwork" && m.width && m.height)
    return `${m.width} × ${m.height} pixels${m.format ? `, ${String(m.format).toUpperCase()}` : ""}`;
  const seconds = Number(m.duration_seconds ?? m.duration);
  const parts: string[] = [];
  if (Number.isFinite(seconds) && seconds > 0)
    parts.push(`${Math.floor(seconds / 60)}:${String(Math.round(seconds % 60)).padStart(2, "0")}`);
  if (m.sample_rate) parts.push(`${Number(m.sample_rate) / 1000} kHz`);
  if (m.channels) parts.push(`${m.channels} channel${Number(m.channels) === 1 ? "" : "s"}`);
  return parts.join(", ");
}

/** The verdict of a file's checks, next to its control. */
export function Verdict({ asset, testid }: { asset: MediaAsset | null; testid: string }) {
  if (!asset)
    return (
      <p className="verdict none" data-testid={testid} data-status="none">
        No file yet.
      </p>
    );
  const name = asset.filename ? `${asset.filename}: ` : "";
  if (asset.status === "valid")
    return (
      <p className="verdict good" data-testid={testid} data-status="valid">
        ✓ {name}checked and ready{measured(asset) ? ` (${measured(asset)})` : ""}.
      </p>
    );
  if (asset.status === "invalid")
    return (
      <div className="verdict bad" data-testid={testid} data-status="invalid">
        <p>✗ {name}this file cannot be used:</p>
        <ul>
          {asset.problems.map((p) => (
            <li key={p.code + p.message}>{p.message.charAt(0).toUpperCase() + p.message.slice(1)}</li>
          ))}
        </ul>
        <p>Upload another file.</p>
      </div>
    );
  return (
    <p className="verdict waiting" data-testid={testid} data-status={asset.status}>
      {name}
      {asset.status === "pending" ? "waiting for the file…" : "being checked…"}
    </p>
  );
}

/**
 * A file control for a release's cover (`trackId` undefined) or a track's audio: sends the file
 * straight to storage with its progress, then follows its checks until their verdict, which it
 * shows beside the control. `onChecked` runs once the verdict is in.
 */
export function UploadControl({
  accountId,
  releaseId,
  trackId,
  current,
  label,
  hint,
  accept,
  id,
  testid,
  disabled,
  onChecked,
}: {
  accountId: string;
  releaseId: string;
  trackId?: string;
  current: MediaAsset | null;
  label: string;
  hint: string;
  accept: string;
  id: string;
  testid: string;
  disabled?: boolean;
  onChecked: () => void;
}) {
  const client = useQueryClient();
  const [progress, setProgress] = useState<number | null>(null);
  const [asset, setAsset] = useState<MediaAsset | null>(current);
  const [error, setError] = useState<string | null>(null);
  const alive = useRef(true);
  useEffect(() => {
    alive.current = true;
    return () => {
      alive.current = false;
    };
  }, []);
  useEffect(() => {
    if (progress === null) setAsset(current);
  }, [current, progress]);

  const send = async (file: File) => {
    setError(null);
    setProgress(0);
    try {
      const assetId = await upload(accountId, releaseId, trackId, file, (share) => {
        if (alive.current) setProgress(Math.min(1, share));
      });
      setProgress(null);
      const until = Date.now() + CHECK_FOR_MS;
      for (let wait = 300; alive.current; wait = Math.min(wait * 1.5, 2000)) {
        const now = await getUpload(accountId, assetId);
        if (!alive.current) return;
        setAsset(now);
        if (now.status === "valid" || now.status === "invalid") break;
        if (Date.now() > until) {
          setError("The checks are taking long. Reload the page in a few minutes to see their verdict.");
          break;
        }
        await new Promise((resolve) => setTimeout(resolve, wait));
      }
      // A verdict changes what submitting still needs: the list beside it is asked again at once,
      // for the cover as for a track's audio.
      void client.invalidateQueries({ queryKey: problemsQuery(accountId, releaseId).queryKey });
      onChecked();
    } catch (e) {
      if (!alive.current) return;
      setProgress(null);
      setError(e instanceof PlainError ? e.message : "The upload did not work. Try again.");
    }
  };

  const percent = progress === null ? null : Math.round(progress * 100);
  return (
    <div className="upload" data-testid={testid}>
      <label htmlFor={id}>{label}</label>
      <p className="hint" id={`${id}-hint`}>
        {hint}
      </p>
      <input
        id={id}
        type="file"
        accept={accept}
        disabled={disabled || progress !== null}
        aria-describedby={`${id}-hint ${id}-verdict`}
        data-testid={`${testid}-input`}
        onChange={(e) => {
          const file = e.target.files?.[0];
          e.target.value = "";
          if (file) void send(file);
        }}
      />
      {percent !== null ? (
        <div className="progress" data-testid={`${testid}-progress`}>
          <progress max={100} value={percent} aria-label={`${label}: sent`} />
          <span aria-live="polite">{percent}% sent</span>
        </div>
      ) : null}
      <div id={`${id}-verdict`} aria-live="polite">
        {error ? (
          <p className="field-error" role="alert" data-testid={`${testid}-error`}>
            {error}
          </p>
        ) : null}
        <Verdict asset={asset} testid={`${testid}-verdict`} />
      </div>
    </div>
  );
}
