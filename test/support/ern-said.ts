import assert from "node:assert/strict";
import { ERN_382_NAMESPACE } from "../../src/pipeline/ddex/ern382.ts";
import { at, has, kids, parseXml, textAt, type XmlNode } from "./ddex.ts";

/**
 * What an ERN message says about its release, read by its own version's paths — ERN 4.3
 * (`said43`: parties through the PartyList, details on each record) or ERN 3.8.2 (`said382`:
 * names inline, details in the Worldwide `…DetailsByTerritory`, contributors in two lists) — in
 * one shape, so that test/ddex-ern382.test.ts can compare the two messages of one release. 3.8.2
 * values that differ from 4.3's only in name are given 4.3's (a UserDefined role its
 * UserDefinedValue); everything else is read as written.
 */

export interface Said {
  header: string[];
  release: Record<string, unknown>;
  tracks: Record<string, unknown>[];
  trackReleases: (string | null)[][];
  deals: Record<string, unknown>[];
}

export const texts = (node: XmlNode, name: string) => kids(node, name).map((n) => n.text);
const opt = (node: XmlNode | undefined, p: string): string | null => {
  if (!node) return null;
  let at: XmlNode | undefined = node;
  for (const part of p.split("/")) at = at && kids(at, part)[0];
  return at ? at.text : null;
};
const lineOf = (node: XmlNode | undefined, kind: "P" | "C") =>
  node ? [opt(node, "Year"), textAt(node, `${kind}LineText`)] : null;
const dpid = (ns: string | undefined) => ns?.replace(/^DPID:/, "");

function header(root: XmlNode): string[] {
  const h = at(root, "MessageHeader");
  return [
    "MessageThreadId",
    "MessageId",
    "MessageSender/PartyId",
    "MessageSender/PartyName/FullName",
    "MessageRecipient/PartyId",
    "MessageRecipient/PartyName/FullName",
    "MessageCreatedDateTime",
    "MessageControlType",
  ].map((p) => textAt(h, p));
}

export function said43(xml: string): Said {
  const root = parseXml(xml);
  assert.equal(root.attrs["xmlns:ern"], "http://ddex.net/xml/ern/43");
  const party = new Map(
    kids(at(root, "PartyList"), "Party").map((p) => [
      textAt(p, "PartyReference"),
      textAt(p, "PartyName/FullName"),
    ]),
  );
  const artists = (n: XmlNode) =>
    kids(n, "DisplayArtist").map((d) => [
      d.attrs.SequenceNumber,
      party.get(textAt(d, "ArtistPartyReference")),
      textAt(d, "DisplayArtistRole"),
    ]);
  const title = (n: XmlNode) => [
    textAt(n, "DisplayTitle/TitleText"),
    opt(n, "DisplayTitle/SubTitle"),
    textAt(n, "DisplayTitleText"),
  ];
  const genre = (n: XmlNode) => [textAt(n, "Genre/GenreText"), opt(n, "Genre/SubGenre")];
  const files = new Map<string, string[]>();
  const tracks = kids(at(root, "ResourceList"), "SoundRecording").map((s) => {
    const file = kids(s, "SoundRecordingEdition")[0]?.children.find((c) => c.name === "TechnicalDetails");
    return {
      ref: textAt(s, "ResourceReference"),
      isrc: opt(s, "SoundRecordingEdition/ResourceId/ISRC"),
      title: title(s),
      artists: artists(s),
      artistName: textAt(s, "DisplayArtistName"),
      contributors: kids(s, "Contributor")
        .map((c) => [party.get(textAt(c, "ContributorPartyReference")), textAt(c, "Role")])
        .sort(),
      duration: textAt(s, "Duration"),
      pLine: lineOf(kids(at(s, "SoundRecordingEdition"), "PLine")[0], "P"),
      explicit: textAt(s, "ParentalWarningType"),
      language: opt(s, "LanguageOfPerformance"),
      file: file
        ? [
            textAt(file, "DeliveryFile/File/URI"),
            textAt(file, "DeliveryFile/File/HashSum/HashSumValue"),
            textAt(file, "DeliveryFile/AudioCodecType"),
          ]
        : null,
    };
  });
  for (const t of tracks) files.set(t.ref, []);
  const image = kids(at(root, "ResourceList"), "Image")[0];
  const r = kids(at(root, "ReleaseList"), "Release")[0] as XmlNode;
  const release = {
    icpn: opt(r, "ReleaseId/ICPN"),
    catalog: opt(r, "ReleaseId/CatalogNumber"),
    proprietary: [
      dpid(at(r, "ReleaseId/ProprietaryId").attrs.Namespace),
      textAt(r, "ReleaseId/ProprietaryId"),
    ],
    type: textAt(r, "ReleaseType"),
    title: title(r),
    artistName: textAt(r, "DisplayArtistName"),
    artists: artists(r),
    label: party.get(textAt(r, "ReleaseLabelReference")),
    pLine: lineOf(kids(r, "PLine")[0], "P"),
    cLine: lineOf(kids(r, "CLine")[0], "C"),
    duration: opt(r, "Duration"),
    genre: genre(r),
    releaseDate: opt(r, "ReleaseDate"),
    originalReleaseDate: opt(r, "OriginalReleaseDate"),
    explicit: textAt(r, "ParentalWarningType"),
    cover: image
      ? [
          textAt(image, "Type"),
          textAt(image, "TechnicalDetails/File/URI"),
          textAt(image, "TechnicalDetails/File/HashSum/HashSumValue"),
          textAt(image, "TechnicalDetails/ImageCodecType"),
          opt(image, "TechnicalDetails/ImageHeight"),
          opt(image, "TechnicalDetails/ImageWidth"),
        ]
      : null,
    // Disc by disc, the tracks' references in order.
    discs: kids(at(r, "ResourceGroup"), "ResourceGroup").map((g) => [
      textAt(g, "SequenceNumber"),
      ...kids(g, "ResourceGroupContentItem").map(
        (i) => `${textAt(i, "SequenceNumber")}:${textAt(i, "ReleaseResourceReference")}`,
      ),
    ]),
  };
  const trackReleases = kids(at(root, "ReleaseList"), "TrackRelease").map((tr) => [
    textAt(tr, "ReleaseReference"),
    textAt(tr, "ReleaseId/ProprietaryId"),
    textAt(tr, "ReleaseResourceReference"),
    ...title(tr),
    ...genre(tr),
  ]);
  const deals = kids(at(root, "DealList"), "ReleaseDeal").flatMap((rd) =>
    kids(rd, "Deal").map((d) => {
      const terms = at(d, "DealTerms");
      return {
        releases: texts(rd, "DealReleaseReference"),
        commercialModels: texts(terms, "CommercialModelType"),
        useTypes: texts(terms, "UseType"),
        territories: texts(terms, "TerritoryCode"),
        excluded: texts(terms, "ExcludedTerritoryCode"),
        start: textAt(terms, "ValidityPeriod/StartDateTime"),
        end: opt(terms, "ValidityPeriod/EndDateTime"),
      };
    }),
  );
  return { header: header(root), release, tracks, trackReleases, deals };
}

/** ERN 3.8.2's value for a role where it differs from 4.3's (UserDefined roles carry 4.3's name). */
const ROLE_43_OF_382: Record<string, string> = {
  Producer: "StudioProducer",
  AssociatedPerformer: "Performer",
};

export function said382(xml: string): Said {
  const root = parseXml(xml);
  assert.equal(root.attrs["xmlns:ern"], ERN_382_NAMESPACE);
  assert.equal(root.attrs.MessageSchemaVersionId, "ern/382");
  const details = (n: XmlNode, name: string) => {
    const found = kids(n, name);
    assert.equal(found.length, 1, `one ${name}`);
    assert.deepEqual(texts(found[0] as XmlNode, "TerritoryCode"), ["Worldwide"]);
    return found[0] as XmlNode;
  };
  const artists = (d: XmlNode) =>
    kids(d, "DisplayArtist").map((a) => [
      a.attrs.SequenceNumber,
      textAt(a, "PartyName/FullName"),
      textAt(a, "ArtistRole"),
    ]);
  const title = (d: XmlNode, ref: XmlNode) => {
    const display = kids(d, "Title").find((t) => t.attrs.TitleType === "DisplayTitle") as XmlNode;
    const formal = kids(d, "Title").find((t) => t.attrs.TitleType === "FormalTitle") as XmlNode;
    // The formal and the reference title say the same as the display title.
    for (const other of [formal, ref]) {
      assert.deepEqual(
        [textAt(other, "TitleText"), opt(other, "SubTitle")],
        [textAt(display, "TitleText"), opt(display, "SubTitle")],
      );
    }
    const [text, sub] = [textAt(display, "TitleText"), opt(display, "SubTitle")];
    return [text, sub, sub ? `${text} (${sub})` : text];
  };
  const genre = (d: XmlNode) => [textAt(d, "Genre/GenreText"), opt(d, "Genre/SubGenre")];
  const role = (r: XmlNode) => {
    const value = r.text === "UserDefined" ? (r.attrs.UserDefinedValue as string) : r.text;
    return ROLE_43_OF_382[value] ?? value;
  };
  const fileOf = (f: XmlNode) => `${textAt(f, "FilePath")}${textAt(f, "FileName")}`;
  const resources = at(root, "ResourceList");
  const tracks = kids(resources, "SoundRecording").map((s) => {
    const d = details(s, "SoundRecordingDetailsByTerritory");
    const tech = kids(d, "TechnicalSoundRecordingDetails")[0];
    return {
      ref: textAt(s, "ResourceReference"),
      isrc: opt(s, "SoundRecordingId/ISRC"),
      title: title(d, at(s, "ReferenceTitle")),
      artists: artists(d),
      artistName: textAt(d, "DisplayArtistName"),
      contributors: [
        ...kids(d, "ResourceContributor").map((c) => [
          textAt(c, "PartyName/FullName"),
          role(at(c, "ResourceContributorRole")),
        ]),
        ...kids(d, "IndirectResourceContributor").map((c) => [
          textAt(c, "PartyName/FullName"),
          role(at(c, "IndirectResourceContributorRole")),
        ]),
      ].sort(),
      duration: textAt(s, "Duration"),
      pLine: lineOf(kids(d, "PLine")[0], "P"),
      explicit: textAt(d, "ParentalWarningType"),
      language: opt(s, "LanguageOfPerformance"),
      file: tech
        ? [fileOf(at(tech, "File")), textAt(tech, "File/HashSum/HashSum"), textAt(tech, "AudioCodecType")]
        : null,
    };
  });
  const image = kids(resources, "Image")[0];
  const imageTech = image && at(details(image, "ImageDetailsByTerritory"), "TechnicalImageDetails");
  const releases = kids(at(root, "ReleaseList"), "Release");
  const r = releases[0] as XmlNode;
  assert.equal(r.attrs.IsMainRelease, "true");
  const rd = details(r, "ReleaseDetailsByTerritory");
  const release = {
    icpn: opt(r, "ReleaseId/ICPN"),
    catalog: opt(r, "ReleaseId/CatalogNumber"),
    proprietary: [
      dpid(at(r, "ReleaseId/ProprietaryId").attrs.Namespace),
      textAt(r, "ReleaseId/ProprietaryId"),
    ],
    type: textAt(r, "ReleaseType"),
    title: title(rd, at(r, "ReferenceTitle")),
    artistName: textAt(rd, "DisplayArtistName"),
    artists: artists(rd),
    label: textAt(rd, "LabelName"),
    pLine: lineOf(kids(r, "PLine")[0], "P"),
    cLine: lineOf(kids(r, "CLine")[0], "C"),
    duration: opt(r, "Duration"),
    genre: genre(rd),
    releaseDate: opt(rd, "ReleaseDate"),
    originalReleaseDate: opt(rd, "OriginalReleaseDate"),
    explicit: textAt(rd, "ParentalWarningType"),
    cover:
      image && imageTech
        ? [
            textAt(image, "ImageType"),
            fileOf(at(imageTech, "File")),
            textAt(imageTech, "File/HashSum/HashSum"),
            textAt(imageTech, "ImageCodecType"),
            opt(imageTech, "ImageHeight"),
            opt(imageTech, "ImageWidth"),
          ]
        : null,
    discs: kids(at(rd, "ResourceGroup"), "ResourceGroup").map((g) => [
      textAt(g, "SequenceNumber"),
      ...kids(g, "ResourceGroupContentItem").map(
        (i) => `${textAt(i, "SequenceNumber")}:${textAt(i, "ReleaseResourceReference")}`,
      ),
    ]),
  };
  const trackReleases = releases.slice(1).map((tr) => {
    assert.equal(textAt(tr, "ReleaseType"), "TrackRelease");
    const d = details(tr, "ReleaseDetailsByTerritory");
    const refs = kids(at(tr, "ReleaseResourceReferenceList"), "ReleaseResourceReference").filter(
      (x) => x.attrs.ReleaseResourceType === "PrimaryResource",
    );
    assert.equal(refs.length, 1, "a track release holds its one track");
    return [
      textAt(tr, "ReleaseReference"),
      textAt(tr, "ReleaseId/ProprietaryId"),
      (refs[0] as XmlNode).text,
      ...title(d, at(tr, "ReferenceTitle")),
      ...genre(d),
    ];
  });
  const deals = kids(at(root, "DealList"), "ReleaseDeal").flatMap((rdeal) =>
    kids(rdeal, "Deal").map((d) => {
      const terms = at(d, "DealTerms");
      return {
        releases: texts(rdeal, "DealReleaseReference"),
        commercialModels: texts(terms, "CommercialModelType"),
        useTypes: kids(terms, "Usage").flatMap((u) => texts(u, "UseType")),
        territories: texts(terms, "TerritoryCode"),
        excluded: texts(terms, "ExcludedTerritoryCode"),
        start: textAt(terms, "ValidityPeriod/StartDateTime"),
        end: opt(terms, "ValidityPeriod/EndDateTime"),
        ...(has(terms, "TakeDown") ? { takeDown: textAt(terms, "TakeDown") } : {}),
      };
    }),
  );
  return { header: header(root), release, tracks, trackReleases, deals };
}
