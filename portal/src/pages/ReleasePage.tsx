import { useQuery } from "@tanstack/react-query";
import { Empty, Loading, Status, TableWrap, When } from "../../../ui-shared/common.tsx";
import { Link } from "../../../ui-shared/router.tsx";
import { type Account, getRelease } from "../api/portal.ts";
import { ErrorState, Page } from "../ui.tsx";

function duration(seconds: number | null): string {
  if (!seconds) return "—";
  return `${Math.floor(seconds / 60)}:${String(seconds % 60).padStart(2, "0")}`;
}

/** One release, read-only: its status, what it is, its tracks. Row security decides if it shows. */
export function ReleasePage({ id }: { id: string; account: Account | undefined }) {
  const release = useQuery({ queryKey: ["release", id], queryFn: () => getRelease(id) });
  const back = <Link to="/releases">← All releases</Link>;
  if (release.isPending)
    return (
      <Page title="Release" testid="page-release">
        <Loading />
      </Page>
    );
  if (release.isError)
    return (
      <Page title="Release" testid="page-release">
        <ErrorState error={release.error} onRetry={() => release.refetch()} />
        {back}
      </Page>
    );
  const r = release.data;
  if (!r)
    return (
      <Page title="Release not found" testid="page-release">
        <p data-testid="release-not-found">
          There is no such release in your accounts: it may have been deleted, or it belongs to an account you
          are not a member of.
        </p>
        {back}
      </Page>
    );
  return (
    <Page title={r.title} testid="page-release" actions={back}>
      <dl className="facts" data-testid="release-facts">
        <div>
          <dt>Status</dt>
          <dd>
            <Status value={r.status} />
            {r.status_reason ? <span className="reason"> {r.status_reason}</span> : null}
          </dd>
        </div>
        <div>
          <dt>Artist</dt>
          <dd>{r.artist_profiles?.name ?? r.artist_name ?? "—"}</dd>
        </div>
        <div>
          <dt>Type</dt>
          <dd>{r.release_type}</dd>
        </div>
        <div>
          <dt>Release date</dt>
          <dd>{r.release_date ?? "not set"}</dd>
        </div>
        <div>
          <dt>Label</dt>
          <dd>{r.label_name ?? "—"}</dd>
        </div>
        <div>
          <dt>Genre</dt>
          <dd>{r.primary_genre ?? "—"}</dd>
        </div>
        <div>
          <dt>UPC</dt>
          <dd>{r.upc ?? "—"}</dd>
        </div>
        <div>
          <dt>Last changed</dt>
          <dd>
            <When at={r.updated_at} />
          </dd>
        </div>
      </dl>
      <h2>Tracks</h2>
      {r.tracks.length === 0 ? (
        <Empty>
          <span data-testid="tracks-empty">No tracks yet.</span>
        </Empty>
      ) : (
        <TableWrap label="Tracks">
          <table data-testid="release-tracks">
            <thead>
              <tr>
                <th scope="col">#</th>
                <th scope="col">Title</th>
                <th scope="col">ISRC</th>
                <th scope="col">Length</th>
              </tr>
            </thead>
            <tbody>
              {r.tracks.map((t) => (
                <tr key={t.id} data-testid="release-track">
                  <td>
                    {t.disc_number && t.disc_number > 1 ? `${t.disc_number}-` : ""}
                    {t.track_number ?? ""}
                  </td>
                  <td>
                    {t.title}
                    {t.version ? ` (${t.version})` : ""}
                  </td>
                  <td>{t.isrc ?? "—"}</td>
                  <td>{duration(t.duration)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      )}
    </Page>
  );
}
