import { useQuery, useQueryClient } from "@tanstack/react-query";
import { useId, useState } from "react";
import { TableWrap } from "../../../ui-shared/common.tsx";
import { Link } from "../../../ui-shared/router.tsx";
import { type Account, canEdit, PlainError } from "../api/portal.ts";
import { call, failure } from "../api/public.ts";
import { FormError, Page } from "../ui.tsx";

/**
 * Bringing a catalogue (docs/catalogue.md, docs/public-api.md "Transfers"): the label uploads its
 * CSV (or one ERN message) to a transfer upload slot, the dry run's report says what would be
 * created, what is already there and every problem with its row; then the label starts the import,
 * which runs as a job, and sees its result. The same file twice changes nothing.
 */

interface TransferCounts {
  releases_created: number;
  releases_existing: number;
  releases_with_problems: number;
  tracks_created: number;
  tracks_existing: number;
  tracks_with_problems: number;
  artists_created: number;
  errors: number;
  warnings: number;
  problems: number;
}

interface Transfer {
  id: string;
  status: "queued" | "running" | "completed" | "failed";
  dry_run: boolean;
  source_format: "csv" | "ern";
  filename: string | null;
  upload_id: string | null;
  counts: TransferCounts | null;
  problems: { where: string; code: string; message: string; severity: "error" | "warning" }[];
  created_at: string;
  completed_at: string | null;
}

interface Slot {
  upload_id: string;
  upload_url: string;
  method: "PUT";
  headers: Record<string, string>;
  max_bytes: number;
}

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls the transfer until it has run. */
async function finished(accountId: string, id: string): Promise<Transfer> {
  for (let delay = 250; ; delay = Math.min(delay * 1.5, 2000)) {
    const t = await call<Transfer>(accountId, "GET", `/transfers/${id}`);
    if (t.status === "completed" || t.status === "failed") return t;
    await wait(delay);
  }
}

async function uploadFile(accountId: string, file: File): Promise<string> {
  const slot = await call<Slot>(accountId, "POST", "/transfer-uploads", {
    filename: file.name,
    content_type: /\.zip$/i.test(file.name)
      ? "application/zip"
      : /\.xml$/i.test(file.name)
        ? "application/xml"
        : "text/csv",
    size: file.size,
  });
  let response: Response;
  try {
    response = await fetch(slot.upload_url, { method: slot.method, headers: slot.headers, body: file });
  } catch {
    throw new PlainError("The upload was cut off. Check your connection and try again.", { code: "network" });
  }
  if (!response.ok) throw failure(response.status, await response.json().catch(() => undefined));
  return slot.upload_id;
}

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

function Report({ transfer }: { transfer: Transfer }) {
  const c = transfer.counts;
  const dry = transfer.dry_run;
  return (
    <div data-testid={dry ? "transfer-dry-report" : "transfer-report"} data-status={transfer.status}>
      {transfer.status === "failed" ? (
        <p data-testid="transfer-failed">The file could not be read as a catalogue: nothing was imported.</p>
      ) : c ? (
        <TableWrap label={dry ? "What the import would do" : "What the import did"}>
          <table data-testid="transfer-counts">
            <caption className="sr-only">{dry ? "What the import would do" : "What the import did"}</caption>
            <thead>
              <tr>
                <th scope="col">
                  <span className="sr-only">What</span>
                </th>
                <th scope="col">{dry ? "To create" : "Created"}</th>
                <th scope="col">Already there</th>
                <th scope="col">Left out</th>
              </tr>
            </thead>
            <tbody>
              <tr data-testid="transfer-releases">
                <th scope="row">Releases</th>
                <td data-testid="releases-created">{c.releases_created}</td>
                <td data-testid="releases-existing">{c.releases_existing}</td>
                <td data-testid="releases-problems">{c.releases_with_problems}</td>
              </tr>
              <tr data-testid="transfer-tracks">
                <th scope="row">Tracks</th>
                <td data-testid="tracks-created">{c.tracks_created}</td>
                <td data-testid="tracks-existing">{c.tracks_existing}</td>
                <td data-testid="tracks-problems">{c.tracks_with_problems}</td>
              </tr>
            </tbody>
          </table>
        </TableWrap>
      ) : null}
      {transfer.problems.length > 0 ? (
        <>
          <h2>
            {c
              ? `${plural(c.errors, "error")}, ${plural(c.warnings, "warning")}`
              : plural(transfer.problems.length, "problem")}
            {c && c.problems > transfer.problems.length
              ? ` (the first ${transfer.problems.length} shown)`
              : ""}
          </h2>
          <ul className="problems" data-testid="transfer-problems">
            {transfer.problems.map((p, i) => (
              <li
                // biome-ignore lint/suspicious/noArrayIndexKey: the list is the server's, in its order
                key={i}
                data-testid="transfer-problem"
                data-code={p.code}
                data-severity={p.severity}
              >
                <strong>{p.severity === "error" ? "Error" : "Warning"}</strong> at {p.where}: {p.message}
              </li>
            ))}
          </ul>
        </>
      ) : (
        <p data-testid="transfer-no-problems">No problems found.</p>
      )}
    </div>
  );
}

export function TransferPage({ account }: { account: Account }) {
  const client = useQueryClient();
  const inputId = useId();
  const [uploadId, setUploadId] = useState<string | null>(null);
  const [dry, setDry] = useState<Transfer | null>(null);
  const [real, setReal] = useState<Transfer | null>(null);
  const [busy, setBusy] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const history = useQuery({
    queryKey: ["transfers", account.id],
    queryFn: () => call<{ data: Transfer[] }>(account.id, "GET", "/transfers?limit=10"),
  });

  if (!canEdit(account.role))
    return (
      <Page title="Bring your catalogue" testid="page-transfer">
        <p data-testid="transfer-refused">
          Your role in {account.name} lets you read its releases, not import them. Ask an owner or admin of
          the account.
        </p>
        <Link to="/releases">Back to the releases</Link>
      </Page>
    );

  const check = async (file: File) => {
    setError(null);
    setDry(null);
    setReal(null);
    setUploadId(null);
    try {
      setBusy("Uploading the file…");
      const id = await uploadFile(account.id, file);
      setUploadId(id);
      setBusy("Checking the catalogue (nothing is written yet)…");
      const queued = await call<Transfer>(account.id, "POST", "/transfers", { upload_id: id, dry_run: true });
      setDry(await finished(account.id, queued.id));
    } catch (e) {
      setError(e);
    } finally {
      setBusy(null);
      void client.invalidateQueries({ queryKey: ["transfers", account.id] });
    }
  };

  const start = async () => {
    if (!uploadId) return;
    setError(null);
    try {
      setBusy("Importing…");
      const queued = await call<Transfer>(account.id, "POST", "/transfers", { upload_id: uploadId });
      setReal(await finished(account.id, queued.id));
      void client.invalidateQueries({ queryKey: ["releases"] });
    } catch (e) {
      setError(e);
    } finally {
      setBusy(null);
      void client.invalidateQueries({ queryKey: ["transfers", account.id] });
    }
  };

  const creates = dry?.counts ? dry.counts.releases_created + dry.counts.tracks_created : 0;
  return (
    <Page title="Bring your catalogue" testid="page-transfer">
      <p>
        Moving from another distributor? Upload your catalogue as the CSV template (one row per track), one
        DDEX ERN message, or a .zip of your previous distributor's ERN delivery with its audio and artwork (at
        most 2 GB an archive: a larger catalogue goes in several). Releases keep their UPCs, ISRCs and
        original release dates, so stores match them to what they already have. First you see what would
        happen; nothing is written until you start the import. Releases arrive as drafts you submit when
        ready.
      </p>
      <div className="field">
        <label htmlFor={inputId}>Catalogue file (.csv, .xml or .zip)</label>
        <input
          id={inputId}
          type="file"
          accept=".csv,.xml,.zip,text/csv,application/xml,application/zip"
          disabled={busy !== null}
          data-testid="transfer-input"
          onChange={(e) => {
            const file = e.target.files?.[0];
            e.target.value = "";
            if (file) void check(file);
          }}
        />
      </div>
      {busy ? (
        <p role="status" data-testid="transfer-busy">
          {busy}
        </p>
      ) : null}
      <FormError error={error} testid="transfer-error" />
      {dry && !real ? (
        <section aria-label="Dry run" data-testid="transfer-dry">
          <Report transfer={dry} />
          {dry.status === "completed" && creates > 0 ? (
            <div className="buttons">
              <button
                type="button"
                onClick={() => void start()}
                disabled={busy !== null}
                data-testid="transfer-start"
              >
                Import {plural(dry.counts?.releases_created ?? 0, "release")} and{" "}
                {plural(dry.counts?.tracks_created ?? 0, "track")}
              </button>
            </div>
          ) : dry.status === "completed" ? (
            <p data-testid="transfer-nothing">
              Nothing to import: everything is already there or has a problem.
            </p>
          ) : null}
        </section>
      ) : null}
      {real ? (
        <section aria-label="Import" data-testid="transfer-done">
          <Report transfer={real} />
          <p>
            <Link to="/releases">See the releases</Link>
          </p>
        </section>
      ) : null}
      {history.data && history.data.data.length > 0 ? (
        <>
          <h2>Earlier transfers</h2>
          <ul data-testid="transfer-history">
            {history.data.data.map((t) => (
              <li key={t.id} data-testid="transfer-history-item">
                {t.filename ?? "file"} — {t.dry_run ? "check" : "import"}, {t.status}
                {t.counts
                  ? `: ${plural(t.counts.releases_created, "release")} ${t.dry_run ? "to create" : "created"}`
                  : ""}
              </li>
            ))}
          </ul>
        </>
      ) : null}
    </Page>
  );
}
