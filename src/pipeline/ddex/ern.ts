import { opt, toXml, type XmlChild, x } from "./xml.ts";

/**
 * DDEX ERN 4.3 NewReleaseMessage for one release (docs/ddex.md): the parties, one SoundRecording
 * per track with its ISRC, duration, contributors and audio file, the front cover Image, the
 * Release with its UPC (ICPN), one TrackRelease per track, and the deals for the release's
 * territories. Children follow the schema's sequence order; only the root element is in the ERN
 * namespace (the schema's elements are unqualified).
 *
 * A takedown is the same message with every deal ended now: ERN 4 has no takedown flag (a new
 * message replaces every earlier deal, and an end-dated deal says "no longer" explicitly). A deal
 * never ends before it starts: one that has not started yet (a takedown before the release date)
 * ends when it starts, an empty period — the release is never available. Every date-time carries
 * its zone (UTC, `Z`).
 *
 * Genres are sent as their display names (`R&B/Soul`, not `rnb-soul`), the secondary genre as
 * `SubGenre`; a store with its own genre list gets its names through `genreMap` (docs/ddex.md).
 */

export const ERN_NAMESPACE = "http://ddex.net/xml/ern/43";

export interface MessageParty {
  /** A DDEX Party Identifier: PADPIDA followed by letters and digits. */
  dpid: string;
  name: string;
}

export interface ErnFile {
  /** Where the file is, relative to the message (e.g. resources/A1.flac). */
  uri: string;
  md5: string;
  bytes: number;
}

export interface ErnAudioFile extends ErnFile {
  codec: "PCM" | "FLAC";
  channels?: number | undefined;
  sampleRate?: number | undefined;
  bitsPerSample?: number | undefined;
}

export interface ErnImageFile extends ErnFile {
  codec: "JPEG" | "PNG";
  width?: number | undefined;
  height?: number | undefined;
}

export interface ErnRelease {
  id: string;
  title: string;
  version: string | null;
  release_type: string;
  artist_name: string | null;
  primary_genre: string | null;
  secondary_genre: string | null;
  /** The genres' display names from the catalogue (internal.genres), when known. */
  primary_genre_name?: string | null | undefined;
  secondary_genre_name?: string | null | undefined;
  release_date: string | null;
  original_release_date: string | null;
  upc: string | null;
  label_name: string | null;
  catalog_number: string | null;
  licensed_territories_include: string | null;
  territories: string[];
  territories_exclude: string[];
  copyright: string | null;
  copyright_year: number | null;
  phonographic_copyright: string | null;
  phonographic_year: number | null;
  explicit: boolean;
  language: string | null;
}

export interface ErnTrack {
  id: string;
  title: string;
  version: string | null;
  isrc: string | null;
  duration: number | null;
  track_number: number | null;
  disc_number: number;
  artist_name: string | null;
  explicit: boolean;
  language: string | null;
  contributors: { name: string; role: string }[];
}

/** A deal a store takes: how it may be used (DDEX CommercialModelType and UseTypes). */
export interface ErnDeal {
  commercialModel: string;
  useTypes: string[];
}

export interface ErnMessageInput {
  messageId: string;
  threadId: string;
  createdAt: Date;
  sender: MessageParty;
  recipient: MessageParty;
  /** TestMessage: the store checks it and ingests nothing. */
  test: boolean;
  release: ErnRelease;
  tracks: ErnTrack[];
  audio: Map<string, ErnAudioFile>;
  artwork: ErnImageFile | undefined;
  deals: ErnDeal[];
  /** Ends every deal at this time (or at its start, when later): the takedown. */
  endDealsAt?: Date | undefined;
  /** The store's own genre names, by Backline genre code (the store's `ddex.genres` setting). */
  genreMap?: Record<string, string> | undefined;
}

/**
 * The text a store reads for a genre: the store's own name for it when its settings map it, else
 * the catalogue's display name, else the code as it is.
 */
export function genreText(
  code: string | null,
  displayName: string | null | undefined,
  genreMap: Record<string, string> = {},
): string | null {
  if (!code) return null;
  return (Object.hasOwn(genreMap, code) ? genreMap[code] : undefined) ?? displayName ?? code;
}

/** Backline's contributor roles as DDEX ContributorRole values; artists are DisplayArtists instead. */
export const CONTRIBUTOR_ROLE: Record<string, string> = {
  remixer: "Remixer",
  composer: "Composer",
  lyricist: "Lyricist",
  songwriter: "ComposerLyricist",
  producer: "StudioProducer",
  co_producer: "CoProducer",
  mixing_engineer: "MixingEngineer",
  mastering_engineer: "MasteringEngineer",
  recording_engineer: "RecordingEngineer",
  arranger: "Arranger",
  conductor: "Conductor",
  orchestra: "Orchestra",
  performer: "Performer",
  publisher: "MusicPublisher",
};

export const RELEASE_TYPE: Record<string, string> = {
  single: "Single",
  ep: "EP",
  album: "Album",
  compilation: "Album",
  mixtape: "Album",
  soundtrack: "Album",
};

/** Seconds as an xs:duration (PT3M25S). */
export function isoDuration(seconds: number): string {
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = seconds % 60;
  return `PT${h ? `${h}H` : ""}${m ? `${m}M` : ""}${s || (!h && !m) ? `${s}S` : ""}`;
}

/**
 * The deal's territories: the world (licensed_territories_include WW, or nothing said) less
 * territories_exclude; else the include list with the `territories` it adds, less the exclusions.
 */
export function dealTerritories(release: ErnRelease): { include: string[] } | { exclude: string[] } {
  const excluded = new Set(release.territories_exclude);
  const include = release.licensed_territories_include;
  if (include === "WW" || (!include && release.territories.length === 0)) {
    return excluded.size > 0 ? { exclude: [...excluded].sort() } : { include: ["Worldwide"] };
  }
  const listed = [...new Set([...(include ? include.split(",") : []), ...release.territories])];
  return { include: listed.filter((t) => !excluded.has(t)) };
}

const iso = (d: Date) => d.toISOString().replace(/\.\d{3}Z$/, "Z");

function line(kind: "P" | "C", text: string | null, year: number | null): XmlChild {
  if (!text) return undefined;
  const marked = /^(\(|℗|©)/.test(text) ? text : `(${kind}) ${text}`;
  return x(`${kind}Line`, opt("Year", year), x(`${kind}LineText`, marked));
}

function displayTitle(title: string, version: string | null): XmlChild[] {
  return [
    x("DisplayTitleText", version ? `${title} (${version})` : title),
    x(
      "DisplayTitle",
      x("TitleText", title),
      version ? x("SubTitle", { SubTitleType: "Version" }, version) : undefined,
    ),
  ];
}

/** Parties of the message, one per distinct name, with stable references P1, P2, ... */
class Parties {
  private readonly byName = new Map<string, string>();
  ref(name: string): string {
    const known = this.byName.get(name);
    if (known) return known;
    const ref = `P${this.byName.size + 1}`;
    this.byName.set(name, ref);
    return ref;
  }
  list(): XmlChild {
    return x(
      "PartyList",
      [...this.byName].map(([name, ref]) =>
        x("Party", x("PartyReference", ref), x("PartyName", x("FullName", name))),
      ),
    );
  }
}

export function buildNewReleaseMessage(input: ErnMessageInput): string {
  const { release, sender } = input;
  const parties = new Parties();
  const releaseArtist = release.artist_name ?? "Unknown Artist";
  const releaseArtistRef = parties.ref(releaseArtist);
  const labelRef = parties.ref(release.label_name ?? releaseArtist);
  const parental = (explicit: boolean) => x("ParentalWarningType", explicit ? "Explicit" : "NotExplicit");
  const genre = x(
    "Genre",
    x("GenreText", genreText(release.primary_genre, release.primary_genre_name, input.genreMap) ?? "Unknown"),
    opt("SubGenre", genreText(release.secondary_genre, release.secondary_genre_name, input.genreMap)),
  );

  const tracks = [...input.tracks].sort(
    (a, b) =>
      a.disc_number - b.disc_number ||
      (a.track_number ?? 0) - (b.track_number ?? 0) ||
      a.id.localeCompare(b.id),
  );
  const resourceRef = new Map(tracks.map((t, i) => [t.id, `A${i + 1}`]));
  const imageRef = `A${tracks.length + 1}`;

  const soundRecordings = tracks.map((t, i) => {
    const file = input.audio.get(t.id);
    const artist = t.artist_name ?? releaseArtist;
    const featured = t.contributors.filter((c) => c.role === "featured_artist");
    const credited = t.contributors.filter((c) => CONTRIBUTOR_ROLE[c.role]);
    return x(
      "SoundRecording",
      x("ResourceReference", resourceRef.get(t.id) as string),
      x("Type", "MusicalWorkSoundRecording"),
      x(
        "SoundRecordingEdition",
        x("ResourceId", opt("ISRC", t.isrc)),
        line("P", release.phonographic_copyright, release.phonographic_year),
        file &&
          x(
            "TechnicalDetails",
            x("TechnicalResourceDetailsReference", `T${i + 1}`),
            x(
              "DeliveryFile",
              x("Type", "AudioFile"),
              x("AudioCodecType", file.codec),
              opt("NumberOfChannels", file.channels),
              opt("SamplingRate", file.sampleRate, { UnitOfMeasure: "Hz" }),
              opt("BitsPerSample", file.bitsPerSample),
              x(
                "File",
                x("URI", file.uri),
                x("HashSum", x("Algorithm", "MD5"), x("HashSumValue", file.md5)),
                x("FileSize", (file.bytes / 1024).toFixed(3)),
              ),
            ),
          ),
      ),
      displayTitle(t.title, t.version),
      x("DisplayArtistName", artist),
      x(
        "DisplayArtist",
        { SequenceNumber: 1 },
        x("ArtistPartyReference", parties.ref(artist)),
        x("DisplayArtistRole", "MainArtist"),
      ),
      featured.map((c, n) =>
        x(
          "DisplayArtist",
          { SequenceNumber: n + 2 },
          x("ArtistPartyReference", parties.ref(c.name)),
          x("DisplayArtistRole", "FeaturedArtist"),
        ),
      ),
      credited.map((c, n) =>
        x(
          "Contributor",
          { SequenceNumber: n + 1 },
          x("ContributorPartyReference", parties.ref(c.name)),
          x("Role", CONTRIBUTOR_ROLE[c.role] as string),
        ),
      ),
      x("Duration", isoDuration(t.duration ?? 0)),
      parental(t.explicit),
      opt("LanguageOfPerformance", t.language ?? release.language),
    );
  });

  const art = input.artwork;
  const image =
    art &&
    x(
      "Image",
      x("ResourceReference", imageRef),
      x("Type", "FrontCoverImage"),
      x("ResourceId", x("ProprietaryId", { Namespace: sender.dpid }, `${release.id}:cover`)),
      x(
        "TechnicalDetails",
        x("TechnicalResourceDetailsReference", `T${tracks.length + 1}`),
        x("ImageCodecType", art.codec),
        opt("ImageHeight", art.height, { UnitOfMeasure: "Pixel" }),
        opt("ImageWidth", art.width, { UnitOfMeasure: "Pixel" }),
        x(
          "File",
          x("URI", art.uri),
          x("HashSum", x("Algorithm", "MD5"), x("HashSumValue", art.md5)),
          x("FileSize", (art.bytes / 1024).toFixed(3)),
        ),
      ),
    );

  const discs = [...new Set(tracks.map((t) => t.disc_number))];
  const totalSeconds = tracks.reduce((sum, t) => sum + (t.duration ?? 0), 0);
  const mainRelease = x(
    "Release",
    x("ReleaseReference", "R0"),
    x("ReleaseType", RELEASE_TYPE[release.release_type] ?? "Album"),
    x(
      "ReleaseId",
      opt("ICPN", release.upc),
      release.catalog_number
        ? x("CatalogNumber", { Namespace: sender.dpid }, release.catalog_number)
        : undefined,
      x("ProprietaryId", { Namespace: sender.dpid }, release.id),
    ),
    displayTitle(release.title, release.version),
    x("DisplayArtistName", releaseArtist),
    x(
      "DisplayArtist",
      { SequenceNumber: 1 },
      x("ArtistPartyReference", releaseArtistRef),
      x("DisplayArtistRole", "MainArtist"),
    ),
    x("ReleaseLabelReference", labelRef),
    line("P", release.phonographic_copyright, release.phonographic_year),
    line("C", release.copyright, release.copyright_year),
    totalSeconds > 0 ? x("Duration", isoDuration(totalSeconds)) : undefined,
    genre,
    opt("ReleaseDate", release.release_date),
    opt("OriginalReleaseDate", release.original_release_date ?? release.release_date),
    parental(release.explicit || tracks.some((t) => t.explicit)),
    x(
      "ResourceGroup",
      discs.map((disc) =>
        x(
          "ResourceGroup",
          { ResourceGroupType: "Component" },
          x("SequenceNumber", disc),
          tracks
            .filter((t) => t.disc_number === disc)
            .map((t, n) =>
              x(
                "ResourceGroupContentItem",
                x("SequenceNumber", t.track_number ?? n + 1),
                x("ReleaseResourceReference", resourceRef.get(t.id) as string),
              ),
            ),
        ),
      ),
      art ? x("LinkedReleaseResourceReference", { LinkDescription: "CoverArt" }, imageRef) : undefined,
    ),
    release.release_type === "soundtrack" ? x("IsSoundtrack", "true") : undefined,
  );

  const trackReleases = tracks.map((t, i) =>
    x(
      "TrackRelease",
      x("ReleaseReference", `R${i + 1}`),
      x("ReleaseId", x("ProprietaryId", { Namespace: sender.dpid }, `${release.id}:${t.id}`)),
      displayTitle(t.title, t.version),
      x("ReleaseResourceReference", resourceRef.get(t.id) as string),
      art ? x("LinkedReleaseResourceReference", { LinkDescription: "CoverArt" }, imageRef) : undefined,
      x("ReleaseLabelReference", labelRef),
      genre,
    ),
  );

  const territories = dealTerritories(release);
  // From the release date at 00:00 UTC (the date itself is the Release's ReleaseDate), or now.
  const startAt = release.release_date ? new Date(`${release.release_date}T00:00:00Z`) : input.createdAt;
  const start = iso(startAt);
  // A takedown ends each deal now, or at its start when that is still ahead: never before it.
  const end =
    input.endDealsAt && iso(input.endDealsAt.getTime() > startAt.getTime() ? input.endDealsAt : startAt);
  const deals = x(
    "DealList",
    x(
      "ReleaseDeal",
      ["R0", ...tracks.map((_, i) => `R${i + 1}`)].map((r) => x("DealReleaseReference", r)),
      input.deals.map((deal) =>
        x(
          "Deal",
          x(
            "DealTerms",
            "include" in territories
              ? territories.include.map((c) => x("TerritoryCode", c))
              : territories.exclude.map((c) => x("ExcludedTerritoryCode", c)),
            x("ValidityPeriod", x("StartDateTime", start), end ? x("EndDateTime", end) : undefined),
            x("CommercialModelType", deal.commercialModel),
            deal.useTypes.map((u) => x("UseType", u)),
          ),
        ),
      ),
    ),
  );

  // Parties are collected while the lists above are built: render the list last, place it first.
  const body = {
    header: x(
      "MessageHeader",
      x("MessageThreadId", input.threadId),
      x("MessageId", input.messageId),
      x("MessageSender", x("PartyId", sender.dpid), x("PartyName", x("FullName", sender.name))),
      x(
        "MessageRecipient",
        x("PartyId", input.recipient.dpid),
        x("PartyName", x("FullName", input.recipient.name)),
      ),
      x("MessageCreatedDateTime", iso(input.createdAt)),
      x("MessageControlType", input.test ? "TestMessage" : "LiveMessage"),
    ),
    resources: x("ResourceList", soundRecordings, image),
    releases: x("ReleaseList", mainRelease, trackReleases),
    deals,
  };
  return toXml(
    x(
      "ern:NewReleaseMessage",
      {
        "xmlns:ern": ERN_NAMESPACE,
        "xmlns:xsi": "http://www.w3.org/2001/XMLSchema-instance",
        "xsi:schemaLocation": `${ERN_NAMESPACE} http://ddex.net/xml/ern/43/release-notification.xsd`,
        // The Audio profile is an album, EP or single with its front cover.
        ReleaseProfileVersionId: art ? "Audio" : undefined,
        LanguageAndScriptCode: release.language ?? "en",
        AvsVersionId: "4",
      },
      body.header,
      parties.list(),
      body.resources,
      body.releases,
      body.deals,
    ),
  );
}
