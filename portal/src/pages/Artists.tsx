import { useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useState } from "react";
import { Empty, Loading, Status, TableWrap, When } from "../../../ui-shared/common.tsx";
import { Link } from "../../../ui-shared/router.tsx";
import { type Account, canEdit, PlainError } from "../api/portal.ts";
import {
  type ApiArtist,
  getArtist,
  getOacRequest,
  listArtists,
  patchArtist,
  requestOac,
} from "../api/public.ts";
import { ErrorState, errorFor, Field, FormError, Notice, Page } from "../ui.tsx";

/** The stores whose artist ids an artist's page asks for (any store code can be set through the API). */
const STORE_IDS: [string, string, string][] = [
  [
    "spotify",
    "Spotify artist id",
    "The part after /artist/ in the artist's Spotify link, such as 4Z8W4fKeB5YxbusRsdQVPb.",
  ],
  ["apple_music", "Apple Music artist id", "The number at the end of the artist's Apple Music link."],
  ["deezer", "Deezer artist id", "The number at the end of the artist's Deezer link."],
  ["amazon_music", "Amazon Music artist id", "Such as B000QJPVW2."],
  ["youtube_music", "YouTube channel id", "Such as UCxxxxxxxxxxxxxxxxxxxxxx."],
];

/** The account's artists, by name. */
export function Artists({ account }: { account: Account }) {
  const artists = useQuery({ queryKey: ["artists", account.id], queryFn: () => listArtists(account.id) });
  return (
    <Page title="Artists" testid="page-artists">
      {artists.isPending ? <Loading /> : null}
      {artists.isError ? <ErrorState error={artists.error} onRetry={() => artists.refetch()} /> : null}
      {artists.data && artists.data.data.length === 0 ? (
        <Empty>
          <span data-testid="artists-empty">
            No artists yet: an artist is added with their first release (
            <Link to="/releases/new">New release</Link>).
          </span>
        </Empty>
      ) : null}
      {artists.data && artists.data.data.length > 0 ? (
        <TableWrap label="Artists">
          <table data-testid="artists">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Ids at the stores</th>
                <th scope="col">Last changed</th>
              </tr>
            </thead>
            <tbody>
              {artists.data.data.map((a) => (
                <tr key={a.id} data-testid="artist-row">
                  <th scope="row">
                    <Link to={`/artists/${a.id}`}>{a.name}</Link>
                  </th>
                  <td>{Object.keys(a.store_ids).length || "none yet"}</td>
                  <td>
                    <When at={a.updated_at} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      ) : null}
    </Page>
  );
}

function StoreIds({ account, artist }: { account: Account; artist: ApiArtist }) {
  const client = useQueryClient();
  const [ids, setIds] = useState<Record<string, string>>(() => ({ ...artist.store_ids }));
  const [error, setError] = useState<unknown>(null);
  const [saved, setSaved] = useState(false);
  const [busy, setBusy] = useState(false);
  const editable = canEdit(account.role);
  const save = async (e: FormEvent) => {
    e.preventDefault();
    setError(null);
    setSaved(false);
    const store_ids = Object.fromEntries(
      Object.entries(ids)
        .map(([k, v]) => [k, v.trim()])
        .filter(([, v]) => v),
    );
    setBusy(true);
    try {
      await patchArtist(account.id, artist.id, { store_ids });
      setSaved(true);
      await client.invalidateQueries({ queryKey: ["artist", artist.id] });
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section className="card" aria-labelledby="ids-heading" data-testid="artist-store-ids">
      <h2 id="ids-heading">Ids at the stores</h2>
      <p className="hint">
        With the artist's id, a store puts a new release on the artist's existing page instead of making a new
        artist of the same name. Leave a field empty for an artist the store does not know yet.
      </p>
      <form className="form" onSubmit={save} noValidate aria-label="Ids at the stores">
        {STORE_IDS.map(([code, label, hint]) => (
          <Field
            key={code}
            label={label}
            hint={hint}
            value={ids[code] ?? ""}
            readOnly={!editable}
            onChange={(e) => setIds((v) => ({ ...v, [code]: e.target.value }))}
            error={errorFor(error, `store_ids.${code}`)}
            testid={`artist-id-${code}`}
          />
        ))}
        <FormError
          error={error}
          testid="artist-ids-error"
          shown={STORE_IDS.map(([code]) => `store_ids.${code}`)}
        />
        {saved ? <Notice testid="artist-ids-saved">Saved: the next delivery carries them.</Notice> : null}
        {editable ? (
          <div className="buttons">
            <button type="submit" disabled={busy} data-testid="artist-ids-save">
              Save the ids
            </button>
          </div>
        ) : null}
      </form>
    </section>
  );
}

const OAC_STATUS: Record<string, string> = {
  requested: "Requested: the platform sends it to YouTube",
  processing: "With YouTube",
  approved: "Approved: the channel is official",
  rejected: "Refused",
  cancelled: "Cancelled",
};

/** The artist's Official Artist Channel on YouTube Music: its request, or the form to ask. */
function ArtistChannel({ account, artist }: { account: Account; artist: ApiArtist }) {
  const client = useQueryClient();
  const request = useQuery({
    queryKey: ["oac", artist.id],
    queryFn: () => getOacRequest(account.id, artist.id),
  });
  const [url, setUrl] = useState("");
  const [note, setNote] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const ask = async (e: FormEvent) => {
    e.preventDefault();
    setError(null);
    if (url.trim() && !/^https:\/\/\S+$/.test(url.trim())) {
      setError(
        new PlainError("Enter the channel's address as it shows in the browser, starting with https://.", {
          field: "channel_url",
        }),
      );
      return;
    }
    setBusy(true);
    try {
      await requestOac(account.id, artist.id, {
        ...(url.trim() ? { channel_url: url.trim() } : {}),
        ...(note.trim() ? { note: note.trim() } : {}),
      });
      await client.invalidateQueries({ queryKey: ["oac", artist.id] });
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const r = request.data;
  const open = r && (r.status === "requested" || r.status === "processing" || r.status === "approved");
  return (
    <section className="card" aria-labelledby="oac-heading" data-testid="artist-oac">
      <h2 id="oac-heading">Official Artist Channel</h2>
      <p className="hint">
        YouTube Music merges the artist's channels into one official channel, once the artist has a release in
        the stores.
      </p>
      {request.isPending ? <Loading /> : null}
      {request.isError ? <ErrorState error={request.error} onRetry={() => request.refetch()} /> : null}
      {r ? (
        <p data-testid="oac-status" data-status={r.status}>
          <Status value={r.status} /> {OAC_STATUS[r.status] ?? r.status}, asked <When at={r.created_at} />
          {r.status_reason ? `: ${r.status_reason}` : "."}
        </p>
      ) : null}
      {request.data !== undefined && !open && canEdit(account.role) ? (
        <form className="form" onSubmit={ask} noValidate aria-label="Ask for an Official Artist Channel">
          <Field
            label="The artist's YouTube channel (optional)"
            hint="Its address, such as https://www.youtube.com/@artist, to be merged into the official one."
            type="url"
            value={url}
            onChange={(e) => setUrl(e.target.value)}
            error={errorFor(error, "channel_url")}
            testid="oac-channel"
          />
          <Field
            label="A note for the platform (optional)"
            value={note}
            onChange={(e) => setNote(e.target.value)}
            error={errorFor(error, "note")}
            testid="oac-note"
          />
          <FormError error={error} testid="oac-error" />
          <div className="buttons">
            <button type="submit" disabled={busy} data-testid="oac-request">
              Ask for the official channel
            </button>
          </div>
        </form>
      ) : null}
    </section>
  );
}

/** One artist: the ids at the stores, the official channel. */
export function ArtistPage({ account, id }: { account: Account; id: string }) {
  const artist = useQuery({ queryKey: ["artist", id], queryFn: () => getArtist(account.id, id) });
  const back = <Link to="/artists">← All artists</Link>;
  if (artist.isPending)
    return (
      <Page title="Artist" testid="page-artist">
        <Loading />
      </Page>
    );
  if (artist.isError)
    return (
      <Page title="Artist" testid="page-artist">
        <ErrorState error={artist.error} onRetry={() => artist.refetch()} />
        {back}
      </Page>
    );
  return (
    <Page title={artist.data.name} testid="page-artist" actions={back}>
      <StoreIds account={account} artist={artist.data} />
      <ArtistChannel account={account} artist={artist.data} />
    </Page>
  );
}
