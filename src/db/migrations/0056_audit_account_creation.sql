-- A new account is audited as its changes and deletion already are (0020 audited updates of its
-- name, kind, sandbox flag and aal2 requirement, and deletes, but not its creation): who opened an
-- account, from the console, the admin API, the CLI or a sign-up, is in the log. 'people': accounts
-- the server's own workers make (none today) would not be.
create trigger audit_insert after insert on internal.accounts
  for each row execute function internal.audit_row('people');
