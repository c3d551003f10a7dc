import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

/**
 * The Backline Console's build (docs/console.md). Served by Backline under /console, so every
 * URL is under that base. `npm run dev:console` starts Vite's dev server with hot reload and
 * sends the API calls to a running Backline (BACKLINE_URL, default http://127.0.0.1:54321).
 */
const backend = process.env.BACKLINE_URL ?? "http://127.0.0.1:54321";
const api = { target: backend, changeOrigin: false };

export default defineConfig({
  base: "/console/",
  plugins: [react()],
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2022",
    sourcemap: false,
    // The first page stays under the budget; a larger chunk is a mistake to look at.
    chunkSizeWarningLimit: 300,
  },
  server: {
    port: Number(process.env.CONSOLE_DEV_PORT ?? 5173),
    strictPort: false,
    proxy: {
      "/auth/v1": api,
      "/admin/v1": api,
      "/storage/v1": api,
      "/rest/v1": api,
      "/api/public/v1": api,
      "/console/tenant.json": api,
    },
  },
});
