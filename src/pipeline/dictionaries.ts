import { readFileSync } from "node:fs";

/**
 * Store dictionaries (docs/ddex.md, "Store dictionaries"): a store's own genre list and role
 * vocabulary, and how Backline's genres and contributor roles map onto them. Built-in ones are
 * data files beside this module (src/pipeline/dictionaries/<id>.json), transcribed from each
 * store's published list, its source named in the file. A store chooses one in its settings
 * (`ddex.dictionary`) and may override single mappings (`ddex.genres`, `ddex.roles`). For a
 * store with a dictionary, a release's genre without a mapping is a submission problem naming the
 * store (internal.release_problems reads internal.stores.genre_map, which storeGenreMapColumn
 * computes whenever a store's settings are written, and at start).
 */

export const DICTIONARY_IDS = ["apple-music", "amazon-music", "beatport"] as const;
export type DictionaryId = (typeof DICTIONARY_IDS)[number];

export interface DictionaryGenre {
  /** The store's genre as its list writes it, and as the ERN message's GenreText carries it. */
  name: string;
  /** The store's code for it, where its list gives one. */
  code?: string;
  /** The genre it sits under in the store's list, for a sub-genre. */
  parent?: string;
}

export interface StoreDictionary {
  id: DictionaryId;
  name: string;
  source: { document: string; version: string; transcribed: string };
  genres: DictionaryGenre[];
  /** Backline genre code → the store's genre name (one of `genres`). */
  genre_map: Record<string, string>;
  /** Backline contributor role → the store's own name for it; a role left out goes as DDEX's. */
  roles: Record<string, string>;
}

const loaded = new Map<DictionaryId, StoreDictionary>();

/** A built-in dictionary, read once from its data file. */
export function dictionary(id: DictionaryId): StoreDictionary {
  let found = loaded.get(id);
  if (!found) {
    found = JSON.parse(
      readFileSync(new URL(`./dictionaries/${id}.json`, import.meta.url), "utf8"),
    ) as StoreDictionary;
    loaded.set(id, found);
  }
  return found;
}

export const isDictionaryId = (v: unknown): v is DictionaryId =>
  typeof v === "string" && (DICTIONARY_IDS as readonly string[]).includes(v);

/** Every built-in dictionary. */
export const dictionaries = (): StoreDictionary[] => DICTIONARY_IDS.map(dictionary);

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

const stringsOf = (v: unknown): Record<string, string> =>
  isObject(v)
    ? Object.fromEntries(Object.entries(v).filter((e): e is [string, string] => typeof e[1] === "string"))
    : {};

/** What a store's `ddex` settings say about its vocabulary. */
export interface VocabularySettings {
  dictionary?: DictionaryId | undefined;
  genres?: Record<string, string> | undefined;
  roles?: Partial<Record<string, string>> | undefined;
}

/**
 * The names the store reads: its dictionary's mappings with the store's overrides laid over them.
 * Without a dictionary, the overrides alone (the `genres` map of Backline 1.1).
 */
export function resolveVocabulary(settings: VocabularySettings): {
  genres: Record<string, string>;
  roles: Record<string, string>;
} {
  const base = settings.dictionary ? dictionary(settings.dictionary) : undefined;
  return {
    genres: { ...(base?.genre_map ?? {}), ...stringsOf(settings.genres) },
    roles: { ...(base?.roles ?? {}), ...stringsOf(settings.roles) },
  };
}

/**
 * internal.stores.genre_map for these settings: the resolved genre map of a `ddex` store with a
 * dictionary, which the submission checks hold a release's genres against; null for every other
 * store (no check: its genres go as their display names, as before dictionaries).
 */
export function storeGenreMapColumn(settings: Record<string, unknown>): Record<string, string> | null {
  const ddex = settings.ddex;
  if (settings.adapter !== "ddex" || !isObject(ddex) || !isDictionaryId(ddex.dictionary)) return null;
  return resolveVocabulary({ dictionary: ddex.dictionary, genres: stringsOf(ddex.genres) }).genres;
}
