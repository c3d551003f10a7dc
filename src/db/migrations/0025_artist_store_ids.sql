-- One source of truth for an artist's store profile ids (issue 29, item 4). `store_ids` (the public
-- API's field: the artist's id per store code) holds them all; the two columns of seed 001,
-- "streamingA_id" (the store `spotify`) and "streamingB_id" (the store `apple_music`), stay on
-- /rest/v1 as they were, readable and writable, and follow it: a write to either side is seen on
-- the other. A trigger keeps them together on every insert and update, whoever writes (PostgREST
-- clients, the public API, the operator), so grants and row security are unchanged.
--
-- Rules: a column written in the statement (insert: given non-null; update: changed) is copied into
-- store_ids (null removes the key); then the columns are read back from store_ids. When one update
-- changes both a column and the same store's key in store_ids, the column wins.

-- Rows written before: merge the columns into store_ids (a column overrides the key it names),
-- then fill the columns from store_ids.
update public.artist_profiles
set store_ids = store_ids || jsonb_strip_nulls(jsonb_build_object('spotify', "streamingA_id", 'apple_music', "streamingB_id"))
where "streamingA_id" is not null or "streamingB_id" is not null;

update public.artist_profiles
set "streamingA_id" = store_ids ->> 'spotify', "streamingB_id" = store_ids ->> 'apple_music'
where "streamingA_id" is distinct from store_ids ->> 'spotify'
   or "streamingB_id" is distinct from store_ids ->> 'apple_music';

create function internal.artist_store_ids() returns trigger
language plpgsql set search_path = ''
as $$
begin
  if new.store_ids is null or jsonb_typeof(new.store_ids) <> 'object' then
    return new; -- the table's own checks refuse it
  end if;
  if tg_op = 'INSERT' then
    if new."streamingA_id" is not null then
      new.store_ids := new.store_ids || jsonb_build_object('spotify', new."streamingA_id");
    end if;
    if new."streamingB_id" is not null then
      new.store_ids := new.store_ids || jsonb_build_object('apple_music', new."streamingB_id");
    end if;
  else
    if new."streamingA_id" is distinct from old."streamingA_id" then
      new.store_ids := case when new."streamingA_id" is null then new.store_ids - 'spotify'
        else new.store_ids || jsonb_build_object('spotify', new."streamingA_id") end;
    end if;
    if new."streamingB_id" is distinct from old."streamingB_id" then
      new.store_ids := case when new."streamingB_id" is null then new.store_ids - 'apple_music'
        else new.store_ids || jsonb_build_object('apple_music', new."streamingB_id") end;
    end if;
  end if;
  -- A store id that is not a string (a number, say) is kept as its text.
  new."streamingA_id" := new.store_ids ->> 'spotify';
  new."streamingB_id" := new.store_ids ->> 'apple_music';
  return new;
end
$$;

create trigger artist_store_ids before insert or update on public.artist_profiles
  for each row execute function internal.artist_store_ids();

-- A release's `status` that is none of its values is a malformed value (400, 23514, naming the
-- column), not a refused transition (BL002, 409, which stays for a real status the caller may not
-- move to from the current one). The column's check constraint would say so, but the lifecycle
-- trigger (release_rules) runs before it; this trigger runs first (triggers fire by name) and
-- answers as the constraint does (issue 29, item 5).
create function internal.release_status_value() returns trigger
language plpgsql set search_path = ''
as $$
begin
  if new.status is not null and new.status not in ('draft', 'pending', 'submitted', 'in_review', 'approved',
      'rejected', 'delivering', 'delivered', 'live', 'takedown_requested', 'taken_down') then
    raise exception using
      errcode = 'check_violation',
      message = 'new row for relation "releases" violates check constraint "releases_status_check"',
      detail = format('status: %s is not a release status (draft, pending, submitted, in_review, approved, rejected, '
        'delivering, delivered, live, takedown_requested, taken_down)', left(new.status, 100)),
      hint = 'Set status to draft, pending or submitted; the later statuses are the operator''s.',
      column = 'status',
      table = 'releases',
      schema = 'public',
      constraint = 'releases_status_check';
  end if;
  return new;
end
$$;

create trigger release_a_status_value before insert or update of status on public.releases
  for each row execute function internal.release_status_value();
