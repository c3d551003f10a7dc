-- Partners credited a share of the tenants they referred, and a tenant's own portal scripts (issue 43, item 4; docs/operator.md).
--
-- Seed 000's internal.partners and internal.custom_scripts (migration 0002) had tables and no
-- behaviour. What they mean for a Backline installation (docs/operator.md, "Partners" and "Custom
-- scripts on the portal"):
--
-- * A partner is a referral or reseller partner of the installation: platform staff list them
--   (tenant_id null) and attach each tenant a partner brought in (internal.partner_tenants); a
--   month's partner statement credits the partner revenue_share percent of the referred tenants'
--   invoices of that month net of tax (migration 0050), or of their distributor fees.
-- * A custom script is an external script (analytics, a chat widget) a tenant's admin lists for
--   that tenant's portal only: an https address (loopback http for development), loaded with the
--   tenant's portal page, its origin and the origins it may connect to added to that page's
--   Content-Security-Policy. Off unless enabled; no inline code (`source` is the address).
--
-- Neither is reachable by request roles: RLS is on with no policy (migration 0002), nothing is
-- granted to anon, authenticated or tenant_service; the admin API reads and writes them on the
-- service path inside the operator scope (the database's staff check first). Every change is in
-- the audit log.

-- A list of web origins: https with a host name (no wildcard, user, path), or loopback http.
create function internal.web_origins_ok(origins text[]) returns boolean
language sql immutable set search_path = ''
as $$
  select coalesce(bool_and(
    o ~ '^(https://[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*|http://(localhost|127\.0\.0\.1|\[::1\]))(:[0-9]{1,5})?$'
  ), true)
  from unnest(origins) as o
$$;

alter table internal.custom_scripts alter column enabled set default false;
alter table internal.custom_scripts
  add column connect_origins text[] not null default '{}'
    check (cardinality(connect_origins) <= 10 and internal.web_origins_ok(connect_origins)),
  -- Subresource Integrity: the browser runs the file only if its digest matches.
  add column integrity text check (integrity ~ '^sha(256|384|512)-[A-Za-z0-9+/]{43,86}={0,2}$'),
  add constraint custom_scripts_source_url check (
    length(source) between 10 and 2048
    and source ~ '^(https://[a-z0-9.-]+|http://(localhost|127\.0\.0\.1|\[::1\]))(:[0-9]{1,5})?/'
    and source !~ '[[:space:]"''<>\\`*]');
create index custom_scripts_tenant_enabled on internal.custom_scripts (tenant_id) where enabled;

-- Partners of the installation carry no tenant (seed 000's tenant_id stays for a tenant's own,
-- which Backline does not use yet).
create table internal.partner_tenants (
  tenant_id uuid primary key references internal.tenants (id) on delete cascade,
  partner_id uuid not null references internal.partners (id) on delete restrict,
  -- The first month the partner is credited for this tenant (the first day of a month).
  since date not null default date_trunc('month', now())::date check (since = date_trunc('month', since)::date),
  created_at timestamptz not null default now()
);
create index partner_tenants_partner on internal.partner_tenants (partner_id);
alter table internal.partner_tenants enable row level security;
revoke all on internal.partner_tenants from public, anon, authenticated, tenant_service;
revoke all on internal.partners, internal.custom_scripts from anon, authenticated, tenant_service;

create trigger audit after insert or update or delete on internal.partners
  for each row execute function internal.audit_row('all');
create trigger audit after insert or update or delete on internal.partner_tenants
  for each row execute function internal.audit_row('all');
create trigger audit after insert or update or delete on internal.custom_scripts
  for each row execute function internal.audit_row('all');
