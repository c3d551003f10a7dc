-- Store dictionaries (issue 41, item 4; docs/ddex.md, "Store dictionaries"): a store that takes
-- its own genre list (ddex.dictionary in its settings, with ddex.genres overriding single
-- mappings) must be able to name every genre a release sends it. Which genres it can name is
-- genre_map: Backline genre code -> the store's genre, written by Backline with the store's
-- settings (src/pipeline/dictionaries.ts: the built-in dictionary's map with the overrides laid
-- over it) and again at start, so that a newer dictionary file applies. Null: the store has no
-- dictionary and every genre goes as its display name, as before.
alter table internal.stores add column genre_map jsonb
  check (genre_map is null or jsonb_typeof(genre_map) = 'object');
comment on column internal.stores.genre_map is
  'The genres a store with a dictionary can take (Backline code -> the store''s genre); null: no dictionary.';

-- What a release's genres lack at the stores it goes to (named, or every enabled store): each
-- primary or secondary genre a store with a dictionary has no mapping for, naming the store.
-- A genre the catalogue does not know is left to the genre checks themselves.
create function internal.release_store_genre_problems(release uuid) returns jsonb
language plpgsql stable security definer set search_path = ''
as $$
declare
  r public.releases;
  problems jsonb := '[]';
  s record;
  f record;
begin
  select * into r from public.releases where id = release;
  if not found then
    return '[]';
  end if;
  for s in
    select st.code, st.name, st.genre_map from internal.stores st
    where st.genre_map is not null and st.enabled
      and (cardinality(r.services) = 0 or st.code = any (r.services))
    order by st.sort, st.code
  loop
    for f in
      select x.param, x.genre, g.name as genre_name
      from (values ('primary_genre', r.primary_genre, 1), ('secondary_genre', r.secondary_genre, 2)) as x(param, genre, n)
      join internal.genres g on g.code = x.genre
      where not (s.genre_map ? x.genre)
      order by x.n
    loop
      problems := problems || jsonb_build_object('param', f.param, 'code', 'unmapped_genre',
        'message', format('%s %s (%s) has no genre at %s (store %s): its dictionary does not map it; choose another genre or ask the platform to map it',
          f.param, f.genre, f.genre_name, s.name, s.code));
    end loop;
  end loop;
  return problems;
end
$$;
revoke execute on function internal.release_store_genre_problems(uuid) from public;

-- The submission checks with the stores' dictionaries: whatever the migrations before this one
-- made release_problems, it keeps its grants under a new name.
alter function internal.release_problems(uuid) rename to release_problems_before_dictionaries;

create function internal.release_problems(release uuid) returns jsonb
language plpgsql stable security definer set search_path = ''
as $$
declare
  p jsonb := internal.release_problems_before_dictionaries(release);
begin
  if p is null then
    return p;
  end if;
  return p || internal.release_store_genre_problems(release);
end
$$;
revoke execute on function internal.release_problems(uuid) from public;
grant execute on function internal.release_problems(uuid) to authenticated, tenant_service, service_role;
