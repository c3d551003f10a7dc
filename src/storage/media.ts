import { stat } from "node:fs/promises";
import path from "node:path";
import type { ObjectStore } from "./driver.ts";

/**
 * Where a release's media lies in Backline's local storage (DATA_DIR/storage): the front cover at
 * `artwork/<account>/<release>/cover.{jpg,png}`, a track's audio at
 * `audio/<account>/<release>/<track>.{flac,wav}`. The upload routes write there; the delivery
 * adapters read from there.
 */
export interface MediaFile {
  path: string;
  bytes: number;
  /** Lower-case extension without the dot. */
  ext: string;
  /** Removes a temporary copy (media from object storage); absent for files read in place. */
  release?(): Promise<void>;
}

/** Where the delivery adapters find a release's media. */
export interface MediaSource {
  artwork(accountId: string, releaseId: string, signal?: AbortSignal): Promise<MediaFile | undefined>;
  audio(
    accountId: string,
    releaseId: string,
    trackId: string,
    signal?: AbortSignal,
  ): Promise<MediaFile | undefined>;
}

const ARTWORK_EXTS = ["jpg", "jpeg", "png"];
const AUDIO_EXTS = ["flac", "wav"];
const ID = /^[0-9a-f-]{36}$/i;

export class LocalMedia implements MediaSource {
  readonly root: string;

  constructor(root: string) {
    this.root = path.resolve(root);
  }

  artwork(accountId: string, releaseId: string): Promise<MediaFile | undefined> {
    return this.find(["artwork", accountId, releaseId], "cover", ARTWORK_EXTS);
  }

  audio(accountId: string, releaseId: string, trackId: string): Promise<MediaFile | undefined> {
    return this.find(["audio", accountId, releaseId], trackId, AUDIO_EXTS);
  }

  /** The folder a file of this kind goes to (made of ids only, so it cannot leave the root). */
  folder(kind: "artwork" | "audio", accountId: string, releaseId: string): string {
    if (!ID.test(accountId) || !ID.test(releaseId)) throw new Error("media paths are made of ids");
    return path.join(this.root, kind, accountId.toLowerCase(), releaseId.toLowerCase());
  }

  private async find(
    parts: [string, string, string],
    base: string,
    exts: string[],
  ): Promise<MediaFile | undefined> {
    if (!ID.test(parts[1]) || !ID.test(parts[2]) || (base !== "cover" && !ID.test(base))) return undefined;
    const dir = this.folder(parts[0] as "artwork" | "audio", parts[1], parts[2]);
    for (const ext of exts) {
      const file = path.join(dir, `${base.toLowerCase()}.${ext}`);
      const s = await stat(file).catch(() => undefined);
      if (s?.isFile()) return { path: file, bytes: s.size, ext };
    }
    return undefined;
  }
}

/**
 * The same layout in any object store (S3): each file found is copied to a temporary local file for
 * the packager, and `release()` removes the copy.
 */
export class StoreMedia implements MediaSource {
  private readonly store: ObjectStore;

  constructor(store: ObjectStore) {
    this.store = store;
  }

  artwork(accountId: string, releaseId: string, signal?: AbortSignal): Promise<MediaFile | undefined> {
    return this.find(`artwork/${accountId}/${releaseId}/cover`, ARTWORK_EXTS, signal);
  }

  audio(
    accountId: string,
    releaseId: string,
    trackId: string,
    signal?: AbortSignal,
  ): Promise<MediaFile | undefined> {
    return this.find(`audio/${accountId}/${releaseId}/${trackId}`, AUDIO_EXTS, signal);
  }

  private async find(base: string, exts: string[], signal?: AbortSignal): Promise<MediaFile | undefined> {
    if (!/^[a-z]+(\/[0-9a-f-]{36}){2}\/(cover|[0-9a-f-]{36})$/i.test(base)) return undefined;
    for (const ext of exts) {
      const key = `${base.toLowerCase()}.${ext}`;
      const info = await this.store.stat(key);
      if (!info) continue;
      const copy = await this.store.localCopy(key, signal);
      return { path: copy.path, bytes: info.bytes, ext, release: copy.release };
    }
    return undefined;
  }
}
