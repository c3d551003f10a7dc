/**
 * Store dictionaries over /admin/v1 (docs/ddex.md, "Store dictionaries"), for platform staff: a
 * store's dictionary with every mapping, and its change (a dictionary chosen, overrides set or
 * removed).
 */
import { admin } from "./admin.ts";

export interface DictionaryGenre {
  name: string;
  code?: string;
  parent?: string;
}

export interface StoreDictionary {
  store: string;
  name: string;
  adapter: string | null;
  dictionary: {
    id: string;
    name: string;
    source: { document: string; version: string; transcribed: string };
    genres: DictionaryGenre[];
  } | null;
  checks_genres: boolean;
  genres: {
    genre: string;
    name: string;
    store_genre: string | null;
    from: "dictionary" | "override" | null;
  }[];
  roles: {
    role: string;
    ddex_role: string;
    store_role: string | null;
    from: "dictionary" | "override" | null;
  }[];
}

export interface StoreDictionaryPatch {
  dictionary?: string | null;
  genres?: Record<string, string | null>;
  roles?: Record<string, string | null>;
}

/** The built-in dictionaries a store can use. */
export const DICTIONARIES = [
  { id: "apple-music", name: "Apple Music" },
  { id: "amazon-music", name: "Amazon Music" },
  { id: "beatport", name: "Beatport" },
] as const;

const id = (code: string) => encodeURIComponent(code);

export const dictionaryApi = {
  storeDictionary: (code: string) => admin<StoreDictionary>("GET", `/stores/${id(code)}/dictionary`),
  patchStoreDictionary: (code: string, body: StoreDictionaryPatch) =>
    admin<StoreDictionary>("PATCH", `/stores/${id(code)}/dictionary`, body),
};
