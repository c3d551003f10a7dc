import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { App } from "./App.tsx";
import { ApiError } from "./api/errors.ts";
import { getSession, subscribe } from "./api/session.ts";
import "./styles.css";

const client = new QueryClient({
  defaultOptions: {
    queries: {
      // Shown from the cache at once, refetched whenever a page opens: a desk's lists change all day.
      staleTime: 0,
      refetchOnWindowFocus: true,
      // A refusal (4xx) is an answer, not a hiccup: show it at once.
      retry: (count, error) => !(error instanceof ApiError && error.status < 500) && count < 2,
    },
  },
});

// Signing out (here or in another tab) forgets every answer of the previous user. A listener of
// the session store runs before React renders the sign-in page, so its own queries are kept.
let signedIn = getSession() !== null;
subscribe((session) => {
  if (signedIn && !session) client.clear();
  signedIn = session !== null;
});

const root = document.getElementById("root");
if (root)
  createRoot(root).render(
    <StrictMode>
      <QueryClientProvider client={client}>
        <App />
      </QueryClientProvider>
    </StrictMode>,
  );
