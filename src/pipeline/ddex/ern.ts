import {
  CONTRIBUTOR_ROLE,
  copyrightLine,
  dealPeriod,
  dealTerritories,
  displayTitleText,
  type ErnMessageInput,
  isoDateTime,
  isoDuration,
  orderedTracks,
  RELEASE_TYPE,
  releaseArtist,
  releaseGenres,
  storeRole,
} from "./ern-input.ts";
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

// The input model and the tables both versions share live in ern-input.ts (ERN 3.8.2: ern382.ts).
export type {
  ErnAudioFile,
  ErnDeal,
  ErnFile,
  ErnImageFile,
  ErnMessageInput,
  ErnRelease,
  ErnTrack,
  MessageParty,
} from "./ern-input.ts";
export { CONTRIBUTOR_ROLE, dealTerritories, genreText, isoDuration, RELEASE_TYPE } from "./ern-input.ts";

function displayTitle(title: string, version: string | null): XmlChild[] {
  return [
    x("DisplayTitleText", displayTitleText(title, version)),
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
  const mainArtist = releaseArtist(release);
  const releaseArtistRef = parties.ref(mainArtist);
  const labelRef = parties.ref(release.label_name ?? mainArtist);
  const parental = (explicit: boolean) => x("ParentalWarningType", explicit ? "Explicit" : "NotExplicit");
  const genres = releaseGenres(input);
  const genre = x("Genre", x("GenreText", genres.genre), opt("SubGenre", genres.subGenre));

  const tracks = orderedTracks(input.tracks);
  const resourceRef = new Map(tracks.map((t, i) => [t.id, `A${i + 1}`]));
  const imageRef = `A${tracks.length + 1}`;

  const soundRecordings = tracks.map((t, i) => {
    const file = input.audio.get(t.id);
    const artist = t.artist_name ?? mainArtist;
    const featured = t.contributors.filter((c) => c.role === "featured_artist");
    const credited = t.contributors.filter((c) => CONTRIBUTOR_ROLE[c.role]);
    return x(
      "SoundRecording",
      x("ResourceReference", resourceRef.get(t.id) as string),
      x("Type", "MusicalWorkSoundRecording"),
      x(
        "SoundRecordingEdition",
        x("ResourceId", opt("ISRC", t.isrc)),
        copyrightLine("P", release.phonographic_copyright, release.phonographic_year),
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
      credited.map((c, n) => {
        const role = storeRole(input, c.role, { role: CONTRIBUTOR_ROLE[c.role] as string });
        return x(
          "Contributor",
          { SequenceNumber: n + 1 },
          x("ContributorPartyReference", parties.ref(c.name)),
          x("Role", role.attributes, role.value),
        );
      }),
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
    x("DisplayArtistName", mainArtist),
    x(
      "DisplayArtist",
      { SequenceNumber: 1 },
      x("ArtistPartyReference", releaseArtistRef),
      x("DisplayArtistRole", "MainArtist"),
    ),
    x("ReleaseLabelReference", labelRef),
    copyrightLine("P", release.phonographic_copyright, release.phonographic_year),
    copyrightLine("C", release.copyright, release.copyright_year),
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
  const { start, end } = dealPeriod(input);
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
      x("MessageCreatedDateTime", isoDateTime(input.createdAt)),
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
