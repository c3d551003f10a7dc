import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { type AckRelease, batchIdAt, isChoreographyAck, releaseOutcome } from "./choreography.ts";

describe("DDEX SFTP choreography 1.8", () => {
  test("a batch is named by its UTC time, YYYYMMDDhhmmssnnn", () => {
    assert.equal(batchIdAt(new Date("2026-12-06T09:05:03.007Z")), "20261206090503007");
  });

  test("an AcknowledgementMessage is told by its root element, whatever its prefix; others are not", () => {
    assert.ok(
      isChoreographyAck('<?xml version="1.0"?>\n<!-- a -->\n<ernc:AcknowledgementMessage xmlns:ernc="x">'),
    );
    assert.ok(isChoreographyAck("<AcknowledgementMessage>"));
    assert.ok(!isChoreographyAck('<e:FtpAcknowledgementMessage xmlns:e="http://ddex.net/xml/ern-c/14">'));
    assert.ok(!isChoreographyAck("<Other><AcknowledgementMessage/></Other>"));
  });

  const release = (status: string, files: string[] = [], errorText?: string): AckRelease => ({
    icpn: "4006381333931",
    proprietaryIds: [],
    status,
    errorText,
    messages:
      files.length === 0
        ? []
        : [
            {
              messageType: "NewReleaseMessage",
              messageId: "m",
              statuses: files.map((s) => ({ status: s, information: s === "FileOK" ? undefined : "why" })),
            },
          ],
  });

  test("release and file statuses map to what happens to the delivery", () => {
    assert.deepEqual(releaseOutcome(release("SuccessfullyIngestedByReleaseDistributor", ["FileOK"])), {
      kind: "ok",
    });
    assert.deepEqual(releaseOutcome(release("ReleaseMadeAvailableToConsumers")), { kind: "ok" });
    assert.deepEqual(releaseOutcome(release("ReleaseNotAvailable")), { kind: "gone" });
    assert.deepEqual(releaseOutcome(release("ReleaseReceivedByReleaseDistributor", ["FileOK"])), {
      kind: "noted",
    });
    assert.deepEqual(releaseOutcome(release("UserDefined")), { kind: "noted" });
    // A file the store could not take is an error, even when the release says ingested.
    assert.deepEqual(
      releaseOutcome(release("SuccessfullyIngestedByReleaseDistributor", ["ResourceCorrupt"])),
      {
        kind: "error",
        message: "ResourceCorrupt (why)",
      },
    );
    assert.deepEqual(releaseOutcome(release("RightsConflict", [], "claimed by another label")), {
      kind: "error",
      message: "RightsConflict: claimed by another label",
    });
    assert.deepEqual(
      releaseOutcome(
        release("ProcessingErrorAtReleaseDistributor", ["FileOK", "NewReleaseMessageInvalid"], "x"),
      ),
      { kind: "error", message: "ProcessingErrorAtReleaseDistributor: NewReleaseMessageInvalid (why): x" },
    );
  });
});
