import { buildNewReleaseMessage } from "./ern.ts";
import type { ErnMessageInput } from "./ern-input.ts";
import { buildNewReleaseMessage382 } from "./ern382.ts";

/**
 * The ERN versions a store can be sent (its `ddex.ern_version` setting, docs/ddex.md): 4.3 by
 * default, 3.8.2 for stores that still take ERN 3. Both writers take the same input and say the
 * same about the release.
 */
export const ERN_VERSIONS = ["4.3", "3.8.2"] as const;
export type ErnVersion = (typeof ERN_VERSIONS)[number];

export const ERN_WRITERS: Record<ErnVersion, (input: ErnMessageInput) => string> = {
  "4.3": buildNewReleaseMessage,
  "3.8.2": buildNewReleaseMessage382,
};
