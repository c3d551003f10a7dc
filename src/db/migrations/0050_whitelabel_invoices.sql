-- Plans, usage metering and invoices for white-label tenants (issue 43, item 2; docs/operator.md,
-- "Plans and invoices"). Platform-level data about tenants: written and read on the service path
-- only (the CLI, the worker, /admin/v1 in its operator scope, where internal.require_staff checks
-- the caller first). No request role reads or writes any of it.

-- The installation's own legal details, printed on every invoice as the issuer (one row).
create table internal.billing_issuer (
  id boolean primary key default true check (id),
  legal_name text not null check (length(btrim(legal_name)) between 1 and 200),
  address text not null check (length(address) <= 1000),
  country char(2) not null check (country ~ '^[A-Z]{2}$'),
  vat_id text check (vat_id ~ '^[A-Z0-9]{4,20}$'),
  email text check (email like '%_@_%'),
  -- The invoice number is prefix || the sequence number, six digits at least: INV-000042.
  invoice_prefix text not null default 'INV-' check (invoice_prefix ~ '^[A-Za-z0-9/-]{0,12}$'),
  payment_terms_days integer not null default 14 check (payment_terms_days between 0 and 365),
  -- Standard rates (percent, decimal strings) that override the built-in EU table, by country.
  tax_rates jsonb not null default '{}' check (jsonb_typeof(tax_rates) = 'object'),
  bank_details text check (length(bank_details) <= 1000),
  updated_at timestamptz not null default now()
);

-- A plan: a monthly fee, what it includes, and the price of each unit past that.
create table internal.billing_plans (
  id uuid primary key default gen_random_uuid(),
  name text not null unique check (length(btrim(name)) between 1 and 100),
  currency char(3) not null check (currency ~ '^[A-Z]{3}$'),
  monthly_fee numeric(14, 2) not null check (monthly_fee >= 0),
  included_accounts integer not null default 0 check (included_accounts >= 0),
  included_releases integer not null default 0 check (included_releases >= 0),
  included_tracks integer not null default 0 check (included_tracks >= 0),
  included_storage_gb integer not null default 0 check (included_storage_gb >= 0),
  included_api_calls bigint not null default 0 check (included_api_calls >= 0),
  price_per_account numeric(14, 4) not null default 0 check (price_per_account >= 0),
  price_per_release numeric(14, 4) not null default 0 check (price_per_release >= 0),
  price_per_track numeric(14, 4) not null default 0 check (price_per_track >= 0),
  price_per_storage_gb numeric(14, 4) not null default 0 check (price_per_storage_gb >= 0),
  price_per_1000_api_calls numeric(14, 4) not null default 0 check (price_per_1000_api_calls >= 0),
  created_at timestamptz not null default now()
);

-- Each tenant's plan and legal details (the invoice's customer).
create table internal.tenant_billing (
  tenant_id uuid primary key references internal.tenants (id) on delete cascade,
  plan_id uuid not null references internal.billing_plans (id),
  legal_name text not null check (length(btrim(legal_name)) between 1 and 200),
  address text not null check (length(address) <= 1000),
  country char(2) not null check (country ~ '^[A-Z]{2}$'),
  vat_id text check (vat_id ~ '^[A-Z0-9]{4,20}$'),
  email text check (email like '%_@_%'),
  updated_at timestamptz not null default now()
);
create index tenant_billing_plan on internal.tenant_billing (plan_id);

-- API calls per tenant and day (UTC), added to in batches by each server process
-- (src/billing/api-calls.ts): durable, and one upsert per tenant and day every few seconds.
create table internal.tenant_api_calls (
  tenant_id uuid not null references internal.tenants (id) on delete cascade,
  day date not null,
  calls bigint not null default 0 check (calls >= 0),
  primary key (tenant_id, day)
);

-- The invoice number's counter: its row is locked by the issuing transaction, so numbers are
-- handed out one at a time and a transaction that fails hands its number back (no gaps).
create table internal.invoice_counters (
  series text primary key check (series in ('invoice', 'credit_note')),
  last_number bigint not null default 0 check (last_number >= 0)
);
insert into internal.invoice_counters (series) values ('invoice'), ('credit_note');

-- An issued invoice: everything printed on it is kept in the row (issuer, customer, plan, usage,
-- lines, tax), so it reads the same forever. Append-only: no update or delete.
create table internal.invoices (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references internal.tenants (id) on delete restrict,
  seq bigint not null unique check (seq > 0),
  number text not null unique,
  month date not null check (extract(day from month) = 1),
  issued_at timestamptz not null default now(),
  due_on date not null,
  currency char(3) not null check (currency ~ '^[A-Z]{3}$'),
  subtotal numeric(14, 2) not null check (subtotal >= 0),
  tax_rate numeric(5, 2) not null check (tax_rate between 0 and 100),
  tax numeric(14, 2) not null check (tax >= 0),
  total numeric(14, 2) not null,
  tax_rule text not null check (tax_rule in ('domestic', 'eu_reverse_charge', 'eu_consumer', 'outside_eu', 'not_applicable')),
  tax_note text not null default '',
  issuer jsonb not null check (jsonb_typeof(issuer) = 'object'),
  customer jsonb not null check (jsonb_typeof(customer) = 'object'),
  plan jsonb not null check (jsonb_typeof(plan) = 'object'),
  usage jsonb not null check (jsonb_typeof(usage) = 'object'),
  lines jsonb not null check (jsonb_typeof(lines) = 'array'),
  issued_by text not null default 'system',
  unique (tenant_id, month),
  check (total = subtotal + tax)
);
create index invoices_tenant on internal.invoices (tenant_id, month desc);

-- A credit note: a correction of an issued invoice, numbered in its own gapless series (CN-…),
-- crediting a net amount at the invoice's tax rate. It lowers what is due on the invoice; it is
-- append-only too.
create table internal.credit_notes (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references internal.tenants (id) on delete restrict,
  invoice_id uuid not null references internal.invoices (id) on delete restrict,
  seq bigint not null unique check (seq > 0),
  number text not null unique,
  issued_at timestamptz not null default now(),
  currency char(3) not null check (currency ~ '^[A-Z]{3}$'),
  subtotal numeric(14, 2) not null check (subtotal > 0),
  tax_rate numeric(5, 2) not null check (tax_rate between 0 and 100),
  tax numeric(14, 2) not null check (tax >= 0),
  total numeric(14, 2) not null,
  reason text not null check (length(btrim(reason)) between 1 and 500),
  issued_by text not null default 'system',
  check (total = subtotal + tax)
);
create index credit_notes_invoice on internal.credit_notes (invoice_id);

create function internal.invoice_is_final() returns trigger
language plpgsql set search_path = ''
as $$
begin
  raise exception 'an issued invoice never changes (%)', old.number
    using errcode = '55000', hint = 'Issue a correction on a new invoice.';
end
$$;
create trigger invoices_final before update or delete on internal.invoices
  for each row execute function internal.invoice_is_final();
create trigger credit_notes_final before update or delete on internal.credit_notes
  for each row execute function internal.invoice_is_final();
revoke execute on function internal.invoice_is_final() from public;

-- Payments received for invoices: seed 000's whitelabel_payments, one row per payment (manual,
-- or imported from a provider's export, where external_ref is the provider's id and a second
-- import of the same row is skipped).
alter table internal.whitelabel_payments
  add column invoice_id uuid references internal.invoices (id) on delete restrict,
  add column method text not null default 'manual' check (method in ('manual', 'stripe_charges_csv')),
  add column note text check (length(note) <= 500),
  add column recorded_by text not null default 'system';
create index whitelabel_payments_invoice on internal.whitelabel_payments (invoice_id);
create unique index whitelabel_payments_ref on internal.whitelabel_payments (tenant_id, method, external_ref)
  where external_ref is not null;

alter table internal.billing_issuer enable row level security;
alter table internal.billing_plans enable row level security;
alter table internal.tenant_billing enable row level security;
alter table internal.tenant_api_calls enable row level security;
alter table internal.invoice_counters enable row level security;
alter table internal.invoices enable row level security;
alter table internal.credit_notes enable row level security;
revoke all on internal.billing_issuer, internal.billing_plans, internal.tenant_billing, internal.tenant_api_calls,
  internal.invoice_counters, internal.invoices, internal.credit_notes from authenticated, anon, tenant_service;
