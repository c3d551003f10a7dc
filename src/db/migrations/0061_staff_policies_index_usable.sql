-- The staff read policies of migration 0019 in a form the planner can use (issue 45, item 2).
--
-- Each was `(select auth.has_staff_role(...)) and account_id = any ((select auth.tenant_account_ids())::uuid[])`.
-- PostgreSQL ORs it with the table's account policy, so a caller who is not staff still got a plan
-- that fetched every row of the tenant (a BitmapOr of the caller's accounts and all the tenant's) and
-- then dropped all but the caller's by the false staff test, row by row: a user owning 1 of 51
-- accounts listing tracks read 73,440 rows to keep 1,440 (~27 ms instead of ~2).
--
-- Now the staff test decides the array itself: the tenant's accounts for staff holding the role,
-- none otherwise, so for everyone else that arm of the scan is empty. The rows each caller sees are
-- the same: a row passes iff the caller holds the role and its account is the tenant's (a null or
-- false role test gives the empty array, as it made the old conjunction not true). Both helpers
-- still run once per statement (one InitPlan), tenant_account_ids only for staff.
do $$
declare
  t text;
  need text;
  policy text;
begin
  foreach t in array array['public.releases', 'public.tracks', 'public.artist_profiles', 'public.media_assets',
    'internal.oac_requests', 'public.takedown_requests', 'internal.release_deliveries', 'public.release_analytics',
    'public.track_analytics'] loop
    if t in ('public.takedown_requests', 'internal.release_deliveries', 'public.release_analytics', 'public.track_analytics') then
      need := 'operator';
      policy := 'staff_operator_select';
    else
      need := 'reviewer';
      policy := 'staff_reviewer_select';
    end if;
    execute format('drop policy %I on %s', policy, t);
    execute format('create policy %I on %s for select to authenticated using (account_id = any ((select case when auth.has_staff_role(auth.tenant_id(), %L) then auth.tenant_account_ids() else ''{}''::uuid[] end)::uuid[]))',
      policy, t, need);
  end loop;
end
$$;
