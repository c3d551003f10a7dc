-- Reauthentication codes (GET /auth/v1/reauthenticate, supabase-js reauthenticate): a six-digit
-- code mailed to a signed-in user's address, which updateUser({ password, nonce }) asks for where
-- the tenant requires it (settings.auth.secure_password_change, docs/auth.md). A one-time token
-- of its own kind; unlike the others it has no link and does not prove the address.
alter table internal.one_time_tokens drop constraint one_time_tokens_kind_check;
alter table internal.one_time_tokens
  add constraint one_time_tokens_kind_check
  check (kind in ('signup', 'recovery', 'email_change', 'invite', 'magiclink', 'reauthentication'));
