-- Secrets at rest and identifiers that disclose nothing (docs/security.md, "Where secrets live"
-- and "Identifiers").

-- 1. An ISRC is one recording within an account (migration 0007), but the check used to run
-- before row security, as the definer, in whatever account the new row named: a caller naming
-- another account's id learnt that account's track title, track id and release id from the
-- conflict. Now the code is normalised before the row is written (BEFORE, as the caller), and
-- checked AFTER it: row security has by then accepted the row, so the check only ever runs for a
-- row the caller may write, and a row they may not write is refused like any other. The conflict
-- names the code only, nothing of the row that holds it.
create or replace function internal.track_isrc_rules() returns trigger
language plpgsql
as $$
begin
  if new.isrc is not null then
    -- Spaces are forgiven as hyphens are (migration 0005 strips only hyphens).
    new.isrc := upper(regexp_replace(new.isrc, '[\s-]', '', 'g'));
  end if;
  return new;
end
$$;

create function internal.track_isrc_unique() returns trigger
language plpgsql security definer set search_path = ''
as $$
begin
  if new.isrc is null then
    return null;
  end if;
  perform pg_advisory_xact_lock(hashtextextended(new.account_id::text || ':' || new.isrc, 0));
  if exists (select 1 from public.tracks t
      where t.account_id = new.account_id and t.isrc = new.isrc and t.id <> new.id
        and (lower(btrim(t.title)) <> lower(btrim(new.title))
          or coalesce(lower(btrim(t.version)), '') <> coalesce(lower(btrim(new.version)), ''))) then
    perform internal.refuse('BL006',
      format('ISRC %s is already registered for another recording in this account', new.isrc),
      jsonb_build_object('isrc', new.isrc)::text,
      'An ISRC is one recording: reuse it only for the same title and version, or use a new ISRC.');
  end if;
  return null;
end
$$;
revoke execute on function internal.track_isrc_unique() from public;

create trigger track_isrc_unique after insert or update of isrc, title, version on public.tracks
  for each row execute function internal.track_isrc_unique();

-- 2. Tenants' JWT signing secrets are kept sealed with the server's master key (AES-256-GCM, see
-- src/secrets/box.ts). A migration cannot know the key: the plain column stays for rows written
-- before this migration, and the server seals them at start (src/secrets/at-rest.ts), emptying it.
alter table internal.tenants alter column jwt_secret drop not null;
alter table internal.tenants add column jwt_secret_sealed text check (jwt_secret_sealed ~ '^v[0-9]+\.');
alter table internal.tenants add constraint tenants_one_jwt_secret
  check (num_nonnulls(jwt_secret, jwt_secret_sealed) = 1);

-- 3. Stores belong to the installation: their delivery settings (the sender's party id, the
-- transport) are for the operator's staff only. No request role reads them; the credentials in
-- them (any key naming a secret, password, passphrase, private key or token) are kept sealed in
-- credentials_sealed, never in settings. Rows written before this migration are moved by the
-- server at start, hence NOT VALID: the rule holds for every row written from now on.
alter table internal.stores add column credentials_sealed text check (credentials_sealed ~ '^v[0-9]+\.');
alter table internal.stores add constraint stores_settings_hold_no_credentials check (not jsonb_path_exists(settings,
  'strict $.** ? (@.type() == "object").keyvalue() ? (@.key like_regex "secret|password|passphrase|private_key|token" flag "i")'))
  not valid;
revoke select on internal.stores from anon, authenticated, tenant_service;
grant select (code, name, kind, enabled, offers_oac, sort, updated_at) on internal.stores
  to anon, authenticated, tenant_service;

-- 4. Mail that carries a sign-in link or a code keeps it only while it works: once the mail has
-- left (or failed) and the link or code has expired, its text is blanked (Mailer.sweepExpired).
alter table internal.mail_outbox add column secret_expires_at timestamptz;
alter table internal.mail_outbox add column redacted_at timestamptz;
-- Mail written before: sign-in links lasted at most 7 days (otp_expiry), reveal codes 15 minutes.
update internal.mail_outbox set secret_expires_at = created_at + interval '7 days' where kind like 'auth.%';
update internal.mail_outbox set secret_expires_at = created_at + interval '15 minutes' where kind = 'api_key.reveal';
create index mail_outbox_secret_expiry on internal.mail_outbox (secret_expires_at)
  where secret_expires_at is not null and redacted_at is null;
