import { useQuery, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { Empty, Loading, When } from "../../../ui-shared/common.tsx";
import { Link } from "../../../ui-shared/router.tsx";
import { listNotifications, markNotificationsRead, type NotificationRow } from "../api/portal.ts";
import { ErrorState, FormError, Page } from "../ui.tsx";

/** How often the count in the header and this list are asked again while the page is open. */
export const NOTIFICATIONS_EVERY_MS = 30_000;

export const unreadQuery = ["notifications", "unread"] as const;

/** The member's notifications, newest first: unread ones marked, each read by a click, or all. */
export function Notifications() {
  const client = useQueryClient();
  const list = useQuery({
    queryKey: ["notifications", "list"],
    queryFn: () => listNotifications(),
    refetchInterval: NOTIFICATIONS_EVERY_MS,
  });
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const mark = async (ids: string[] | "all") => {
    setBusy(true);
    setError(null);
    try {
      await markNotificationsRead(ids);
      await client.invalidateQueries({ queryKey: ["notifications"] });
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const rows = list.data ?? [];
  const unread = rows.filter((n) => !n.read).length;
  return (
    <Page
      title="Notifications"
      testid="page-notifications"
      actions={
        unread > 0 ? (
          <button
            type="button"
            className="secondary"
            disabled={busy}
            onClick={() => mark("all")}
            data-testid="mark-all-read"
          >
            Mark all as read
          </button>
        ) : null
      }
    >
      <FormError error={error} testid="notifications-error" />
      {list.isPending ? <Loading /> : null}
      {list.isError ? <ErrorState error={list.error} onRetry={() => list.refetch()} /> : null}
      {list.data && rows.length === 0 ? (
        <Empty>
          <span data-testid="notifications-empty">
            Nothing yet. When a release is approved, goes live in a store or is taken down, you are told here.
          </span>
        </Empty>
      ) : null}
      {rows.length > 0 ? (
        <ul className="notifications" data-testid="notifications">
          {rows.map((n) => (
            <NotificationItem key={n.id} n={n} busy={busy} onRead={() => mark([n.id])} />
          ))}
        </ul>
      ) : null}
    </Page>
  );
}

function NotificationItem({ n, busy, onRead }: { n: NotificationRow; busy: boolean; onRead: () => void }) {
  return (
    <li
      className={n.read ? "notification" : "notification unread"}
      data-testid="notification"
      data-read={String(n.read)}
    >
      <p className="notification-title">
        {n.read ? null : <span className="sr-only">Unread: </span>}
        <strong>{n.title}</strong> <When at={n.created_at} />
      </p>
      {n.body ? <p>{n.body}</p> : null}
      <div className="buttons">
        {n.data.release_id ? (
          <Link to={`/releases/${n.data.release_id}`} onClick={() => (n.read ? undefined : onRead())}>
            Open the release
          </Link>
        ) : null}
        {n.read ? null : (
          <button
            type="button"
            className="secondary"
            disabled={busy}
            onClick={onRead}
            data-testid="mark-read"
          >
            Mark as read
          </button>
        )}
      </div>
    </li>
  );
}
