import {
  copyrightLine,
  dealPeriod,
  dealTerritories,
  type ErnMessageInput,
  type ErnTrack,
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
 * DDEX ERN 3.8.2 NewReleaseMessage, for stores that still take ERN 3 (docs/ddex.md, "ERN
 * versions"): the same release as ern.ts writes in ERN 4.3 — same titles, artists, contributors,
 * identifiers, P and C lines, genres, parental warnings, deals and territories (ern-input.ts) —
 * in 3.8.2's shape: no PartyList (names are written where they are used), each resource's and
 * release's details in a `…DetailsByTerritory` block (Worldwide), track releases as Releases of
 * type TrackRelease, files as a name, a folder and an MD5 HashSum.
 *
 * Contributors split in two as 3.8.2 asks: roles in the recording (producer, conductor,
 * engineers…) are ResourceContributors, roles in the musical work (composer, lyricist, arranger,
 * publisher) IndirectResourceContributors. A role 3.8.2's value set lacks (remixer, co-producer,
 * the engineers) is `UserDefined` with ERN 4.3's name as its UserDefinedValue.
 *
 * A takedown keeps each deal's commercial model and territories and replaces its usage with
 * ERN 3's `TakeDown` flag, valid from the takedown's time. `UpdateIndicator` is left out (DDEX
 * deprecates it): an update is the whole message again, as in 4.3.
 */

export const ERN_382_NAMESPACE = "http://ddex.net/xml/ern/382";

type ContributorKind = "ResourceContributor" | "IndirectResourceContributor";

/** Backline's contributor roles in ERN 3.8.2: which list they go in, and the value (UserDefined: ERN 4.3's). */
export const CONTRIBUTOR_ROLE_382: Record<
  string,
  { kind: ContributorKind; role: string; userDefined?: string }
> = {
  remixer: { kind: "ResourceContributor", role: "UserDefined", userDefined: "Remixer" },
  composer: { kind: "IndirectResourceContributor", role: "Composer" },
  lyricist: { kind: "IndirectResourceContributor", role: "Lyricist" },
  songwriter: { kind: "IndirectResourceContributor", role: "ComposerLyricist" },
  producer: { kind: "ResourceContributor", role: "Producer" },
  co_producer: { kind: "ResourceContributor", role: "UserDefined", userDefined: "CoProducer" },
  mixing_engineer: { kind: "ResourceContributor", role: "UserDefined", userDefined: "MixingEngineer" },
  mastering_engineer: { kind: "ResourceContributor", role: "UserDefined", userDefined: "MasteringEngineer" },
  recording_engineer: { kind: "ResourceContributor", role: "UserDefined", userDefined: "RecordingEngineer" },
  arranger: { kind: "IndirectResourceContributor", role: "Arranger" },
  conductor: { kind: "ResourceContributor", role: "Conductor" },
  orchestra: { kind: "ResourceContributor", role: "Orchestra" },
  performer: { kind: "ResourceContributor", role: "AssociatedPerformer" },
  publisher: { kind: "IndirectResourceContributor", role: "MusicPublisher" },
};

/** Release profiles of DDEX's Common Release Types 1.4, for a release with its cover. */
const PROFILE: Record<string, string> = {
  Single: "CommonReleaseTypes/14/AudioSingle",
  EP: "CommonReleaseTypes/14/AudioAlbumMusicOnly",
  Album: "CommonReleaseTypes/14/AudioAlbumMusicOnly",
};

const WORLDWIDE = x("TerritoryCode", "Worldwide");

/** 3.8.2's LanguageOfPerformance is an ISO 639-1 code: the primary subtag of a BCP 47 tag, when it is one. */
function performanceLanguage(tag: string | null): string | undefined {
  const primary = tag?.split("-")[0]?.toLowerCase();
  return primary && /^[a-z]{2}$/.test(primary) ? primary : undefined;
}

function titles(title: string, version: string | null): XmlChild[] {
  const sub = version ? x("SubTitle", { SubTitleType: "Version" }, version) : undefined;
  return [
    x("Title", { TitleType: "FormalTitle" }, x("TitleText", title), sub),
    x("Title", { TitleType: "DisplayTitle" }, x("TitleText", title), sub),
  ];
}

const referenceTitle = (title: string, version: string | null) =>
  x("ReferenceTitle", x("TitleText", title), opt("SubTitle", version));

const party = (name: string) => x("PartyName", x("FullName", name));

function displayArtists(main: string, featured: string[]): XmlChild[] {
  return [
    x("DisplayArtist", { SequenceNumber: 1 }, party(main), x("ArtistRole", "MainArtist")),
    featured.map((name, n) =>
      x("DisplayArtist", { SequenceNumber: n + 2 }, party(name), x("ArtistRole", "FeaturedArtist")),
    ),
  ];
}

function contributors(input: ErnMessageInput, track: ErnTrack, kind: ContributorKind): XmlChild[] {
  const roleElement =
    kind === "ResourceContributor" ? "ResourceContributorRole" : "IndirectResourceContributorRole";
  return track.contributors
    .filter((c) => CONTRIBUTOR_ROLE_382[c.role]?.kind === kind)
    .map((c, n) => {
      const role = storeRole(
        input,
        c.role,
        CONTRIBUTOR_ROLE_382[c.role] as { role: string; userDefined?: string },
      );
      return x(kind, { SequenceNumber: n + 1 }, party(c.name), x(roleElement, role.attributes, role.value));
    });
}

function file(uri: string, md5: string): XmlChild {
  const slash = uri.lastIndexOf("/");
  return x(
    "File",
    x("FileName", uri.slice(slash + 1)),
    slash >= 0 ? x("FilePath", uri.slice(0, slash + 1)) : undefined,
    x("HashSum", x("HashSum", md5), x("HashSumAlgorithmType", "MD5")),
  );
}

const parental = (explicit: boolean) => x("ParentalWarningType", explicit ? "Explicit" : "NotExplicit");

export function buildNewReleaseMessage382(input: ErnMessageInput): string {
  const { release, sender } = input;
  const namespace = `DPID:${sender.dpid}`;
  const mainArtist = releaseArtist(release);
  const label = release.label_name ?? mainArtist;
  const genres = releaseGenres(input);
  const genre = x("Genre", x("GenreText", genres.genre), opt("SubGenre", genres.subGenre));
  const releaseType = RELEASE_TYPE[release.release_type] ?? "Album";

  const tracks = orderedTracks(input.tracks);
  const resourceRef = new Map(tracks.map((t, i) => [t.id, `A${i + 1}`]));
  const art = input.artwork;
  const imageRef = `A${tracks.length + 1}`;
  const artistOf = (t: ErnTrack) => t.artist_name ?? mainArtist;
  const featuredOf = (t: ErnTrack) =>
    t.contributors.filter((c) => c.role === "featured_artist").map((c) => c.name);

  const soundRecordings = tracks.map((t, i) => {
    const audio = input.audio.get(t.id);
    return x(
      "SoundRecording",
      x("SoundRecordingType", "MusicalWorkSoundRecording"),
      x(
        "SoundRecordingId",
        t.isrc ? x("ISRC", t.isrc) : x("ProprietaryId", { Namespace: namespace }, `${release.id}:${t.id}`),
      ),
      x("ResourceReference", resourceRef.get(t.id) as string),
      referenceTitle(t.title, t.version),
      opt("LanguageOfPerformance", performanceLanguage(t.language ?? release.language)),
      x("Duration", isoDuration(t.duration ?? 0)),
      x(
        "SoundRecordingDetailsByTerritory",
        WORLDWIDE,
        titles(t.title, t.version),
        displayArtists(artistOf(t), featuredOf(t)),
        contributors(input, t, "ResourceContributor"),
        contributors(input, t, "IndirectResourceContributor"),
        x("DisplayArtistName", artistOf(t)),
        opt("LabelName", release.label_name),
        copyrightLine("P", release.phonographic_copyright, release.phonographic_year),
        genre,
        parental(t.explicit),
        audio &&
          x(
            "TechnicalSoundRecordingDetails",
            x("TechnicalResourceDetailsReference", `T${i + 1}`),
            x("AudioCodecType", audio.codec),
            opt("NumberOfChannels", audio.channels),
            opt("SamplingRate", audio.sampleRate, { UnitOfMeasure: "Hz" }),
            opt("BitsPerSample", audio.bitsPerSample),
            file(audio.uri, audio.md5),
          ),
      ),
    );
  });

  const image =
    art &&
    x(
      "Image",
      x("ImageType", "FrontCoverImage"),
      x("ImageId", x("ProprietaryId", { Namespace: namespace }, `${release.id}:cover`)),
      x("ResourceReference", imageRef),
      x(
        "ImageDetailsByTerritory",
        WORLDWIDE,
        x(
          "TechnicalImageDetails",
          x("TechnicalResourceDetailsReference", `T${tracks.length + 1}`),
          x("ImageCodecType", art.codec),
          opt("ImageHeight", art.height, { UnitOfMeasure: "Pixel" }),
          opt("ImageWidth", art.width, { UnitOfMeasure: "Pixel" }),
          file(art.uri, art.md5),
        ),
      ),
    );

  const primary = (ref: string) =>
    x("ReleaseResourceReference", { ReleaseResourceType: "PrimaryResource" }, ref);
  const coverItem =
    art &&
    x(
      "ResourceGroupContentItem",
      x("ResourceType", "Image"),
      x("ReleaseResourceReference", { ReleaseResourceType: "SecondaryResource" }, imageRef),
    );
  const resourceList = (refs: string[]) =>
    x(
      "ReleaseResourceReferenceList",
      refs.map(primary),
      art ? x("ReleaseResourceReference", { ReleaseResourceType: "SecondaryResource" }, imageRef) : undefined,
    );
  const trackItem = (t: ErnTrack, sequence: number) =>
    x(
      "ResourceGroupContentItem",
      x("SequenceNumber", sequence),
      x("ResourceType", "SoundRecording"),
      primary(resourceRef.get(t.id) as string),
    );

  const discs = [...new Set(tracks.map((t) => t.disc_number))];
  const totalSeconds = tracks.reduce((sum, t) => sum + (t.duration ?? 0), 0);
  const mainRelease = x(
    "Release",
    { IsMainRelease: "true" },
    x(
      "ReleaseId",
      release.upc ? x("ICPN", { IsEan: release.upc.length === 13 }, release.upc) : undefined,
      release.catalog_number
        ? x("CatalogNumber", { Namespace: namespace }, release.catalog_number)
        : undefined,
      x("ProprietaryId", { Namespace: namespace }, release.id),
    ),
    x("ReleaseReference", "R0"),
    referenceTitle(release.title, release.version),
    resourceList(tracks.map((t) => resourceRef.get(t.id) as string)),
    x("ReleaseType", releaseType),
    x(
      "ReleaseDetailsByTerritory",
      WORLDWIDE,
      x("DisplayArtistName", mainArtist),
      x("LabelName", label),
      titles(release.title, release.version),
      displayArtists(mainArtist, []),
      parental(release.explicit || tracks.some((t) => t.explicit)),
      x(
        "ResourceGroup",
        discs.map((disc) =>
          x(
            "ResourceGroup",
            x("SequenceNumber", disc),
            tracks.filter((t) => t.disc_number === disc).map((t, n) => trackItem(t, t.track_number ?? n + 1)),
          ),
        ),
        coverItem,
      ),
      genre,
      opt("ReleaseDate", release.release_date),
      opt("OriginalReleaseDate", release.original_release_date ?? release.release_date),
    ),
    totalSeconds > 0 ? x("Duration", isoDuration(totalSeconds)) : undefined,
    copyrightLine("P", release.phonographic_copyright, release.phonographic_year),
    copyrightLine("C", release.copyright, release.copyright_year),
  );

  const trackReleases = tracks.map((t, i) =>
    x(
      "Release",
      x(
        "ReleaseId",
        opt("ISRC", t.isrc),
        x("ProprietaryId", { Namespace: namespace }, `${release.id}:${t.id}`),
      ),
      x("ReleaseReference", `R${i + 1}`),
      referenceTitle(t.title, t.version),
      resourceList([resourceRef.get(t.id) as string]),
      x("ReleaseType", "TrackRelease"),
      x(
        "ReleaseDetailsByTerritory",
        WORLDWIDE,
        x("DisplayArtistName", artistOf(t)),
        x("LabelName", label),
        titles(t.title, t.version),
        displayArtists(artistOf(t), featuredOf(t)),
        parental(t.explicit),
        x("ResourceGroup", trackItem(t, 1), coverItem),
        genre,
      ),
      t.duration ? x("Duration", isoDuration(t.duration)) : undefined,
      copyrightLine("P", release.phonographic_copyright, release.phonographic_year),
    ),
  );

  const territories = dealTerritories(release);
  const { start } = dealPeriod(input);
  const takedownAt = input.endDealsAt && isoDateTime(input.endDealsAt);
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
            x("CommercialModelType", deal.commercialModel),
            takedownAt
              ? x("TakeDown", "true")
              : x(
                  "Usage",
                  deal.useTypes.map((u) => x("UseType", u)),
                ),
            "include" in territories
              ? territories.include.map((c) => x("TerritoryCode", c))
              : territories.exclude.map((c) => x("ExcludedTerritoryCode", c)),
            x("ValidityPeriod", x("StartDateTime", takedownAt ?? start)),
          ),
        ),
      ),
    ),
  );

  return toXml(
    x(
      "ern:NewReleaseMessage",
      {
        "xmlns:ern": ERN_382_NAMESPACE,
        "xmlns:xsi": "http://www.w3.org/2001/XMLSchema-instance",
        "xsi:schemaLocation": `${ERN_382_NAMESPACE} http://ddex.net/xml/ern/382/release-notification.xsd`,
        MessageSchemaVersionId: "ern/382",
        ReleaseProfileVersionId: art ? PROFILE[releaseType] : undefined,
        LanguageAndScriptCode: release.language ?? "en",
      },
      x(
        "MessageHeader",
        x("MessageThreadId", input.threadId),
        x("MessageId", input.messageId),
        x("MessageSender", x("PartyId", sender.dpid), party(sender.name)),
        x("MessageRecipient", x("PartyId", input.recipient.dpid), party(input.recipient.name)),
        x("MessageCreatedDateTime", isoDateTime(input.createdAt)),
        x("MessageControlType", input.test ? "TestMessage" : "LiveMessage"),
      ),
      x("ResourceList", soundRecordings, image),
      x("ReleaseList", mainRelease, trackReleases),
      deals,
    ),
  );
}
