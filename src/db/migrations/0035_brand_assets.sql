-- A tenant's brand files (docs/portal.md, "Branding"): the logo an operator uploads from the
-- console, kept in the database (a few hundred kilobytes at most, backed up with everything else)
-- and served publicly at /brand/<tenant>/logo, which organization_settings.logo_url then names;
-- and the portal's optional custom CSS. Read and written on the server's path only: no request
-- role is granted anything on the assets, and the settings keep their existing grants.
create table internal.brand_assets (
  tenant_id uuid not null references internal.tenants (id) on delete cascade,
  kind text not null check (kind in ('logo')),
  content_type text not null check (content_type in ('image/png', 'image/jpeg', 'image/webp')),
  data bytea not null check (octet_length(data) between 1 and 1048576),
  sha256 text not null check (sha256 ~ '^[0-9a-f]{64}$'),
  width integer not null check (width between 16 and 4096),
  height integer not null check (height between 16 and 4096),
  created_at timestamptz not null default now(),
  primary key (tenant_id, kind)
);
alter table internal.brand_assets enable row level security;

alter table internal.organization_settings
  add column custom_css text check (custom_css is null or octet_length(custom_css) <= 65536);
