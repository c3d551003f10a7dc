import type { Db } from "../db/db.ts";

/**
 * The validation catalogues (migration 0007): ISO territories, the operator's genres and stores.
 * Read through the database once a minute per process, so an operator's change to the store list
 * reaches every process within that time. GET /api/public/v1/rules publishes them.
 */
export interface Store {
  code: string;
  name: string;
  kind: "dsp" | "download" | "ugc";
  offers_oac: boolean;
}

export interface Catalogue {
  territories: { code: string; name: string }[];
  genres: { code: string; name: string }[];
  stores: Store[];
  territoryCodes: ReadonlySet<string>;
  genreCodes: ReadonlySet<string>;
  storeCodes: ReadonlySet<string>;
}

/** The territory selector meaning every territory (with `territories_exclude` for exceptions). */
export const WORLDWIDE = "WW";

export const RELEASE_TYPES = ["single", "ep", "album", "compilation", "mixtape", "soundtrack"] as const;

export const CONTRIBUTOR_ROLES = [
  "primary_artist",
  "featured_artist",
  "remixer",
  "composer",
  "lyricist",
  "songwriter",
  "producer",
  "co_producer",
  "mixing_engineer",
  "mastering_engineer",
  "recording_engineer",
  "arranger",
  "conductor",
  "orchestra",
  "performer",
  "publisher",
] as const;

const TTL_MS = 60_000;

export class CatalogueCache {
  private readonly db: Db;
  private cached: { value: Promise<Catalogue>; until: number } | undefined;

  constructor(db: Db) {
    this.db = db;
  }

  get(): Promise<Catalogue> {
    if (this.cached && this.cached.until > Date.now()) return this.cached.value;
    const value = this.load();
    this.cached = { value, until: Date.now() + TTL_MS };
    value.catch(() => {
      this.cached = undefined;
    });
    return value;
  }

  private load(): Promise<Catalogue> {
    return this.db.asService(
      async (tx) => {
        const territories = (
          await tx.query<{ code: string; name: string }>(
            "select code, name from internal.territories order by code",
          )
        ).rows;
        const genres = (
          await tx.query<{ code: string; name: string }>(
            "select code, name from internal.genres order by sort, code",
          )
        ).rows;
        const stores = (
          await tx.query<Store>(
            "select code, name, kind, offers_oac from internal.stores where enabled order by sort, code",
          )
        ).rows;
        return {
          territories,
          genres,
          stores,
          territoryCodes: new Set(territories.map((t) => t.code)),
          genreCodes: new Set(genres.map((g) => g.code)),
          storeCodes: new Set(stores.map((s) => s.code)),
        };
      },
      { readOnly: true },
    );
  }
}
