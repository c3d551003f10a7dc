import { type QueryClient, useQuery } from "@tanstack/react-query";
import { lazy, type ReactNode, Suspense, useEffect, useState, useSyncExternalStore } from "react";
import { Loading } from "../../ui-shared/common.tsx";
import { Link, match, navigate, useLocation } from "../../ui-shared/router.tsx";
import {
  type Account,
  canEdit,
  myAccounts,
  type PortalTenant,
  rememberAccount,
  rememberedAccount,
  session,
  signOut,
  unreadNotifications,
} from "./api/portal.ts";
import { owedByAnyone } from "./api/public.ts";
import { ArtistPage, Artists } from "./pages/Artists.tsx";
import { AuthCallback } from "./pages/AuthCallback.tsx";
import { canManage, Developers } from "./pages/Developers.tsx";
import { NewRelease } from "./pages/NewRelease.tsx";
import { NOTIFICATIONS_EVERY_MS, Notifications, unreadQuery } from "./pages/Notifications.tsx";
import { Profile } from "./pages/Profile.tsx";
import { ReleasePage } from "./pages/ReleasePage.tsx";
import { Releases } from "./pages/Releases.tsx";
import { ResetPassword } from "./pages/ResetPassword.tsx";
import { Royalties } from "./pages/Royalties.tsx";
import { prefetchPage } from "./pages/release/queries.ts";
import { SecondFactor } from "./pages/SecondFactor.tsx";
import { SetPassword } from "./pages/SetPassword.tsx";
import { SignIn } from "./pages/SignIn.tsx";
import { SignUp } from "./pages/SignUp.tsx";
import { Support, TicketPage } from "./pages/Support.tsx";
import { TransferPage } from "./pages/Transfer.tsx";
import { YourData } from "./pages/YourData.tsx";
import { ErrorState, Page } from "./ui.tsx";

// The money pages (statements, getting paid) load as a chunk of their own, when first opened.
const money = () => import("./pages/Money.tsx");
const Money = lazy(() => money().then((m) => ({ default: m.Money })));
const StatementPage = lazy(() => money().then((m) => ({ default: m.StatementPage })));

/** The address shows no tenant (GET /portal/tenant.json answered 404): a plain page, no app. */
export function NoPortal() {
  useEffect(() => {
    document.title = "No portal here";
  }, []);
  return (
    <main className="plain" data-testid="page-no-portal">
      <h1>There is no portal at this address</h1>
      <p>Check the address you were given, or ask the company that invited you for the right one.</p>
    </main>
  );
}

export function StartFailed({ error }: { error: unknown }) {
  return (
    <main className="plain" data-testid="page-start-failed">
      <h1>The portal could not start</h1>
      <p>{error instanceof Error ? error.message : "Reload the page in a moment."}</p>
    </main>
  );
}

function Brand({ tenant }: { tenant: PortalTenant }) {
  const { display_name, logo_url } = tenant.branding;
  const [logoFailed, setLogoFailed] = useState(false);
  return (
    <Link to="/" className="brand" data-testid="brand">
      {logo_url && !logoFailed ? (
        <img
          src={logo_url}
          alt=""
          className="logo"
          data-testid="brand-logo"
          onError={() => setLogoFailed(true)}
        />
      ) : null}
      <span data-testid="brand-name">{display_name}</span>
    </Link>
  );
}

/** The pages anyone may open signed out. */
function SignedOut({ tenant }: { tenant: PortalTenant }) {
  const { path } = useLocation();
  let page: ReactNode;
  if (path === "/sign-up") page = <SignUp tenant={tenant} />;
  else if (path === "/reset-password") page = <ResetPassword />;
  else page = <SignIn tenant={tenant} />;
  return (
    <>
      <header className="topbar">
        <Brand tenant={tenant} />
      </header>
      <main id="main" className="signed-out">
        {page}
      </main>
      <Footer tenant={tenant} />
    </>
  );
}

function Footer({ tenant }: { tenant: PortalTenant }) {
  const support = tenant.branding.support_email;
  return (
    <footer className="footer">
      {support ? (
        <p>
          Help: <a href={`mailto:${support}`}>{support}</a>
        </p>
      ) : null}
    </footer>
  );
}

export function App({ tenant }: { tenant: PortalTenant }) {
  const state = useSyncExternalStore(session.subscribe, session.get);
  const { path } = useLocation();
  // A mailed link lands here with the session (or what went wrong) in the fragment.
  if (path === "/auth/callback" || /(^#|&)(access_token|error_code|error)=/.test(location.hash))
    return (
      <>
        <header className="topbar">
          <Brand tenant={tenant} />
        </header>
        <main id="main" className="signed-out">
          <AuthCallback />
        </main>
      </>
    );
  if (!state.ready) return <Loading />;
  if (!state.session) return <SignedOut tenant={tenant} />;
  return <SignedIn tenant={tenant} email={state.session.user.email ?? ""} />;
}

/**
 * The header's way to the notifications, with the unread count: asked every 30 seconds while the
 * page is open, and again when the window comes back into focus (polling: docs/portal.md).
 */
function NotificationsLink({ current }: { current: boolean }) {
  const unread = useQuery({
    queryKey: unreadQuery,
    queryFn: unreadNotifications,
    refetchInterval: NOTIFICATIONS_EVERY_MS,
    refetchOnWindowFocus: true,
  });
  const n = unread.data ?? 0;
  return (
    <Link to="/notifications" data-testid="nav-notifications" aria-current={current ? "page" : undefined}>
      Notifications
      {n > 0 ? (
        <span className="badge" data-testid="unread-count" data-count={n}>
          <span className="sr-only">, unread: </span>
          {n > 99 ? "99+" : n}
        </span>
      ) : null}
    </Link>
  );
}

const accountsQuery = { queryKey: ["accounts"], queryFn: myAccounts };

/**
 * A member who is back (a session stored in this browser): the shell's accounts and the opened
 * page's own queries start at once (main.tsx), beside supabase-js reading the session and the
 * first render, not after them (docs/portal.md, bench/portal). Each waits for the session inside
 * supabase-js; a session that turns out to be over fails them quietly and the sign-in page shows.
 */
export function prefetchSignedIn(client: QueryClient, path: string): void {
  void client.prefetchQuery(accountsQuery);
  prefetchPage(client, path, rememberedAccount());
}

function SignedIn({ tenant, email }: { tenant: PortalTenant; email: string }) {
  const { path } = useLocation();
  const accounts = useQuery(accountsQuery);
  const list = accounts.data?.accounts ?? [];
  const [chosen, setChosen] = useState<string | null>(() => rememberedAccount());
  const current: Account | undefined = list.find((a) => a.id === chosen) ?? list[0];
  const [menuOpen, setMenuOpen] = useState(false);
  // Money is offered to whoever is owed some (a payee, of any account) and to an account's owners
  // and admins; a viewer or member who is owed nothing is not shown the way (docs/portal.md).
  const owed = useQuery({ queryKey: ["money", "owed"], queryFn: owedByAnyone, retry: 1 });
  const moneyShown = canManage(current) || owed.data === true;
  // biome-ignore lint/correctness/useExhaustiveDependencies: a page change closes the phone menu
  useEffect(() => setMenuOpen(false), [path]);

  // Where a mailed link or the sign-in lands: the releases.
  useEffect(() => {
    if (path === "/" || path === "/sign-in" || path === "/sign-up" || path === "/reset-password")
      navigate("/releases", { replace: true });
  }, [path]);

  const choose = (id: string) => {
    rememberAccount(id);
    setChosen(id);
    navigate("/releases");
  };

  let page: ReactNode;
  const release = match("/releases/:id", path);
  const artist = match("/artists/:id", path);
  const statement = match("/money/statements/:id", path);
  const draft = match("/money/payees/:id/draft", path);
  const ticket = match("/support/:id", path);
  if (path === "/welcome" || path === "/set-password")
    page = <SetPassword invited={path === "/welcome"} accounts={list} />;
  else if (path === "/profile") page = <Profile tenant={tenant} email={email} />;
  else if (accounts.isPending) page = <Loading />;
  else if (accounts.isError)
    page = (
      <Page title="Your accounts" testid="page-accounts-error">
        <ErrorState error={accounts.error} onRetry={() => accounts.refetch()} />
      </Page>
    );
  else if (current && !current.reachable)
    page = <SecondFactor account={current} onDone={() => accounts.refetch()} />;
  else if (path === "/releases" || path === "/") page = <Releases account={current} />;
  else if (path === "/releases/new") page = <NewRelease account={current} />;
  else if (path === "/notifications") page = <Notifications />;
  else if (path === "/your-data") page = <YourData account={current} />;
  else if (path === "/royalties" && current) page = <Royalties account={current} />;
  else if (path === "/money")
    page = (
      <Suspense fallback={<Loading />}>
        <Money account={current} accounts={list} email={email} />
      </Suspense>
    );
  else if (statement?.id)
    page = (
      <Suspense fallback={<Loading />}>
        <StatementPage key={statement.id} target={{ id: statement.id }} />
      </Suspense>
    );
  else if (draft?.id)
    page = (
      <Suspense fallback={<Loading />}>
        <StatementPage key={draft.id} target={{ draftOf: draft.id }} />
      </Suspense>
    );
  else if (path === "/developers" && current) page = <Developers account={current} />;
  else if (path === "/artists" && current) page = <Artists account={current} />;
  else if (path === "/transfer" && current) page = <TransferPage account={current} />;
  else if (path === "/support" && current) page = <Support account={current} />;
  else if (ticket?.id && current) page = <TicketPage key={ticket.id} account={current} id={ticket.id} />;
  else if (artist?.id && current) page = <ArtistPage key={artist.id} account={current} id={artist.id} />;
  else if (release?.id) page = <ReleasePage id={release.id} account={current} />;
  else
    page = (
      <Page title="Page not found" testid="page-not-found">
        <p>
          There is nothing at this address. <Link to="/releases">Go to your releases</Link>.
        </p>
      </Page>
    );

  return (
    <>
      <a className="skip" href="#main">
        Skip to content
      </a>
      <header className="topbar">
        <Brand tenant={tenant} />
        <button
          type="button"
          className="menu-toggle secondary"
          aria-expanded={menuOpen}
          aria-controls="portal-menu"
          onClick={() => setMenuOpen((o) => !o)}
          data-testid="menu-toggle"
        >
          Menu
        </button>
        <div id="portal-menu" className={menuOpen ? "menu open" : "menu"}>
          <nav aria-label="Main">
            <Link
              to="/releases"
              data-testid="nav-releases"
              aria-current={path.startsWith("/releases") ? "page" : undefined}
            >
              Releases
            </Link>
            <Link
              to="/artists"
              data-testid="nav-artists"
              aria-current={path.startsWith("/artists") ? "page" : undefined}
            >
              Artists
            </Link>
            <Link
              to="/royalties"
              data-testid="nav-royalties"
              aria-current={path.startsWith("/royalties") ? "page" : undefined}
            >
              Royalties
            </Link>
            {canEdit(current?.role) ? (
              <Link
                to="/transfer"
                data-testid="nav-transfer"
                aria-current={path === "/transfer" ? "page" : undefined}
              >
                Bring your catalogue
              </Link>
            ) : null}
            {moneyShown ? (
              <Link
                to="/money"
                data-testid="nav-money"
                aria-current={path.startsWith("/money") ? "page" : undefined}
              >
                Money
              </Link>
            ) : null}
            {canManage(current) ? (
              <Link
                to="/developers"
                data-testid="nav-developers"
                aria-current={path === "/developers" ? "page" : undefined}
              >
                Developers
              </Link>
            ) : null}
            <Link
              to="/support"
              data-testid="nav-support"
              aria-current={path.startsWith("/support") ? "page" : undefined}
            >
              Support
            </Link>
            <NotificationsLink current={path === "/notifications"} />
            <Link
              to="/your-data"
              data-testid="nav-your-data"
              aria-current={path === "/your-data" ? "page" : undefined}
            >
              Your data
            </Link>
          </nav>
          {list.length > 1 ? (
            <span className="account-switch">
              <label htmlFor="account-switch">Account</label>
              <select
                id="account-switch"
                value={current?.id ?? ""}
                onChange={(e) => choose(e.target.value)}
                data-testid="account-switch"
              >
                {list.map((a) => (
                  <option key={a.id} value={a.id}>
                    {a.name}
                  </option>
                ))}
              </select>
            </span>
          ) : current ? (
            <span className="account-name" data-testid="current-account">
              {current.name}
            </span>
          ) : null}
          <Link
            to="/profile"
            className="user-email"
            data-testid="user-email"
            aria-current={path === "/profile" ? "page" : undefined}
          >
            {email}
          </Link>
          <button type="button" className="secondary" onClick={() => void signOut()} data-testid="sign-out">
            Sign out
          </button>
        </div>
      </header>
      <main id="main">{page}</main>
      <Footer tenant={tenant} />
    </>
  );
}
