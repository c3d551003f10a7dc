import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

/**
 * The portal's build (docs/portal.md): served by Backline under /portal (and /portal/t/<slug>),
 * so every asset URL is under /portal/. `npx vite portal` starts Vite's dev server with hot reload
 * and sends the API calls to a running Backline (BACKLINE_URL, default http://127.0.0.1:54321).
 */
const backend = process.env.BACKLINE_URL ?? "http://127.0.0.1:54321";
const api = { target: backend, changeOrigin: false };

export default defineConfig({
  base: "/portal/",
  plugins: [react()],
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2022",
    sourcemap: false,
    // The first page stays under the budget (250 KB gzipped); a larger chunk is a mistake to look at. The
    // royalties charts (Chart.js, the world map) are a chunk of their own, loaded by that page only.
    chunkSizeWarningLimit: 600,
  },
  server: {
    port: Number(process.env.PORTAL_DEV_PORT ?? 5174),
    strictPort: false,
    proxy: {
      "/auth/v1": api,
      "/rest/v1": api,
      "/storage/v1": api,
      "/api/public/v1": api,
      "/portal/tenant.json": api,
      "/portal/accounts.json": api,
    },
  },
});
