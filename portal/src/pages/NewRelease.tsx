import { useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useState } from "react";
import { Link, navigate } from "../../../ui-shared/router.tsx";
import { type Account, canEdit, createDraftRelease } from "../api/portal.ts";
import { errorFor, Field, FormError, Page } from "../ui.tsx";

/** The first write: a draft release with a title and its artist (found by name, or created). */
export function NewRelease({ account }: { account: Account | undefined }) {
  const client = useQueryClient();
  const [title, setTitle] = useState("");
  const [artist, setArtist] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  if (!account || !canEdit(account.role))
    return (
      <Page title="New release" testid="page-new-release">
        <p data-testid="new-release-refused">
          Your role in {account?.name ?? "this account"} lets you read its releases, not add them. Ask an
          owner or admin of the account for the member role.
        </p>
        <Link to="/releases">Back to the releases</Link>
      </Page>
    );
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const id = await createDraftRelease(account.id, title, artist);
      await client.invalidateQueries({ queryKey: ["releases"] });
      navigate(`/releases/${id}`);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <Page title="New release" testid="page-new-release" narrow>
      <p>A draft in {account.name}: nothing is sent to the stores until you submit it.</p>
      <form onSubmit={submit} noValidate className="form" aria-label="New release">
        <Field
          label="Title"
          value={title}
          onChange={(e) => setTitle(e.target.value)}
          error={errorFor(error, "title")}
          testid="release-title"
        />
        <Field
          label="Artist"
          hint="The name the stores show. An artist of this account with this name is used, or a new one is made."
          value={artist}
          onChange={(e) => setArtist(e.target.value)}
          error={errorFor(error, "artist")}
          testid="release-artist"
        />
        <FormError error={error} testid="release-error" />
        <div className="buttons">
          <button type="submit" disabled={busy} data-testid="release-create">
            Create draft
          </button>
          <Link to="/releases">Cancel</Link>
        </div>
      </form>
    </Page>
  );
}
