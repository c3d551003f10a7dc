import { type FormEvent, useId, useState } from "react";
import { loadTenantConfig } from "../api/auth.ts";
import { describeError } from "../api/errors.ts";
import { getSession, setActingTenant } from "../api/session.ts";
import type { AdminMe } from "../api/types.ts";
import { navigate } from "../router.tsx";
import { Page } from "../ui/common.tsx";

/** Staff of several tenants (or platform staff) choose the tenant they act on. */
export function TenantChooser({ me }: { me: AdminMe }) {
  const [slug, setSlug] = useState("");
  const [error, setError] = useState<string | null>(null);
  const ids = useId();
  const acting = getSession()?.actingTenantId;

  function choose(tenantId: string) {
    setActingTenant(tenantId);
    navigate("/reviews");
  }

  async function bySlug(event: FormEvent) {
    event.preventDefault();
    setError(null);
    try {
      choose((await loadTenantConfig(slug.trim())).id);
    } catch (e) {
      setError(describeError(e).detail);
    }
  }

  return (
    <Page title="Choose a tenant" testid="page-tenants">
      <p>You are staff of these tenants. The console acts on the one you choose.</p>
      <ul className="tenant-list" data-testid="tenant-list">
        {me.staff.map((s) => (
          <li key={s.tenant_id}>
            <button
              type="button"
              className={s.tenant_id === acting ? "tenant-choice current" : "tenant-choice"}
              onClick={() => choose(s.tenant_id)}
              data-testid={`tenant-choice-${s.tenant_slug ?? s.tenant_id}`}
            >
              <strong>{s.tenant_name ?? s.tenant_slug ?? s.tenant_id}</strong>
              <span className="muted">
                {s.tenant_slug ? `${s.tenant_slug} · ` : ""}
                {s.role}
              </span>
            </button>
          </li>
        ))}
        {me.platform_role && !me.staff.some((s) => s.tenant_id === me.tenant_id) ? (
          <li>
            <button
              type="button"
              className="tenant-choice"
              onClick={() => choose(me.tenant_id)}
              data-testid="tenant-choice-own"
            >
              <strong>Your own tenant</strong>
              <span className="muted">platform {me.platform_role}</span>
            </button>
          </li>
        ) : null}
      </ul>
      {me.platform_role ? (
        <form onSubmit={bySlug} className="card inline-form" aria-label="Another tenant">
          <p>As platform staff ({me.platform_role}) you may act on any tenant:</p>
          <label htmlFor={`${ids}-slug`}>Tenant slug</label>
          <input
            id={`${ids}-slug`}
            value={slug}
            onChange={(e) => setSlug(e.target.value)}
            required
            data-testid="tenant-slug"
          />
          <button type="submit" data-testid="tenant-slug-submit">
            Open
          </button>
          {error ? (
            <p role="alert" className="error-text">
              {error}
            </p>
          ) : null}
        </form>
      ) : null}
    </Page>
  );
}
