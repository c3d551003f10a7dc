-- Generic plans on skewed data under row-level security (bench/README.md, "bench/rest",
-- issue 45 item 2). /rest/v1's statements are prepared, so after five runs PostgreSQL may plan
-- one for every value at once (a generic plan). This measures what that costs when the values are
-- skewed, and what PostgreSQL's default (plan_cache_mode = auto) picks:
--
--   psql -X -f bench/rest/plan-skew.sql postgres://postgres@127.0.0.1:5432/postgres
--
-- Everything happens in one transaction that is rolled back: nothing is left behind.
-- 1M rows in 50 accounts; status 'live' on 99.9% of them, 'draft' on 0.1%; durations uniform.
begin;
create schema plan_skew;
create table plan_skew.rel (id bigserial primary key, account_id int not null, status text not null,
  title text not null, duration int not null);
insert into plan_skew.rel (account_id, status, title, duration)
  select g % 50, case when g % 1000 = 0 then 'draft' else 'live' end, md5(g::text), g % 600
  from generate_series(1, 1000000) g;
create index on plan_skew.rel (account_id);
create index on plan_skew.rel (status);
create index on plan_skew.rel (title);
create index on plan_skew.rel (duration);
create role plan_skew_user;
grant usage on schema plan_skew to plan_skew_user;
grant select on plan_skew.rel to plan_skew_user;
alter table plan_skew.rel enable row level security;
-- As Backline's policies are written: the caller's accounts in an InitPlan, unknown to the planner.
create policy mine on plan_skew.rel for select to plan_skew_user
  using (account_id = any ((select current_setting('plan_skew.accounts')::int[])::int[]));
analyze plan_skew.rel;

set local role plan_skew_user;
set local plan_skew.accounts = '{1}';
-- The shape /rest/v1 builds for ?status=eq.X&order=title&limit=50 and ?duration=gte.N&...
prepare by_status(text, bigint) as
  select t0.id, t0.title from plan_skew.rel t0 where t0.status = $1 order by t0.title limit $2;
prepare by_duration(int, bigint) as
  select t0.id, t0.title from plan_skew.rel t0 where t0.duration >= $1 order by t0.title limit $2;

\echo == auto (the default): five runs with the common value, then the rare one
execute by_status('live', 50) \g /dev/null
execute by_status('live', 50) \g /dev/null
execute by_status('live', 50) \g /dev/null
execute by_status('live', 50) \g /dev/null
execute by_status('live', 50) \g /dev/null
explain (analyze, costs off, timing off, summary on) execute by_status('draft', 50);
execute by_duration(0, 50) \g /dev/null
execute by_duration(0, 50) \g /dev/null
execute by_duration(0, 50) \g /dev/null
execute by_duration(0, 50) \g /dev/null
execute by_duration(0, 50) \g /dev/null
explain (analyze, costs off, timing off, summary on) execute by_duration(599, 50);
select name, generic_plans, custom_plans from pg_prepared_statements order by name;

\echo == force_generic_plan: what a generic plan would cost for the rare values
set local plan_cache_mode = force_generic_plan;
explain (analyze, costs off, timing off, summary on) execute by_status('draft', 50);
explain (analyze, costs off, timing off, summary on) execute by_duration(599, 50);
rollback;
