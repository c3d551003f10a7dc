import { useQuery, useQueryClient } from "@tanstack/react-query";
import { lazy, type ReactNode, Suspense, useEffect, useState, useSyncExternalStore } from "react";
import { applyBrand } from "../../ui-shared/theme.ts";
import { api } from "./api/admin.ts";
import { loadTenantConfig, signOut } from "./api/auth.ts";
import { ApiError } from "./api/errors.ts";
import { getSession, setActingTenant, subscribe } from "./api/session.ts";
import type { AdminMe } from "./api/types.ts";
import { AuthCallback } from "./pages/AuthCallback.tsx";
import { prefetchReviewQueue, ReviewQueue } from "./pages/ReviewQueue.tsx";
import { SecondFactorStep } from "./pages/SecondFactor.tsx";
import { SetPassword } from "./pages/SetPassword.tsx";
import { SignIn } from "./pages/SignIn.tsx";
import { TenantChooser } from "./pages/TenantChooser.tsx";
import { atLeast, isPlatformAdmin, type Role, roleOn } from "./roles.ts";
import { Link, match, navigate, useLocation } from "./router.tsx";
import { ErrorState, Loading, Page } from "./ui/common.tsx";

// Everything past the first page is loaded when first opened, to keep the first load small.
const ReviewPage = lazy(() => import("./pages/ReviewPage.tsx"));
const Deliveries = lazy(() => import("./pages/Deliveries.tsx"));
const DeliveryPage = lazy(() => import("./pages/DeliveryPage.tsx"));
const Takedowns = lazy(() => import("./pages/Takedowns.tsx"));
const OacRequests = lazy(() => import("./pages/OacRequests.tsx"));
const Jobs = lazy(() => import("./pages/Jobs.tsx"));
const RoyaltyImports = lazy(() => import("./pages/RoyaltyImports.tsx"));
const RoyaltyImportPage = lazy(() => import("./pages/RoyaltyImportPage.tsx"));
const Accounts = lazy(() => import("./pages/Accounts.tsx"));
const AccountPage = lazy(() => import("./pages/AccountPage.tsx"));
const Stores = lazy(() => import("./pages/Stores.tsx"));
const StorePage = lazy(() => import("./pages/StorePage.tsx"));
const Settings = lazy(() => import("./pages/Settings.tsx"));
const MoneyPeriods = lazy(() => import("./pages/money/Periods.tsx"));
const MoneyStatement = lazy(() => import("./pages/money/Statement.tsx"));
const MoneyPayouts = lazy(() => import("./pages/money/Payouts.tsx"));
const MoneyRecoupables = lazy(() => import("./pages/money/Recoupables.tsx"));
const MoneySettings = lazy(() => import("./pages/money/FeesSettings.tsx"));
const MoneyTaxForms = lazy(() => import("./pages/money/TaxForms.tsx"));
const MoneyLedger = lazy(() => import("./pages/money/Ledger.tsx"));
const Audit = lazy(() => import("./pages/Audit.tsx"));
const Invoices = lazy(() => import("./pages/Invoices.tsx"));
const Security = lazy(() => import("./pages/Security.tsx"));
const Support = lazy(() => import("./pages/Support.tsx"));
const TicketPage = lazy(() => import("./pages/Support.tsx").then((m) => ({ default: m.TicketPage })));

interface RouteDef {
  pattern: string;
  role: Role | "platform";
  render: (params: Record<string, string>) => ReactNode;
}

const ROUTES: RouteDef[] = [
  { pattern: "/reviews", role: "reviewer", render: () => <ReviewQueue /> },
  { pattern: "/reviews/:id", role: "reviewer", render: (p) => <ReviewPage id={p.id as string} /> },
  { pattern: "/oac", role: "reviewer", render: () => <OacRequests /> },
  { pattern: "/support", role: "reviewer", render: () => <Support /> },
  { pattern: "/support/:id", role: "reviewer", render: (p) => <TicketPage id={p.id as string} /> },
  { pattern: "/deliveries", role: "operator", render: () => <Deliveries /> },
  { pattern: "/deliveries/:id", role: "operator", render: (p) => <DeliveryPage id={p.id as string} /> },
  { pattern: "/takedowns", role: "operator", render: () => <Takedowns /> },
  { pattern: "/jobs", role: "operator", render: () => <Jobs /> },
  { pattern: "/royalties", role: "operator", render: () => <RoyaltyImports /> },
  { pattern: "/royalties/:id", role: "operator", render: (p) => <RoyaltyImportPage id={p.id as string} /> },
  { pattern: "/stores", role: "operator", render: () => <Stores /> },
  { pattern: "/stores/:id", role: "operator", render: (p) => <StorePage id={p.id as string} /> },
  // Money (docs/payouts.md): the admin API reads it with the operator role; its decisions (approving
  // a period or a batch, fees, settings, tax forms) need admin, and the pages say so.
  { pattern: "/money", role: "operator", render: () => <Redirect to="/money/periods" /> },
  { pattern: "/money/periods", role: "operator", render: () => <MoneyPeriods /> },
  {
    pattern: "/money/statements/:id",
    role: "operator",
    render: (p) => <MoneyStatement id={p.id as string} />,
  },
  { pattern: "/money/payouts", role: "operator", render: () => <MoneyPayouts /> },
  { pattern: "/money/recoupables", role: "operator", render: () => <MoneyRecoupables /> },
  { pattern: "/money/settings", role: "operator", render: () => <MoneySettings /> },
  { pattern: "/money/tax-forms", role: "operator", render: () => <MoneyTaxForms /> },
  { pattern: "/money/ledger", role: "operator", render: () => <MoneyLedger /> },
  { pattern: "/accounts", role: "admin", render: () => <Accounts /> },
  { pattern: "/accounts/:id", role: "admin", render: (p) => <AccountPage id={p.id as string} /> },
  { pattern: "/settings", role: "admin", render: () => <Settings /> },
  // GET /admin/v1/audit answers a tenant's admins only.
  { pattern: "/audit", role: "admin", render: () => <Audit /> },
  // What the installation bills the tenant (docs/operator.md, "Plans and invoices"): its admins.
  { pattern: "/invoices", role: "admin", render: () => <Invoices /> },
];

/** `section`: the paths the link stands for (its pages' common prefix), when more than `to`'s. */
const NAV: { to: string; label: string; role: Role; section?: string }[] = [
  { to: "/reviews", label: "Review queue", role: "reviewer" },
  { to: "/oac", label: "OAC requests", role: "reviewer" },
  { to: "/support", label: "Support", role: "reviewer" },
  { to: "/deliveries", label: "Deliveries", role: "operator" },
  { to: "/takedowns", label: "Takedowns", role: "operator" },
  { to: "/jobs", label: "Jobs", role: "operator" },
  { to: "/royalties", label: "Royalty imports", role: "operator" },
  { to: "/stores", label: "Stores", role: "operator" },
  { to: "/money/periods", label: "Money", role: "operator", section: "/money" },
  { to: "/accounts", label: "Accounts", role: "admin" },
  { to: "/settings", label: "Settings", role: "admin" },
  { to: "/audit", label: "Audit log", role: "admin" },
  { to: "/invoices", label: "Invoices", role: "admin" },
];

export function App() {
  const session = useSyncExternalStore(subscribe, getSession);
  const { path } = useLocation();

  // A mailed link lands here with the session in the fragment (#access_token=…), on any console path.
  if (path === "/auth/callback" || /(^#|&)(access_token|error_description)=/.test(location.hash))
    return <AuthCallback />;
  if (!session) return <SignIn />;
  if (session.secondFactor)
    return <SecondFactorStep pending={session.secondFactor} email={session.session.user?.email} />;
  return <SignedIn />;
}

function SignedIn() {
  const session = useSyncExternalStore(subscribe, getSession);
  const { path } = useLocation();
  const me = useQuery({ queryKey: ["me"], queryFn: api.me, staleTime: 60_000 });
  const acting = session?.actingTenantId;
  const client = useQueryClient();

  // The review queue is where most visits start: when a tenant is already chosen, its first page
  // is asked for beside /me rather than after it (one round trip instead of two before it shows).
  // biome-ignore lint/correctness/useExhaustiveDependencies: only on the first draw after sign-in
  useEffect(() => {
    if (acting && (path === "/" || path === "" || path === "/reviews")) prefetchReviewQueue(client);
  }, []);

  // One tenant and no platform role: nothing to choose.
  useEffect(() => {
    const data = me.data;
    if (!data || acting) return;
    const only = data.staff.length === 1 && !data.platform_role ? data.staff[0] : undefined;
    if (only) setActingTenant(only.tenant_id);
    else if (data.staff.length === 0 && data.platform_role) setActingTenant(data.tenant_id);
  }, [me.data, acting]);

  if (me.isPending) return <Shell me={undefined}>{<Loading what="Signing in" />}</Shell>;
  if (me.isError) {
    if (me.error instanceof ApiError && (me.error.status === 403 || me.error.status === 401)) {
      return <NotStaff error={me.error} />;
    }
    return (
      <Shell me={undefined}>
        <Page title="Backline Console" testid="page-error">
          <ErrorState error={me.error} onRetry={() => me.refetch()} />
        </Page>
      </Shell>
    );
  }
  const data = me.data;
  if (data.staff.length === 0 && !data.platform_role) return <NotStaff />;
  if (path === "/password") {
    return (
      <Shell me={data}>
        <SetPassword />
      </Shell>
    );
  }
  if (path === "/security") {
    return (
      <Shell me={data} role={acting ? roleOn(data, acting) : null}>
        <Suspense fallback={<Loading what="Two-step sign-in" />}>
          <Security />
        </Suspense>
      </Shell>
    );
  }
  if (!acting || path === "/tenants") {
    return (
      <Shell me={data}>
        <TenantChooser me={data} />
      </Shell>
    );
  }
  const role = roleOn(data, acting);
  return (
    <Shell me={data} role={role}>
      <Routed role={role} me={data} path={path} />
    </Shell>
  );
}

function Routed({ role, me, path }: { role: Role | null; me: AdminMe; path: string }) {
  if (path === "/" || path === "") {
    navigate("/reviews", { replace: true });
    return null;
  }
  for (const route of ROUTES) {
    const params = match(route.pattern, path);
    if (!params) continue;
    const allowed = route.role === "platform" ? isPlatformAdmin(me) : atLeast(role, route.role);
    if (!allowed)
      return (
        <Page title="Not allowed" testid="page-forbidden">
          <div className="error-state" role="alert" data-testid="error-state">
            {role === null ? (
              <p>
                You are not staff of this tenant. <Link to="/tenants">Choose one of yours</Link>.
              </p>
            ) : (
              <p>
                This page needs the <strong>{route.role}</strong> role; you are <strong>{role}</strong> on
                this tenant.
              </p>
            )}
          </div>
        </Page>
      );
    return <Suspense fallback={<Loading />}>{route.render(params)}</Suspense>;
  }
  return (
    <Page title="Page not found" testid="page-not-found">
      <p>
        There is no page at <code>{path}</code>. <Link to="/reviews">Go to the review queue</Link>.
      </p>
    </Page>
  );
}

function Redirect({ to }: { to: string }) {
  useEffect(() => navigate(to, { replace: true }), [to]);
  return null;
}

function NotStaff({ error }: { error?: ApiError }) {
  return (
    <div className="app">
      <main id="main" className="signin-main">
        <Page title="Not staff" testid="page-not-staff">
          <p data-testid="not-staff-message">
            This account is not staff of any tenant on this installation, so the console has nothing to show.
            {error ? ` (${error.code}: ${error.message})` : ""}
          </p>
          <button type="button" onClick={() => void signOut()} data-testid="sign-out">
            Sign out
          </button>
        </Page>
      </main>
    </div>
  );
}

function Shell({ me, role, children }: { me: AdminMe | undefined; role?: Role | null; children: ReactNode }) {
  const session = useSyncExternalStore(subscribe, getSession);
  const { path } = useLocation();
  const [menuOpen, setMenuOpen] = useState(false);
  const acting = session?.actingTenantId;
  const tenant = me?.staff.find((s) => s.tenant_id === acting);
  const tenantLabel =
    tenant?.tenant_name ??
    tenant?.tenant_slug ??
    (acting === session?.tenant.id ? session?.tenant.name : acting);
  const many = (me?.staff.length ?? 0) > 1 || Boolean(me?.platform_role);
  // The acting tenant's branding: its display name in the header, its colour as the accent.
  const slug = tenant?.tenant_slug ?? (acting === session?.tenant.id ? session?.tenant.slug : undefined);
  const brand = useQuery({
    queryKey: ["tenant-config", slug ?? ""],
    queryFn: () => loadTenantConfig(slug),
    enabled: Boolean(slug),
    retry: false,
    staleTime: 300_000,
  });
  const branding = brand.data?.branding;
  useEffect(() => applyBrand(branding?.primary_color), [branding?.primary_color]);
  // biome-ignore lint/correctness/useExhaustiveDependencies: close the menu whenever the page changes
  useEffect(() => setMenuOpen(false), [path]);
  return (
    <div className="app">
      <a className="skip" href="#main">
        Skip to content
      </a>
      <header className="topbar">
        <button
          type="button"
          className="menu-button"
          aria-expanded={menuOpen}
          aria-controls="nav"
          onClick={() => setMenuOpen((o) => !o)}
          data-testid="menu-toggle"
        >
          Menu
        </button>
        <span className="brand" data-testid="console-brand">
          {branding?.display_name ? `${branding.display_name} · Console` : "Backline Console"}
        </span>
        {acting ? (
          <span className="tenant" data-testid="current-tenant">
            {tenantLabel}
            {role ? <span className="role"> · {role}</span> : null}
          </span>
        ) : null}
        <span className="spacer" />
        {many && acting ? (
          <Link to="/tenants" className="button-link" data-testid="switch-tenant">
            Switch tenant
          </Link>
        ) : null}
        <span className="who" data-testid="user-email">
          {me?.user?.email ?? session?.session.user?.email ?? ""}
        </span>
        <Link to="/security" className="button-link" data-testid="security-link">
          Two-step sign-in
        </Link>
        <button type="button" onClick={() => void signOut()} data-testid="sign-out">
          Sign out
        </button>
      </header>
      <div className="layout">
        {acting && role ? (
          <nav id="nav" className={menuOpen ? "nav open" : "nav"} aria-label="Console">
            <ul>
              {NAV.filter((n) => atLeast(role, n.role)).map((n) => (
                <li key={n.to}>
                  <Link
                    to={n.to}
                    aria-current={
                      path === n.to || path.startsWith(`${n.section ?? n.to}/`) ? "page" : undefined
                    }
                    data-testid={`nav-${(n.section ?? n.to).slice(1)}`}
                  >
                    {n.label}
                  </Link>
                </li>
              ))}
            </ul>
          </nav>
        ) : null}
        <main id="main">{children}</main>
      </div>
    </div>
  );
}
