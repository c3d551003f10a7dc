/**
 * The signed-in staff user's session: the tenant whose /auth/v1 they signed in to (its publishable
 * anon key from GET /console/tenant.json), the GoTrue session, and the tenant they act on
 * (Backline-Tenant). Kept in localStorage so a reload stays signed in; the access token is
 * refreshed shortly before it expires.
 */

export interface TenantConfig {
  id: string;
  slug: string;
  name: string;
  anon_key: string;
  url?: string;
  /** The tenant's branding (Settings): its name and colour show in the console's header. */
  branding?: { display_name?: string | null; logo_url?: string | null; primary_color?: string | null };
}

export interface AuthSession {
  access_token: string;
  refresh_token: string;
  /** Seconds since the epoch. */
  expires_at: number;
  user?: { id: string; email?: string };
}

/** The verified factor a new session must still be confirmed with before the console opens. */
export interface SecondFactor {
  factorId: string;
  name: string | null;
}

export interface StoredSession {
  tenant: TenantConfig;
  session: AuthSession;
  /** Set while the session waits for its second factor (the user has one; the session is aal1). */
  secondFactor?: SecondFactor;
  /** The tenant the console acts on (a staff membership's tenant_id). */
  actingTenantId?: string;
}

const KEY = "backline-console-session";
type Listener = (s: StoredSession | null) => void;
const listeners = new Set<Listener>();
let current: StoredSession | null = read();

function read(): StoredSession | null {
  try {
    const raw = localStorage.getItem(KEY);
    if (!raw) return null;
    const parsed = JSON.parse(raw) as StoredSession;
    return parsed?.session?.access_token && parsed.tenant?.anon_key ? parsed : null;
  } catch {
    return null;
  }
}

export function getSession(): StoredSession | null {
  return current;
}

export function setSession(next: StoredSession | null): void {
  current = next;
  try {
    if (next) localStorage.setItem(KEY, JSON.stringify(next));
    else localStorage.removeItem(KEY);
  } catch {
    // Private mode without storage: the session lives until the tab closes.
  }
  for (const l of listeners) l(next);
}

export function subscribe(listener: Listener): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

export function setActingTenant(tenantId: string): void {
  if (current) setSession({ ...current, actingTenantId: tenantId });
}

// Another tab signed in or out: follow it.
window.addEventListener("storage", (event) => {
  if (event.key !== KEY) return;
  current = read();
  for (const l of listeners) l(current);
});
