-- Sign-in links and codes (POST /auth/v1/otp, supabase-js signInWithOtp) are one-time tokens of
-- their own kind: they sign an existing user in, and using one proves the address as the other
-- kinds do.
alter table internal.one_time_tokens drop constraint one_time_tokens_kind_check;
alter table internal.one_time_tokens
  add constraint one_time_tokens_kind_check
  check (kind in ('signup', 'recovery', 'email_change', 'invite', 'magiclink'));
