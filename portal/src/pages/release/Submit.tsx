import { useQuery, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { Loading } from "../../../../ui-shared/common.tsx";
import { PlainError } from "../../api/portal.ts";
import { plainProblem, submitRelease } from "../../api/public.ts";
import { ErrorState } from "../../ui.tsx";
import { fieldId, goToField } from "./fields.ts";
import { problemsQuery } from "./queries.ts";

/**
 * The completeness list submit applies (GET /releases/{id}/problems), every problem at once,
 * each a link to its field; the submit button once nothing is missing.
 */
export function SubmitPanel({ accountId, releaseId }: { accountId: string; releaseId: string }) {
  const client = useQueryClient();
  const problems = useQuery(problemsQuery(accountId, releaseId));
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const submit = async () => {
    setBusy(true);
    setError(null);
    try {
      await submitRelease(accountId, releaseId);
      await Promise.all([
        client.invalidateQueries({ queryKey: ["api-release", releaseId] }),
        client.invalidateQueries({ queryKey: ["release", releaseId] }),
        client.invalidateQueries({ queryKey: ["releases"] }),
      ]);
    } catch (e) {
      setError(e);
      // The list said ready but submit found more (a file checked meanwhile, a date passed).
      void problems.refetch();
    } finally {
      setBusy(false);
    }
  };
  const list = problems.data?.errors ?? [];
  return (
    <section className="card" aria-labelledby="submit-heading" data-testid="release-submit">
      <h2 id="submit-heading">Before you submit</h2>
      {problems.isPending ? <Loading what="Checking the release" /> : null}
      {problems.isError ? <ErrorState error={problems.error} onRetry={() => problems.refetch()} /> : null}
      {problems.data && list.length > 0 ? (
        <>
          <p data-testid="problems-count">
            {list.length === 1 ? "One thing is" : `${list.length} things are`} still needed before the release
            can be submitted:
          </p>
          <ul className="problems" data-testid="problems">
            {list.map((p) => (
              <li key={`${p.param}:${p.code}`} data-testid="problem" data-param={p.param} data-code={p.code}>
                <a
                  href={`#${fieldId(p.param)}`}
                  onClick={(e) => {
                    e.preventDefault();
                    goToField(p.param);
                  }}
                >
                  {plainProblem(p)}
                </a>
              </li>
            ))}
          </ul>
        </>
      ) : null}
      {problems.data && list.length === 0 ? (
        <p className="good" data-testid="problems-none">
          Everything the stores need is here. Once you submit, the release is reviewed and then delivered to
          the stores; you can follow each step on this page.
        </p>
      ) : null}
      {error ? (
        <p className="form-error" role="alert" data-testid="submit-error">
          {error instanceof PlainError ? error.message : "The release could not be submitted. Try again."}
        </p>
      ) : null}
      <div className="buttons">
        <button
          type="button"
          onClick={submit}
          disabled={busy || !problems.data?.ready}
          data-testid="release-submit-button"
        >
          {busy ? "Submitting…" : "Submit for review"}
        </button>
      </div>
    </section>
  );
}
