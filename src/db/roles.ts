/**
 * The cluster-level setup PostgreSQL needs once, run by a superuser (docs/database.md): the four
 * request roles and a login role that is not a superuser and may only switch to them. Idempotent.
 * `backline db setup-sql` prints it; the test harness runs the same text.
 *
 * Migration 0001 repeats the role creation on purpose: migrations are self-contained and never
 * import today's code, and on PGlite (no separate setup step) the migration is what creates them.
 */
export function rolesSetupSql(login = "authenticator"): string {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(login)) throw new Error(`invalid role name: ${login}`);
  return `do $setup$
begin
  if not exists (select from pg_roles where rolname = 'anon') then
    create role anon nologin noinherit;
  end if;
  if not exists (select from pg_roles where rolname = 'authenticated') then
    create role authenticated nologin noinherit;
  end if;
  if not exists (select from pg_roles where rolname = 'tenant_service') then
    create role tenant_service nologin noinherit;
  end if;
  if not exists (select from pg_roles where rolname = 'service_role') then
    create role service_role nologin noinherit bypassrls;
  else
    alter role service_role bypassrls;
  end if;
  if not exists (select from pg_roles where rolname = '${login}') then
    create role ${login} login noinherit nosuperuser nocreatedb nocreaterole nobypassrls;
  end if;
end
$setup$;
grant anon, authenticated, tenant_service, service_role to ${login};
`;
}
