import { useQuery } from "@tanstack/react-query";
import { Empty, Loading, Status, TableWrap, When } from "../../../ui-shared/common.tsx";
import { Link } from "../../../ui-shared/router.tsx";
import { type Account, canEdit } from "../api/portal.ts";
import { ErrorState, Page } from "../ui.tsx";
import { AddOns } from "./release/AddOns.tsx";
import { AfterDelivery } from "./release/AfterDelivery.tsx";
import { Details } from "./release/Details.tsx";
import { apiReleaseQuery, problemsQuery, releaseQuery, rulesQuery } from "./release/queries.ts";
import { SubmitPanel } from "./release/Submit.tsx";
import { Timeline } from "./release/Timeline.tsx";
import { Tracks } from "./release/Tracks.tsx";
import { UploadControl } from "./release/Upload.tsx";

/** Statuses in which a release is still edited by its account (after them, corrections only). */
const EDITABLE = new Set(["draft", "pending", "rejected"]);
/** Statuses of a release that went to the stores: the stores report its sales. */
const SOLD = new Set(["delivered", "live", "takedown_requested", "taken_down"]);

function duration(seconds: number | null): string {
  if (!seconds) return "—";
  return `${Math.floor(seconds / 60)}:${String(seconds % 60).padStart(2, "0")}`;
}

/**
 * The editor of a release its account still edits: details saved as typed, the cover and each
 * track's audio with their checks' verdicts, tracks with splits, the completeness list and submit.
 */
function Editor({ account, id, title }: { account: Account; id: string; title: string }) {
  const rules = useQuery(rulesQuery(account.id));
  const release = useQuery(apiReleaseQuery(account.id, id));
  // Asked now, beside the rest, though only the submit panel below shows it.
  useQuery(problemsQuery(account.id, id));
  const back = <Link to="/releases">← All releases</Link>;
  if (rules.isPending || release.isPending)
    return (
      <Page title={title} testid="page-release">
        <Loading />
      </Page>
    );
  if (rules.isError || release.isError)
    return (
      <Page title={title} testid="page-release">
        <ErrorState
          error={rules.error ?? release.error}
          onRetry={() => {
            void rules.refetch();
            void release.refetch();
          }}
        />
        {back}
      </Page>
    );
  const r = release.data;
  return (
    <Page title={r.title} testid="page-release" actions={back}>
      <p className="lede" data-testid="release-editing">
        <Status value={r.status} />
        <span>
          {r.artist_name ? `By ${r.artist_name}. ` : ""}A draft of {account.name}: nothing reaches the stores
          until you submit it.
        </span>
      </p>
      {r.status === "rejected" ? <Timeline accountId={account.id} releaseId={id} /> : null}
      <Details accountId={account.id} release={r} rules={rules.data} />
      <section className="card" aria-labelledby="cover-heading" data-testid="release-cover">
        <h2 id="cover-heading">Cover</h2>
        <UploadControl
          accountId={account.id}
          releaseId={id}
          current={r.artwork}
          label="Cover image"
          hint="Square, at least 3000 × 3000 pixels, JPEG or PNG, RGB. No web addresses, prices or blurry text."
          accept="image/jpeg,image/png"
          id="f-artwork"
          testid="cover"
          onChecked={() => void release.refetch()}
        />
      </section>
      <Tracks accountId={account.id} release={r} editable />
      <AddOns accountId={account.id} accountName={account.name} releaseId={id} canBuy />
      <SubmitPanel accountId={account.id} releaseId={id} />
    </Page>
  );
}

/**
 * One release. Its account's members who may edit get the editor while it is a draft, pending or
 * rejected; everyone else (a viewer, a submitted release) reads it, with its progress per store.
 * Row security decides whether it shows at all.
 */
export function ReleasePage({ id, account }: { id: string; account: Account | undefined }) {
  const release = useQuery(releaseQuery(id));
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
  const own = account && account.id === r.account_id;
  if (own && canEdit(account.role) && EDITABLE.has(r.status))
    return <Editor key={r.status} account={account} id={id} title={r.title} />;
  return (
    <Page title={r.title} testid="page-release" actions={back}>
      {own && !EDITABLE.has(r.status) ? <Timeline accountId={account.id} releaseId={id} /> : null}
      {own && canEdit(account.role) && (r.status === "delivered" || r.status === "live") ? (
        <AfterDelivery accountId={account.id} release={r} />
      ) : null}
      {own ? (
        <AddOns
          accountId={account.id}
          accountName={account.name}
          releaseId={id}
          canBuy={canEdit(account.role)}
        />
      ) : null}
      {own && SOLD.has(r.status) ? (
        <p>
          <Link to={`/royalties?release=${id}`} data-testid="release-royalties">
            Royalties of this release
          </Link>
        </p>
      ) : null}
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
