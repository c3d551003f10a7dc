import type { Db } from "../db/db.ts";
import type { Tx } from "../db/types.ts";
import { DdexSettings, STORE_ROLE_KEYS } from "./ddex/adapter.ts";
import { CONTRIBUTOR_ROLE } from "./ddex/ern-input.ts";
import {
  type DictionaryGenre,
  type DictionaryId,
  dictionary,
  isDictionaryId,
  resolveVocabulary,
  type StoreDictionary,
} from "./dictionaries.ts";
import { genreMapJson, storeSettingsOf } from "./stores.ts";

/**
 * A store's dictionary as platform staff see and change it (docs/ddex.md, "Store dictionaries"):
 * `backline stores dictionary` and GET/PATCH /admin/v1/stores/{code}/dictionary. The choice and
 * the overrides live in the store's `ddex` settings, checked as `stores configure` checks them;
 * internal.stores.genre_map, which the submission checks read, is written with them.
 */

export interface FieldProblem {
  param: string;
  code: string;
  message: string;
}

/** A refused change: its HTTP status, code, and the fields at fault. */
export class DictionaryError extends Error {
  readonly status: 404 | 409 | 422;
  readonly code: string;
  readonly errors: FieldProblem[];

  constructor(status: 404 | 409 | 422, code: string, message: string, errors: FieldProblem[] = []) {
    super(message);
    this.name = new.target.name;
    this.status = status;
    this.code = code;
    this.errors = errors;
  }
}

type Source = "dictionary" | "override";

export interface StoreDictionaryView {
  store: string;
  name: string;
  adapter: string | null;
  /** The built-in dictionary the store uses, or null (genres go as Backline's display names). */
  dictionary: (Pick<StoreDictionary, "id" | "name" | "source"> & { genres: DictionaryGenre[] }) | null;
  /** Whether submissions to this store are held to its genre map (a ddex store with a dictionary). */
  checks_genres: boolean;
  /** Every Backline genre, with what the store receives for it. */
  genres: { genre: string; name: string; store_genre: string | null; from: Source | null }[];
  /** Every Backline contributor role, with DDEX's value and the store's own name, if any. */
  roles: { role: string; ddex_role: string; store_role: string | null; from: Source | null }[];
}

export interface DictionaryPatch {
  /** A built-in dictionary's id; null: none (the store's genres go as display names again). */
  dictionary?: string | null | undefined;
  /** Backline genre code → the store's genre; null removes the override. */
  genres?: Record<string, string | null> | undefined;
  /** Backline contributor role → the store's name for it; null removes the override. */
  roles?: Record<string, string | null> | undefined;
}

interface StoreRow {
  code: string;
  name: string;
  settings: Record<string, unknown>;
  credentials_sealed: string | null;
  genre_map: Record<string, string> | null;
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

const stringsOf = (v: unknown): Record<string, string> =>
  isObject(v)
    ? Object.fromEntries(Object.entries(v).filter((e): e is [string, string] => typeof e[1] === "string"))
    : {};

async function storeRow(tx: Tx, code: string, lock = false): Promise<StoreRow | undefined> {
  return (
    await tx.query<StoreRow>(
      `select code, name, settings, credentials_sealed, genre_map from internal.stores where code = $1
       ${lock ? "for update" : ""}`,
      [code],
    )
  ).rows[0];
}

async function viewOf(tx: Tx, row: StoreRow): Promise<StoreDictionaryView> {
  const ddex = isObject(row.settings.ddex) ? row.settings.ddex : {};
  const id = isDictionaryId(ddex.dictionary) ? ddex.dictionary : undefined;
  const overrides = { genres: stringsOf(ddex.genres), roles: stringsOf(ddex.roles) };
  const base = id ? dictionary(id) : undefined;
  const resolved = resolveVocabulary({ dictionary: id, ...overrides });
  const catalogue = (
    await tx.query<{ code: string; name: string }>(
      "select code, name from internal.genres order by sort, code",
    )
  ).rows;
  const from = (key: string, own: Record<string, string>, map: Record<string, string> | undefined) =>
    Object.hasOwn(own, key) ? "override" : map && Object.hasOwn(map, key) ? "dictionary" : null;
  return {
    store: row.code,
    name: row.name,
    adapter: typeof row.settings.adapter === "string" ? row.settings.adapter : null,
    dictionary: base ? { id: base.id, name: base.name, source: base.source, genres: base.genres } : null,
    checks_genres: row.genre_map !== null,
    genres: catalogue.map((g) => ({
      genre: g.code,
      name: g.name,
      store_genre: resolved.genres[g.code] ?? null,
      from: from(g.code, overrides.genres, base?.genre_map),
    })),
    roles: STORE_ROLE_KEYS.map((role) => ({
      role,
      ddex_role: CONTRIBUTOR_ROLE[role] as string,
      store_role: resolved.roles[role] ?? null,
      from: from(role, overrides.roles, base?.roles),
    })),
  };
}

/** The store's dictionary and every mapping; undefined: no such store. */
export async function storeDictionary(db: Db, code: string): Promise<StoreDictionaryView | undefined> {
  return db.asService(
    async (tx) => {
      const row = await storeRow(tx, code);
      return row && viewOf(tx, row);
    },
    { readOnly: true },
  );
}

/** Overrides with the patch laid over them: a null removes one. */
function overlay(
  stored: Record<string, string>,
  given: Record<string, string | null> | undefined,
): Record<string, string> {
  const out = { ...stored };
  for (const [k, v] of Object.entries(given ?? {})) {
    if (v === null) delete out[k];
    else out[k] = v;
  }
  return out;
}

/**
 * Changes the store's dictionary and overrides. Refused: no such store (404), a store that does
 * not deliver through `ddex` (409 not_ddex), an unknown dictionary, Backline genre or role, or a
 * store genre its dictionary lacks (422 invalid_dictionary, each field named). Nothing is changed
 * when anything is refused.
 */
export async function updateStoreDictionary(
  db: Db,
  code: string,
  patch: DictionaryPatch,
): Promise<StoreDictionaryView> {
  return db.asService(async (tx) => {
    const row = await storeRow(tx, code, true);
    if (!row)
      throw new DictionaryError(404, "not_found", `no store ${code}`, [
        { param: "code", code: "not_found", message: `no store ${code}` },
      ]);
    if (row.settings.adapter !== "ddex" || !isObject(row.settings.ddex)) {
      throw new DictionaryError(
        409,
        "not_ddex",
        `store ${code} does not deliver through the ddex adapter: configure it first (backline stores configure), then choose its dictionary`,
      );
    }
    const errors: FieldProblem[] = [];
    if (patch.dictionary !== undefined && patch.dictionary !== null && !isDictionaryId(patch.dictionary)) {
      errors.push({
        param: "dictionary",
        code: "unknown_dictionary",
        message: `no dictionary ${JSON.stringify(patch.dictionary)}: apple-music, amazon-music or beatport`,
      });
    }
    const known = new Set(
      (await tx.query<{ code: string }>("select code from internal.genres")).rows.map((g) => g.code),
    );
    for (const genre of Object.keys(patch.genres ?? {})) {
      if (!known.has(genre)) {
        errors.push({
          param: `genres.${genre}`,
          code: "unknown_genre",
          message: `${genre} is not a Backline genre (GET /api/public/v1/rules)`,
        });
      }
    }
    for (const role of Object.keys(patch.roles ?? {})) {
      if (!(STORE_ROLE_KEYS as string[]).includes(role)) {
        errors.push({
          param: `roles.${role}`,
          code: "unknown_role",
          message: `${role} is not a contributor role a store names: ${STORE_ROLE_KEYS.join(", ")}`,
        });
      }
    }
    for (const [field, given] of [
      ["genres", patch.genres],
      ["roles", patch.roles],
    ] as const) {
      for (const [key, value] of Object.entries(given ?? {})) {
        if (typeof value === "string" && value.trim() === "") {
          errors.push({
            param: `${field}.${key}`,
            code: "blank",
            message: `${field}.${key} is blank: give the store's name for it, or null to remove the override`,
          });
        }
      }
    }
    if (errors.length > 0)
      throw new DictionaryError(422, "invalid_dictionary", errors.map((e) => e.message).join("; "), errors);

    const ddex = row.settings.ddex;
    const next: Record<string, unknown> = {
      ...ddex,
      genres: overlay(stringsOf(ddex.genres), patch.genres),
      roles: overlay(stringsOf(ddex.roles), patch.roles),
    };
    if (patch.dictionary === null) delete next.dictionary;
    else if (patch.dictionary !== undefined) next.dictionary = patch.dictionary;
    const settings = { ...row.settings, ddex: next };

    // The whole ddex settings checked as stores configure checks them (with the sealed credentials,
    // which the stored settings leave out).
    const parsed = DdexSettings.safeParse(storeSettingsOf(db, { ...row, settings }).ddex);
    if (!parsed.success) {
      const fields = parsed.error.issues.map((i) => {
        const path = i.path.map(String);
        const own = path[0] === "dictionary" || path[0] === "genres" || path[0] === "roles";
        return {
          param: own ? path.join(".") : ["settings", "ddex", ...path].join("."),
          code: "invalid_dictionary",
          message: `${own ? path.join(".") : ["ddex", ...path].join(".")}: ${i.message}`,
        };
      });
      throw new DictionaryError(422, "invalid_dictionary", fields.map((f) => f.message).join("; "), fields);
    }
    const updated = (
      await tx.query<StoreRow>(
        `update internal.stores set settings = $2, genre_map = $3, updated_at = now() where code = $1
         returning code, name, settings, credentials_sealed, genre_map`,
        [code, JSON.stringify(settings), genreMapJson(settings)],
      )
    ).rows[0] as StoreRow;
    return viewOf(tx, updated);
  });
}

export type { DictionaryId };
