import { useQuery, useQueryClient } from "@tanstack/react-query";
import { type DragEvent, type FormEvent, useEffect, useId, useRef, useState } from "react";
import { api, type UploadProgress, uploadRoyaltyReport } from "../api/admin.ts";
import { describeError } from "../api/errors.ts";
import type { RoyaltyImport } from "../api/types.ts";
import { Link, navigate } from "../router.tsx";
import { Page, Status, When } from "../ui/common.tsx";
import { PagedTable } from "../ui/PagedTable.tsx";
import { useCursorPage } from "../ui/paging.ts";
import { IMPORT_FORMATS, importPeriod } from "../ui/royalty-imports.ts";

/** A v4 UUID; crypto.randomUUID exists only on https and localhost pages. */
function uuid(): string {
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = ((b[6] as number) & 0x0f) | 0x40;
  b[8] = ((b[8] as number) & 0x3f) | 0x80;
  const h = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

function kib(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

/** Upload a store's royalty report (drag and drop, live progress) and the list of imports. */
export default function RoyaltyImports() {
  const page = useCursorPage<RoyaltyImport>("royalty-imports", api.royaltyImports, {}, 25);
  return (
    <Page title="Royalty imports" testid="page-royalty-imports">
      <Upload />
      <section aria-labelledby="imports-h">
        <h2 id="imports-h">Imports</h2>
        <PagedTable
          page={page}
          label="Imports"
          testid="imports-table"
          empty="No imports yet."
          columns={["File", "Format", "Period", "Status", "Lines", "Matched", "Unmatched", "Started"]}
          row={(i) => (
            <tr key={i.id} data-testid="import-row" data-import-id={i.id}>
              <td>
                <Link to={`/royalties/${i.id}`} data-testid="import-open">
                  {i.file_name ?? i.id}
                </Link>
              </td>
              <td>{i.format}</td>
              <td data-testid="import-row-period">{importPeriod(i)}</td>
              <td>
                <Status value={i.status} />
              </td>
              <td>{i.lines_total.toLocaleString()}</td>
              <td>{i.lines_matched.toLocaleString()}</td>
              <td>{i.lines_unmatched.toLocaleString()}</td>
              <td>
                <When at={i.started_at} />
              </td>
            </tr>
          )}
        />
      </section>
    </Page>
  );
}

function Upload() {
  const client = useQueryClient();
  const ids = useId();
  const input = useRef<HTMLInputElement>(null);
  const [file, setFile] = useState<File | null>(null);
  const [format, setFormat] = useState("backline");
  const [period, setPeriod] = useState("");
  const [store, setStore] = useState("");
  const stores = useQuery({ queryKey: ["stores"], queryFn: api.stores });
  const [over, setOver] = useState(false);
  const [progress, setProgress] = useState<UploadProgress | null>(null);
  const [lines, setLines] = useState<number | null>(null);
  const [importId, setImportId] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [outcome, setOutcome] = useState<{ status: number; body: Record<string, unknown> } | null>(null);
  const abort = useRef<AbortController | null>(null);

  // While the server imports, poll the import (named by the id we chose) for its lines so far.
  useEffect(() => {
    if (!progress?.done || !importId) return;
    let stopped = false;
    const tick = async () => {
      try {
        const running = await api.royaltyImport(importId);
        if (stopped) return;
        if (running.progress?.lines !== undefined) setLines(running.progress.lines);
        else if (running.lines_total) setLines(running.lines_total);
      } catch {
        // Not there yet, or a server without progress: the upload's own answer brings the report.
      }
    };
    const timer = setInterval(tick, 500);
    void tick();
    return () => {
      stopped = true;
      clearInterval(timer);
    };
  }, [progress?.done, importId]);

  function pick(files: FileList | null) {
    const f = files?.[0];
    if (f) {
      setFile(f);
      setOutcome(null);
      setError(null);
    }
  }

  function onDrop(event: DragEvent) {
    event.preventDefault();
    setOver(false);
    pick(event.dataTransfer.files);
  }

  async function submit(event: FormEvent) {
    event.preventDefault();
    if (!file) return;
    setError(null);
    setOutcome(null);
    setLines(null);
    const id = uuid();
    setImportId(id);
    setProgress({ sent: 0, total: file.size, done: false });
    abort.current = new AbortController();
    try {
      const result = await uploadRoyaltyReport(
        file,
        { format, period: period || undefined, store: store.trim() || undefined, file_name: file.name, id },
        setProgress,
        abort.current.signal,
      );
      setOutcome(result);
      void client.invalidateQueries({ queryKey: ["royalty-imports"] });
    } catch (e) {
      setError(e);
    } finally {
      setProgress(null);
    }
  }

  const report = outcome?.body.import as RoyaltyImport | undefined;
  const pct = progress && progress.total > 0 ? Math.round((progress.sent / progress.total) * 100) : 0;
  return (
    <form className="card" onSubmit={submit} aria-labelledby="upload-h" data-testid="import-upload">
      <h2 id="upload-h">Upload a report</h2>
      {/* Dropping is a shortcut for the mouse; the "Choose a file" control below does the same by keyboard. */}
      {/* biome-ignore lint/a11y/noStaticElementInteractions: a drop target, with a keyboard-reachable file input inside */}
      <div
        className={over ? "dropzone over" : "dropzone"}
        onDragOver={(e) => {
          e.preventDefault();
          setOver(true);
        }}
        onDragLeave={() => setOver(false)}
        onDrop={onDrop}
        data-testid="import-dropzone"
      >
        <p>{file ? `${file.name} (${kib(file.size)})` : "Drop a report file here, or"}</p>
        <label htmlFor={`${ids}-file`} className="button-link">
          Choose a file
        </label>
        <input
          id={`${ids}-file`}
          ref={input}
          type="file"
          className="sr-only"
          accept=".csv,.tsv,.txt,text/csv,text/tab-separated-values"
          onChange={(e) => pick(e.target.files)}
          data-testid="import-file"
        />
      </div>
      <div className="filters">
        <div>
          <label htmlFor={`${ids}-format`}>Format</label>
          <select
            id={`${ids}-format`}
            value={format}
            onChange={(e) => setFormat(e.target.value)}
            data-testid="import-format"
          >
            {IMPORT_FORMATS.map((f) => (
              <option key={f.name} value={f.name}>
                {f.label}
              </option>
            ))}
          </select>
        </div>
        <div>
          <label htmlFor={`${ids}-period`}>Period (YYYY-MM, optional)</label>
          <input
            id={`${ids}-period`}
            value={period}
            pattern="\d{4}-\d{2}"
            onChange={(e) => setPeriod(e.target.value)}
            data-testid="import-period"
          />
        </div>
        <div>
          <label htmlFor={`${ids}-store`}>Store</label>
          <select
            id={`${ids}-store`}
            value={store}
            onChange={(e) => setStore(e.target.value)}
            data-testid="import-store"
          >
            <option value="">From the file (each line's store, or a DSR's sender)</option>
            {(stores.data?.data ?? []).map((s) => (
              <option key={s.code} value={s.code}>
                {s.name ? `${s.name} (${s.code})` : s.code}
              </option>
            ))}
          </select>
        </div>
      </div>
      <button
        type="submit"
        className="primary"
        disabled={!file || progress !== null}
        data-testid="import-submit"
      >
        Import
      </button>
      {progress ? (
        <div role="status" aria-live="polite" data-testid="import-progress">
          {!progress.done ? (
            <>
              <label htmlFor={`${ids}-p`}>
                Uploading: {kib(progress.sent)} of {kib(progress.total)} ({pct}%)
              </label>
              <progress
                id={`${ids}-p`}
                max={progress.total}
                value={progress.sent}
                data-testid="import-progress-bytes"
              />
            </>
          ) : (
            <>
              <label htmlFor={`${ids}-p`}>
                Importing: {lines === null ? "reading lines…" : `${lines.toLocaleString()} lines so far`}
              </label>
              <progress id={`${ids}-p`} data-testid="import-progress-lines" />
            </>
          )}
          <button type="button" onClick={() => abort.current?.abort()} data-testid="import-cancel">
            Cancel
          </button>
        </div>
      ) : null}
      {error ? (
        <div className="error-state" role="alert" data-testid="import-error">
          <strong>{describeError(error).title}</strong>
          <p>{describeError(error).detail}</p>
        </div>
      ) : null}
      {outcome ? (
        <div role="status" data-testid="import-result" data-status={String(outcome.body.status ?? "")}>
          <p>
            {outcome.body.status === "completed"
              ? "Imported."
              : outcome.body.status === "duplicate"
                ? "This report was imported before."
                : "The report was rejected."}{" "}
            {report ? (
              <button
                type="button"
                className="link"
                onClick={() => navigate(`/royalties/${report.id}`)}
                data-testid="import-result-open"
              >
                Open the report
              </button>
            ) : null}
          </p>
        </div>
      ) : null}
    </form>
  );
}
