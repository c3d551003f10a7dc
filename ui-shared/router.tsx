/**
 * A small history router, shared by the console (under /console) and the portal (under /portal
 * or /portal/t/<slug>): each app's pages are a handful of path patterns, and the server answers
 * index.html for every deep link (src/console/static.ts). The app sets its base once, before it
 * renders (`setBase`).
 */
import { type AnchorHTMLAttributes, type MouseEvent, useSyncExternalStore } from "react";

let BASE = "";

/** Where the app lives ("/console", "/portal/t/acme"): every path here is relative to it. */
export function setBase(base: string): void {
  BASE = base.replace(/\/+$/, "");
}

export function getBase(): string {
  return BASE;
}
const listeners = new Set<() => void>();
let navigated = false;

function notify() {
  navigated = true;
  for (const l of listeners) l();
}
window.addEventListener("popstate", notify);

/**
 * Whether the app has moved from the page it was opened at (a link, back or forward). A page's
 * heading takes the focus only then, so a screen reader hears where a navigation led; on the
 * page first opened the focus is already at the document's start, and moving it would force the
 * browser to lay the whole page out before its first paint (the portal's release page: ~40–55 ms).
 */
export function hasNavigated(): boolean {
  return navigated;
}

function subscribe(listener: () => void) {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

/** The path inside the console ("/reviews/…") and its query string. */
function snapshot(): string {
  const path = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) : location.pathname;
  return `${path === "" ? "/" : path}${location.search}`;
}

function locationOf(full: string): { path: string; search: URLSearchParams } {
  const [path = "/", search = ""] = full.split("?");
  return { path: path.length > 1 ? path.replace(/\/+$/, "") : path, search: new URLSearchParams(search) };
}

export function useLocation(): { path: string; search: URLSearchParams } {
  return locationOf(useSyncExternalStore(subscribe, snapshot));
}

/** The path inside the app now, as `useLocation` gives it, outside React (the app's start). */
export function currentPath(): string {
  return locationOf(snapshot()).path;
}

export function href(to: string): string {
  return `${BASE}${to === "/" ? "/" : to}`;
}

export function navigate(to: string, options: { replace?: boolean } = {}): void {
  const url = href(to);
  if (options.replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  notify();
}

/** Sets one query parameter of the current page (filters, cursors), keeping the others. */
export function setSearch(changes: Record<string, string | undefined>, options: { replace?: boolean } = {}) {
  const { path, search } = parse();
  for (const [key, value] of Object.entries(changes)) {
    if (value === undefined || value === "") search.delete(key);
    else search.set(key, value);
  }
  const text = search.toString();
  navigate(`${path}${text ? `?${text}` : ""}`, options);
}

function parse() {
  const [path = "/", search = ""] = snapshot().split("?");
  return { path, search: new URLSearchParams(search) };
}

/** `/reviews/:id` against `/reviews/abc` -> { id: "abc" }; null when it does not match. */
export function match(pattern: string, path: string): Record<string, string> | null {
  const want = pattern.split("/").filter(Boolean);
  const got = path.split("/").filter(Boolean);
  if (want.length !== got.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < want.length; i++) {
    const w = want[i] as string;
    const g = got[i] as string;
    if (w.startsWith(":")) params[w.slice(1)] = decodeURIComponent(g);
    else if (w !== g) return null;
  }
  return params;
}

export function Link({ to, onClick, ...rest }: AnchorHTMLAttributes<HTMLAnchorElement> & { to: string }) {
  return (
    <a
      {...rest}
      href={href(to)}
      onClick={(event: MouseEvent<HTMLAnchorElement>) => {
        onClick?.(event);
        if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey)
          return;
        event.preventDefault();
        navigate(to);
      }}
    />
  );
}
