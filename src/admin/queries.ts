import type { Db } from "../db/db.ts";
import type { Tx } from "../db/types.ts";
import { HttpError } from "../http/problem.ts";
import { retryDeadJob } from "../jobs/queue.ts";
import { CORRECTABLE_FIELDS, correctableMetadata, type DeliveryRecord } from "../pipeline/delivery.ts";
import { storagePathOf } from "../storage/keys.ts";
import type { DeskServices } from "./desk.ts";
import { delivery } from "./output.ts";
import { badCursor, iso, page } from "./spec.ts";

/**
 * The desk's reads (src/admin/desk.ts). Every list is keyset-paginated on the columns of one index
 * (migration 0022), so a page costs the same at the first item and the 100,000th: the cursor is the
 * last item's id, whose sort key is looked up in the tenant; the next page is `(key, id)` past it.
 * Every query names the tenant: another tenant's ids are not found. The cursor's timestamp is read
 * as text: a JavaScript Date keeps milliseconds, the database microseconds, and a key rounded down
 * would bring the cursor's own row back on the next page.
 */

/** How long the signed URLs of the review page live. */
export const MEDIA_URL_SECONDS = 15 * 60;

const DELIVERY_COLUMNS = `d.id, d.store, d.action, d.status, d.attempts, d.message, d.store_reference, d.correction_version,
  d.created_at, d.delivered_at, d.live_at, d.taken_down_at, d.confirmed_by, d.confirmed_via, d.confirmation_note, d.updated_at`;

interface ReleaseRefRow {
  r_id: string;
  r_account_id: string;
  r_title: string;
  r_artist_name: string | null;
  r_status: string;
}

const RELEASE_REF_COLUMNS = `r.id as r_id, r.account_id as r_account_id, r.title as r_title, r.artist_name as r_artist_name,
  r.status as r_status`;

function releaseRef(r: ReleaseRefRow) {
  return {
    id: r.r_id,
    account_id: r.r_account_id,
    title: r.r_title,
    artist_name: r.r_artist_name,
    status: r.r_status,
  };
}

/**
 * The sort key of a list's cursor row (`starting_after`, an item's id), read with `sql` ($1 the id,
 * $2 the tenant or account the list is of), with the id beside it: undefined without a cursor, 400
 * bad cursor when the row is not found there.
 */
async function cursorKey<K extends Record<string, unknown>>(
  tx: Tx,
  startingAfter: string | undefined,
  sql: string,
  scope: string,
): Promise<(K & { id: string }) | undefined> {
  if (!startingAfter) return undefined;
  const c = (await tx.query<K>(sql, [startingAfter, scope])).rows[0];
  if (!c) throw badCursor(startingAfter);
  return { ...c, id: startingAfter };
}

const JOB_COLUMNS = `j.id::text as id, j.kind, j.status, j.payload, j.attempts, j.max_attempts, j.run_at, j.last_error,
  j.created_at, j.updated_at, j.finished_at`;

/**
 * The review queue's page: $1 tenant, $2 whether after a cursor, $3 its submitted_at, $4 its id, $5 limit + 1,
 * $6 whether the cursor's release has priority. Releases with a priority_review add-on (migration 0051)
 * first, then the rest, each oldest first: a walk of the tenant's few priority orders, and one of
 * releases_review_queue skipping them.
 */
export const REVIEW_PAGE_SQL = `select q.*, coalesce(internal.release_problems(q.id), '[]'::jsonb) as problems from (
           (select r.id, r.account_id, r.title, r.artist_name, r.status, r.submitted_at, true as priority
            from public.releases r join internal.accounts a on a.id = r.account_id
            where r.status in ('submitted', 'in_review') and a.tenant_id = $1
              and r.id in (select o.release_id from internal.add_on_orders o
                where o.tenant_id = $1 and o.effect = 'priority_review' and (o.expires_at is null or o.expires_at > now()))
              and ($2::boolean is false or ($6::boolean and (r.submitted_at, r.id) > ($3::timestamptz, $4::uuid)))
            order by r.submitted_at, r.id limit $5)
           union all
           (select r.id, r.account_id, r.title, r.artist_name, r.status, r.submitted_at, false as priority
            from public.releases r join internal.accounts a on a.id = r.account_id
            where r.status in ('submitted', 'in_review') and a.tenant_id = $1
              and not exists (select 1 from internal.add_on_orders o where o.release_id = r.id
                and o.effect = 'priority_review' and (o.expires_at is null or o.expires_at > now()))
              and ($2::boolean is false or $6::boolean or (r.submitted_at, r.id) > ($3::timestamptz, $4::uuid))
            order by r.submitted_at, r.id limit $5)) q
         order by q.priority desc, q.submitted_at, q.id limit $5`;

/** Whether release `r` has priority review now (an active priority_review add-on). */
export const PRIORITY_SQL = `exists (select 1 from internal.add_on_orders o where o.release_id = r.id
  and o.effect = 'priority_review' and (o.expires_at is null or o.expires_at > now()))`;

/** The review queue's counts: $1 tenant. Counts the entries of the partial index releases_review_queue. */
export const REVIEW_COUNTS_SQL = `select count(*) filter (where r.status = 'submitted') as submitted,
                count(*) filter (where r.status = 'in_review') as in_review
         from public.releases r join internal.accounts a on a.id = r.account_id
         where r.status in ('submitted', 'in_review') and a.tenant_id = $1`;

const DELIVERY_FILTERS = `d.tenant_id = $1
           and ($2::text is null or d.status = $2) and ($3::text is null or d.store = $3)
           and ($4::uuid is null or d.release_id = $4) and ($5::text is null or d.action = $5)`;

/**
 * A page of the tenant's deliveries: $1 tenant, $2 status, $3 store, $4 release, $5 action, $6-$8
 * the cursor's (error, created_at, id), $9 limit + 1. Errors first, then the rest, each newest
 * first: two walks of release_deliveries_desk (tenant_id, (status = 'error'), created_at, id)
 * backwards, each stopping at the page's size. The plain `created_at <= cursor` beside the row
 * comparison is for the planner, which cannot estimate a row comparison and would otherwise sort
 * every delivery of the tenant for a page deep in the list.
 */
export const DELIVERIES_PAGE_SQL = `select * from (
         (select ${DELIVERY_COLUMNS}, ${RELEASE_REF_COLUMNS}
          from internal.release_deliveries d join public.releases r on r.id = d.release_id
          where ${DELIVERY_FILTERS} and (d.status = 'error')
            and ($6::boolean is null or ($6::boolean and d.created_at <= $7::timestamptz
                 and (d.created_at, d.id) < ($7::timestamptz, $8::uuid)))
          order by d.created_at desc, d.id desc limit $9)
         union all
         (select ${DELIVERY_COLUMNS}, ${RELEASE_REF_COLUMNS}
          from internal.release_deliveries d join public.releases r on r.id = d.release_id
          where ${DELIVERY_FILTERS} and (d.status = 'error') is false
            and ($6::boolean is null or $6::boolean or (d.created_at <= $7::timestamptz
                 and (d.created_at, d.id) < ($7::timestamptz, $8::uuid)))
          order by d.created_at desc, d.id desc limit $9)) q
       order by (q.status = 'error') desc, q.created_at desc, q.id desc
       limit $9`;

/** A page of takedown requests: $1 tenant, $2 status, $3-$4 the cursor's (created_at, id), $5 limit + 1. Walks takedown_requests_created backwards. */
export const TAKEDOWNS_PAGE_SQL = `select t.id, t.reason, t.status, t.status_reason, t.stores, t.created_at, t.updated_at, t.completed_at,
                ${RELEASE_REF_COLUMNS}
         from public.takedown_requests t
         join internal.accounts a on a.id = t.account_id
         join public.releases r on r.id = t.release_id
         where a.tenant_id = $1 and ($2::text is null or t.status = $2)
           and ($3::timestamptz is null or (t.created_at, t.id) < ($3::timestamptz, $4::uuid))
         order by t.created_at desc, t.id desc limit $5`;

/** A page of the tenant's jobs: $1 tenant, $2 state, $3 kind, $4 the cursor's id, $5 limit + 1. Walks jobs_tenant_status backwards. */
export const JOBS_PAGE_SQL = `select ${JOB_COLUMNS} from internal.jobs j
         where j.tenant_id = $1 and j.status = $2 and ($3::text is null or j.kind = $3)
           and ($4::bigint is null or j.id < $4::bigint)
         order by j.id desc limit $5`;

/** A page of the tenant's accounts: $1 tenant, $2 kind, $3-$4 the cursor's (created_at, id), $5 limit + 1. Walks accounts_tenant_created backwards. */
export const ACCOUNTS_PAGE_SQL = `select id, name, kind, is_sandbox, created_at, updated_at from internal.accounts
         where tenant_id = $1 and ($2::text is null or kind = $2)
           and ($3::timestamptz is null or (created_at, id) < ($3::timestamptz, $4::uuid))
         order by created_at desc, id desc limit $5`;

const read = <T>(db: Db, fn: (tx: Tx) => Promise<T>) => db.asService(fn, { readOnly: true });

// Review.

export async function reviewPage(db: Db, tenantId: string, q: { limit: number; starting_after?: string }) {
  return read(db, async (tx) => {
    const after = await cursorKey<{ submitted_at: Date | string | null; priority: boolean }>(
      tx,
      q.starting_after,
      `select r.submitted_at::text as submitted_at, ${PRIORITY_SQL} as priority
           from public.releases r join internal.accounts a on a.id = r.account_id
           where r.id = $1 and a.tenant_id = $2`,
      tenantId,
    );
    // The checks run for the page's rows only (after the limit).
    const rows = (
      await tx.query<{
        id: string;
        account_id: string;
        title: string;
        artist_name: string | null;
        status: "submitted" | "in_review";
        submitted_at: Date | null;
        priority: boolean;
        problems: { param: string; code: string; message: string }[];
      }>(REVIEW_PAGE_SQL, [
        tenantId,
        after !== undefined,
        after?.submitted_at ?? null,
        after?.id ?? null,
        q.limit + 1,
        after?.priority ?? false,
      ])
    ).rows;
    const counts = (await tx.query<{ submitted: string; in_review: string }>(REVIEW_COUNTS_SQL, [tenantId]))
      .rows[0];
    const submitted = Number(counts?.submitted ?? 0);
    const inReview = Number(counts?.in_review ?? 0);
    return {
      ...page(
        rows.map((r) => ({
          id: r.id,
          account_id: r.account_id,
          title: r.title,
          artist_name: r.artist_name,
          status: r.status,
          submitted_at: iso(r.submitted_at),
          priority: r.priority,
          problems: r.problems.map((p) => ({ param: p.param, code: p.code, message: p.message })),
        })),
        q.limit,
      ),
      counts: { submitted, in_review: inReview, total: submitted + inReview },
    };
  });
}

interface AssetRow {
  id: string;
  track_id: string | null;
  kind: "artwork" | "audio";
  object_key: string;
  filename: string | null;
  content_type: string;
  status: "uploaded" | "validating" | "valid" | "invalid";
  bytes: string | number | null;
  sha256: string | null;
  metadata: Record<string, unknown>;
  problems: { code: string; message: string }[];
  uploaded_at: Date | null;
  validated_at: Date | null;
}

function media(services: DeskServices, a: AssetRow | undefined) {
  if (!a) return null;
  const exp = Math.floor(Date.now() / 1000) + MEDIA_URL_SECONDS;
  // The storage interface's own signed download (src/storage/routes.ts), bound to this asset.
  const token = services.signer.sign({ use: "download", key: a.object_key, asset: a.id, exp });
  return {
    asset_id: a.id,
    status: a.status,
    content_type: a.content_type,
    filename: a.filename,
    bytes: a.bytes === null ? null : Number(a.bytes),
    sha256: a.sha256,
    metadata: a.metadata,
    problems: a.problems,
    uploaded_at: iso(a.uploaded_at),
    validated_at: iso(a.validated_at),
    url: `${services.publicUrl}/storage/v1/object/sign/${storagePathOf(a.object_key)}?token=${token}`,
    url_expires_at: new Date(exp * 1000).toISOString(),
  };
}

export async function releaseDetail(services: DeskServices, tenantId: string, id: string) {
  return read(services.db, async (tx) => {
    const r = (
      await tx.query<Record<string, unknown>>(
        `select r.*, a.name as account_name, a.kind as account_kind, a.is_sandbox
         from public.releases r join internal.accounts a on a.id = r.account_id
         where r.id = $1 and a.tenant_id = $2`,
        [id, tenantId],
      )
    ).rows[0];
    if (!r) return undefined;
    const [artist, tracks, assets, checks, correction, history] = [
      (
        await tx.query<Record<string, unknown>>(
          "select id, name, bio, store_ids, platform_links, localized_names from public.artist_profiles where id = $1",
          [r.artist_id],
        )
      ).rows[0],
      (
        await tx.query<Record<string, unknown>>(
          `select id, title, version, isrc, duration, track_number, disc_number, artist_name, explicit, language,
                  contributors, splits, audio_metadata
           from public.tracks where release_id = $1 order by disc_number, track_number nulls last, created_at, id`,
          [id],
        )
      ).rows,
      (
        await tx.query<AssetRow>(
          `select id, track_id, kind, object_key, filename, content_type, status, bytes, sha256, metadata, problems,
                  uploaded_at, validated_at
           from public.media_assets where release_id = $1 and status <> 'pending' and superseded_at is null`,
          [id],
        )
      ).rows,
      (
        await tx.query<{ problems: { param: string; code: string; message: string }[] | null }>(
          "select internal.release_problems($1) as problems",
          [id],
        )
      ).rows[0]?.problems ?? [],
      (
        await tx.query<{ version: number; corrected_at: Date }>(
          "select version, corrected_at from internal.release_corrections where release_id = $1",
          [id],
        )
      ).rows[0],
      (
        await tx.query<Record<string, unknown>>(
          // Who, in words: the person's e-mail, the API key's name, or the operator's backend.
          `select h.from_status, h.to_status, h.reason, h.actor_role, h.created_at,
             coalesce(u.email, case when k.id is not null then 'API key ' || coalesce(nullif(k.name, ''), k.prefix) end,
               case when h.actor_role in ('service_role', 'system', 'tenant_service') then 'operator' else h.actor_role end) as actor
           from internal.release_history h
           left join internal.users u on u.id = h.actor_user_id
           left join internal.api_keys k on k.id = h.actor_api_key_id
           where h.release_id = $1 order by h.id desc limit 50`,
          [id],
        )
      ).rows,
    ];
    const cover = assets.find((a) => a.kind === "artwork");
    const audioOf = new Map(assets.filter((a) => a.kind === "audio").map((a) => [a.track_id, a]));
    const check = (slot: "cover" | "audio", trackId: string | null, a: AssetRow | undefined) => ({
      slot,
      track_id: trackId,
      status: a ? a.status : ("missing" as const),
      problems: a
        ? a.problems
        : [{ code: "missing", message: slot === "cover" ? "No cover art uploaded." : "No audio uploaded." }],
    });
    let correctionOut = null;
    if (correction) {
      const sent = (
        await tx.query<{
          id: string;
          store: string;
          action: "insert" | "update";
          correction_version: number | null;
          delivered_at: Date | null;
          sent_metadata: Record<string, unknown> | null;
        }>(
          `select id, store, action, correction_version, delivered_at, sent_metadata from internal.release_deliveries
           where release_id = $1 and action <> 'takedown' and status in ('delivered', 'live')
           order by delivered_at desc nulls last, created_at desc, id limit 1`,
          [id],
        )
      ).rows[0];
      const now = correctableMetadata(r);
      const same = (a: unknown, b: unknown) => JSON.stringify(a ?? null) === JSON.stringify(b ?? null);
      correctionOut = {
        version: correction.version,
        corrected_at: iso(correction.corrected_at),
        delivered: sent
          ? {
              delivery_id: sent.id,
              store: sent.store,
              action: sent.action,
              correction_version: sent.correction_version,
              delivered_at: iso(sent.delivered_at),
            }
          : null,
        changes: sent?.sent_metadata
          ? CORRECTABLE_FIELDS.filter((f) => !same(sent.sent_metadata?.[f], now[f])).map((f) => ({
              field: f,
              delivered: sent.sent_metadata?.[f] ?? null,
              current: now[f] ?? null,
            }))
          : null,
      };
    }
    return {
      id: r.id,
      account: { id: r.account_id, name: r.account_name, kind: r.account_kind, is_sandbox: r.is_sandbox },
      status: r.status,
      status_reason: r.status_reason,
      submitted_at: iso(r.submitted_at as Date | null),
      created_at: iso(r.created_at as Date),
      updated_at: iso(r.updated_at as Date),
      title: r.title,
      version: r.version,
      release_type: r.release_type,
      artist_id: r.artist_id,
      artist_name: r.artist_name,
      primary_genre: r.primary_genre,
      secondary_genre: r.secondary_genre,
      genres: r.genres,
      release_date: r.release_date,
      original_release_date: r.original_release_date,
      upc: r.upc,
      label_name: r.label_name,
      catalog_number: r.catalog_number,
      licensed_territories_include: r.licensed_territories_include,
      territories: r.territories,
      territories_exclude: r.territories_exclude,
      services: r.services,
      copyright: r.copyright,
      copyright_year: r.copyright_year,
      phonographic_copyright: r.phonographic_copyright,
      phonographic_year: r.phonographic_year,
      explicit: r.explicit,
      language: r.language,
      artist: artist ?? null,
      cover: media(services, cover),
      tracks: tracks.map((t) => ({ ...t, audio: media(services, audioOf.get(t.id as string)) })),
      checks: checks.map((p) => ({ param: p.param, code: p.code, message: p.message })),
      media_checks: [
        check("cover", null, cover),
        ...tracks.map((t) => check("audio", t.id as string, audioOf.get(t.id as string))),
      ],
      correction: correctionOut,
      history: history.map((h) => ({ ...h, created_at: iso(h.created_at as Date) })),
    };
  });
}

// Deliveries.

type DeliveryRow = DeliveryRecord & ReleaseRefRow;

export async function listDeliveries(
  db: Db,
  tenantId: string,
  q: {
    limit: number;
    starting_after?: string;
    status?: string;
    store?: string;
    release_id?: string;
    action?: string;
  },
) {
  return read(db, async (tx) => {
    const after = await cursorKey<{ error: boolean; created_at: Date | string }>(
      tx,
      q.starting_after,
      `select d.status = 'error' as error, d.created_at::text as created_at from internal.release_deliveries d
           where d.id = $1 and d.tenant_id = $2`,
      tenantId,
    );
    // Walks release_deliveries_desk (tenant_id, (status = 'error'), created_at, id) backwards.
    const rows = (
      await tx.query<DeliveryRow>(DELIVERIES_PAGE_SQL, [
        tenantId,
        q.status ?? null,
        q.store ?? null,
        q.release_id ?? null,
        q.action ?? null,
        after?.error ?? null,
        after?.created_at ?? null,
        after?.id ?? null,
        q.limit + 1,
      ])
    ).rows;
    return page(
      rows.map((d) => ({ ...delivery(d), release: releaseRef(d) })),
      q.limit,
    );
  });
}

export async function deliveryDetail(db: Db, tenantId: string, id: string) {
  return read(db, async (tx) => {
    const d = (
      await tx.query<DeliveryRow & { release_id: string }>(
        `select ${DELIVERY_COLUMNS}, d.release_id, ${RELEASE_REF_COLUMNS}
         from internal.release_deliveries d
         join internal.accounts a on a.id = d.account_id
         join public.releases r on r.id = d.release_id
         where d.id = $1 and a.tenant_id = $2`,
        [id, tenantId],
      )
    ).rows[0];
    if (!d) return undefined;
    const history = (
      await tx.query<DeliveryRecord>(
        `select ${DELIVERY_COLUMNS} from internal.release_deliveries d
         where d.release_id = $1 and d.store = $2 order by d.created_at desc, d.id desc limit 100`,
        [d.release_id, d.store],
      )
    ).rows;
    const jobs = (
      await tx.query<JobRow>(
        `select ${JOB_COLUMNS} from internal.jobs j
         where j.dedupe_key = $1 and j.kind like 'delivery.%' order by j.id desc limit 50`,
        [id],
      )
    ).rows;
    const acknowledgements = (
      await tx.query<{
        name: string;
        outcome: string;
        detail: { error?: string; errors?: string[] };
        tries: number;
        received_at: Date;
        last_tried_at: Date;
      }>(
        `select f.name, f.outcome, f.detail, f.tries, f.received_at, f.last_tried_at from internal.store_inbox_files f
         where f.kind = 'acknowledgement' and f.store = $2 and $1::uuid = any(f.delivery_ids)
         order by f.last_tried_at desc, f.id limit 50`,
        [id, d.store],
      )
    ).rows;
    return {
      ...delivery(d),
      release: releaseRef(d),
      history: history.map(delivery),
      acknowledgements: acknowledgements.map((a) => ({
        file: a.name,
        outcome: a.outcome,
        error: a.detail.error ?? null,
        errors: Array.isArray(a.detail.errors) ? a.detail.errors : [],
        tries: a.tries,
        received_at: iso(a.received_at),
        last_tried_at: iso(a.last_tried_at),
      })),
      jobs: jobs.map((j) => {
        const { payload: _payload, ...rest } = jobOut(j);
        return rest;
      }),
    };
  });
}

// Takedowns.

export async function listTakedowns(
  db: Db,
  tenantId: string,
  q: { limit: number; starting_after?: string; status?: string },
) {
  return read(db, async (tx) => {
    const after = await cursorKey<{ created_at: Date | string }>(
      tx,
      q.starting_after,
      `select t.created_at::text as created_at from public.takedown_requests t join internal.accounts a on a.id = t.account_id
           where t.id = $1 and a.tenant_id = $2`,
      tenantId,
    );
    const rows = (
      await tx.query<
        ReleaseRefRow & {
          id: string;
          reason: string | null;
          status: string;
          status_reason: string | null;
          stores: {
            store: string;
            status: string;
            sent_at: string | null;
            taken_down_at: string | null;
            confirmed_by: string | null;
          }[];
          created_at: Date;
          updated_at: Date;
          completed_at: Date | null;
        }
      >(TAKEDOWNS_PAGE_SQL, [
        tenantId,
        q.status ?? null,
        after?.created_at ?? null,
        after?.id ?? null,
        q.limit + 1,
      ])
    ).rows;
    return page(
      rows.map((t) => ({
        id: t.id,
        release: releaseRef(t),
        reason: t.reason,
        status: t.status,
        status_reason: t.status_reason,
        stores: t.stores.map((s) => ({
          store: s.store,
          status: s.status,
          sent_at: s.sent_at ? iso(s.sent_at) : null,
          taken_down_at: s.taken_down_at ? iso(s.taken_down_at) : null,
          confirmed_by: s.confirmed_by ?? null,
        })),
        created_at: iso(t.created_at),
        updated_at: iso(t.updated_at),
        completed_at: iso(t.completed_at),
      })),
      q.limit,
    );
  });
}

// OAC requests.

export async function listOac(
  db: Db,
  tenantId: string,
  q: { limit: number; starting_after?: string; status?: string },
) {
  // Without a status: the queue (waiting ones, oldest first); with one: newest first.
  const queue = q.status === undefined;
  return read(db, async (tx) => {
    const after = await cursorKey<{ created_at: Date | string }>(
      tx,
      q.starting_after,
      `select o.created_at::text as created_at from internal.oac_requests o join internal.accounts a on a.id = o.account_id
           where o.id = $1 and a.tenant_id = $2`,
      tenantId,
    );
    const rows = (
      await tx.query<Record<string, unknown>>(
        `select o.id, o.artist_id, ar.name as artist_name, o.store, o.channel_url, o.status, o.created_at,
                o.status_reason, o.account_id, o.completed_at
         from internal.oac_requests o
         join internal.accounts a on a.id = o.account_id
         join public.artist_profiles ar on ar.id = o.artist_id
         where a.tenant_id = $1
           and (case when $2::text is null then o.status in ('requested', 'processing') else o.status = $2 end)
           and ($3::timestamptz is null or ${queue ? "(o.created_at, o.id) > ($3::timestamptz, $4::uuid)" : "(o.created_at, o.id) < ($3::timestamptz, $4::uuid)"})
         order by o.created_at ${queue ? "asc" : "desc"}, o.id ${queue ? "asc" : "desc"} limit $5`,
        [tenantId, q.status ?? null, after?.created_at ?? null, after?.id ?? null, q.limit + 1],
      )
    ).rows;
    return page(
      rows.map((o) => ({
        ...o,
        created_at: iso(o.created_at as Date),
        completed_at: iso(o.completed_at as Date | null),
      })),
      q.limit,
    );
  });
}

// Jobs.

interface JobRow {
  id: string;
  kind: string;
  status: "queued" | "running" | "succeeded" | "dead";
  payload: Record<string, unknown>;
  attempts: number;
  max_attempts: number;
  run_at: Date;
  last_error: string | null;
  created_at: Date;
  updated_at: Date;
  finished_at: Date | null;
}

function jobOut(j: JobRow) {
  return {
    id: j.id,
    kind: j.kind,
    status: j.status,
    attempts: j.attempts,
    max_attempts: j.max_attempts,
    run_at: iso(j.run_at),
    last_error: j.last_error,
    created_at: iso(j.created_at),
    updated_at: iso(j.updated_at),
    finished_at: iso(j.finished_at),
    payload: j.payload,
  };
}

export async function listJobs(
  db: Db,
  tenantId: string,
  q: { limit: number; starting_after?: string; state: string; kind?: string },
) {
  return read(db, async (tx) => {
    // Walks jobs_tenant_status (tenant_id, status, id) backwards: newest first.
    const rows = (
      await tx.query<JobRow>(JOBS_PAGE_SQL, [
        tenantId,
        q.state,
        q.kind ?? null,
        q.starting_after ?? null,
        q.limit + 1,
      ])
    ).rows;
    return page(rows.map(jobOut), q.limit);
  });
}

export async function retryJob(db: Db, tenantId: string, id: string) {
  const found = await read(
    db,
    async (tx) =>
      (
        await tx.query<{ status: string }>(
          "select status from internal.jobs where id = $1::bigint and tenant_id = $2",
          [id, tenantId],
        )
      ).rows[0],
  );
  if (!found) throw new HttpError(404, "not_found", `no job ${id}`, "id");
  if (found.status !== "dead") {
    throw new HttpError(409, "invalid_state", `job ${id} is ${found.status}; only a dead job is retried`);
  }
  // The row as the retry left it (the worker may claim it a moment later).
  const retried = await retryDeadJob(db, id, { tenantId });
  if (!retried) {
    throw new HttpError(
      409,
      "invalid_state",
      `job ${id} was not queued again: another job of its kind is already queued or running for the same work`,
    );
  }
  return jobOut(retried);
}

// Accounts.

interface AccountRow {
  id: string;
  name: string;
  kind: "label" | "artist";
  is_sandbox: boolean;
  created_at: Date;
  updated_at: Date;
}

const accountOut = (a: AccountRow) => ({
  id: a.id,
  name: a.name,
  kind: a.kind,
  is_sandbox: a.is_sandbox,
  created_at: iso(a.created_at),
  updated_at: iso(a.updated_at),
});

export async function listAccounts(
  db: Db,
  tenantId: string,
  q: { limit: number; starting_after?: string; kind?: string },
) {
  return read(db, async (tx) => {
    const after = await cursorKey<{ created_at: Date | string }>(
      tx,
      q.starting_after,
      "select created_at::text as created_at from internal.accounts where id = $1 and tenant_id = $2",
      tenantId,
    );
    const rows = (
      await tx.query<AccountRow>(ACCOUNTS_PAGE_SQL, [
        tenantId,
        q.kind ?? null,
        after?.created_at ?? null,
        after?.id ?? null,
        q.limit + 1,
      ])
    ).rows;
    return page(rows.map(accountOut), q.limit);
  });
}

export async function accountDetail(db: Db, tenantId: string, id: string) {
  return read(db, async (tx) => {
    const a = (
      await tx.query<AccountRow>(
        "select id, name, kind, is_sandbox, created_at, updated_at from internal.accounts where id = $1 and tenant_id = $2",
        [id, tenantId],
      )
    ).rows[0];
    if (!a) return undefined;
    const members = (
      await tx.query<{
        user_id: string;
        email: string | null;
        role: string;
        created_at: Date;
        last_sign_in_at: Date | null;
      }>(
        `select m.user_id, u.email, m.role, m.created_at, u.last_sign_in_at
         from internal.memberships m join internal.users u on u.id = m.user_id
         where m.account_id = $1 and u.deleted_at is null order by m.created_at, m.user_id limit 500`,
        [id],
      )
    ).rows;
    const invitations = (
      await tx.query<{ id: string; email: string; role: string; created_at: Date; accepted_at: Date | null }>(
        `select id, email, role, created_at, accepted_at from internal.invitations
         where account_id = $1 and accepted_at is null order by created_at desc, id limit 500`,
        [id],
      )
    ).rows;
    const counts = (
      await tx.query<{ releases: string; artists: string; api_keys: string }>(
        `select (select count(*) from public.releases where account_id = $1) as releases,
                (select count(*) from public.artist_profiles where account_id = $1) as artists,
                (select count(*) from internal.api_keys where account_id = $1 and status <> 'revoked') as api_keys`,
        [id],
      )
    ).rows[0];
    return {
      ...accountOut(a),
      members: members.map((m) => ({
        ...m,
        created_at: iso(m.created_at),
        last_sign_in_at: iso(m.last_sign_in_at),
      })),
      invitations: invitations.map((i) => ({
        ...i,
        created_at: iso(i.created_at),
        accepted_at: iso(i.accepted_at),
      })),
      counts: {
        releases: Number(counts?.releases ?? 0),
        artists: Number(counts?.artists ?? 0),
        api_keys: Number(counts?.api_keys ?? 0),
      },
    };
  });
}

export async function apiKeysOf(
  db: Db,
  tenantId: string,
  accountId: string,
  q: { limit: number; starting_after?: string },
) {
  return read(db, async (tx) => {
    const found = await tx.query("select 1 from internal.accounts where id = $1 and tenant_id = $2", [
      accountId,
      tenantId,
    ]);
    if (found.rows.length === 0) return undefined;
    const after = await cursorKey<{ created_at: Date | string }>(
      tx,
      q.starting_after,
      "select created_at::text as created_at from internal.api_keys where id = $1 and account_id = $2",
      accountId,
    );
    // Never the hash, never a secret: the visible prefix names a key.
    const rows = (
      await tx.query<Record<string, unknown>>(
        `select id, name, mode, prefix, scopes, account_role, status, expires_at, last_used_at, created_at, revoked_at
         from internal.api_keys where account_id = $1
           and ($2::timestamptz is null or (created_at, id) < ($2::timestamptz, $3::uuid))
         order by created_at desc, id desc limit $4`,
        [accountId, after?.created_at ?? null, after?.id ?? null, q.limit + 1],
      )
    ).rows;
    return page(
      rows.map((k) => ({
        ...k,
        expires_at: iso(k.expires_at as Date | null),
        last_used_at: iso(k.last_used_at as Date | null),
        created_at: iso(k.created_at as Date),
        revoked_at: iso(k.revoked_at as Date | null),
      })),
      q.limit,
    );
  });
}
