import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { currentPath, setBase } from "../../ui-shared/router.tsx";
import { applyBrand } from "../../ui-shared/theme.ts";
import { App, NoPortal, prefetchSignedIn, StartFailed } from "./App.tsx";
import {
  hasStoredSession,
  loadTenant,
  PlainError,
  session,
  slugInPath,
  startClient,
  watchSession,
} from "./api/portal.ts";
import "./styles.css";

/**
 * The portal's start: which tenant this address shows (its own domain, `/portal/t/<slug>`, or
 * the development tenant: GET /portal/tenant.json decides), its brand, then the app.
 */
const client = new QueryClient({
  defaultOptions: {
    queries: {
      staleTime: 10_000,
      refetchOnWindowFocus: true,
      // A refusal is an answer, not a hiccup: shown at once. A busy server (503, 429: admission
      // control under load) or a dropped connection is a hiccup: asked again, up to 4 times, after
      // 1, 2, 4 and 8 s.
      retry: (count, error) => {
        if (error instanceof PlainError && (error.code === "busy" || error.code === "network"))
          return count < 4;
        return !(error instanceof PlainError && error.status !== undefined) && count < 1;
      },
    },
  },
});

const root = document.getElementById("root");
const slug = slugInPath(location.pathname);

async function start() {
  if (!root) return;
  const view = createRoot(root);
  let tenant: Awaited<ReturnType<typeof loadTenant>>;
  try {
    tenant = await loadTenant(slug);
  } catch (error) {
    view.render(<StartFailed error={error} />);
    return;
  }
  if (!tenant) {
    view.render(<NoPortal />);
    return;
  }
  setBase(slug ? `/portal/t/${slug}` : "/portal");
  applyBrand(tenant.branding.primary_color);
  if (tenant.branding.custom_css_url) {
    // After the portal's own style sheet, so its rules win; a link, which the page's CSP allows.
    const link = document.createElement("link");
    link.rel = "stylesheet";
    link.href = tenant.branding.custom_css_url;
    link.dataset.testid = "custom-css";
    document.head.append(link);
  }
  startClient(tenant, slug ? `/portal/t/${slug}` : "/portal");
  // Signing out forgets every answer of the previous member.
  let signedIn = false;
  session.subscribe(() => {
    const now = session.get().session !== null;
    if (signedIn && !now) client.clear();
    signedIn = now;
  });
  watchSession();
  if (hasStoredSession()) prefetchSignedIn(client, currentPath());
  view.render(
    <StrictMode>
      <QueryClientProvider client={client}>
        <App tenant={tenant} />
      </QueryClientProvider>
    </StrictMode>,
  );
}

void start();
