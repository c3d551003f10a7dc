import assert from "node:assert/strict";
import { test } from "node:test";
import { type EventRow, envelopeBody, toEnvelope } from "./envelope.ts";

// An event as stored: to_jsonb's times (microseconds, an offset that follows the session's
// TimeZone), a takedown's stores, and royalty totals whose units an older import kept as text.
const release: EventRow = {
  id: "7d1c6c3e-9b39-4c09-8f2e-2a4b1c0d5e6f",
  type: "release.takedown_completed",
  account_id: "9a8b7c6d-5e4f-4a3b-2c1d-0e9f8a7b6c5d",
  data: {
    object: {
      id: "3f2b6a5e-8c1d-4e7a-9b0f-2a6c5d4e3f21",
      title: "Midnight Signals",
      release_date: "2026-12-18",
      submitted_at: null,
      created_at: "2026-11-22T10:00:00.123456+01:00",
      updated_at: "2026-11-22T09:00:00+00:00",
      copyright_year: 2026,
    },
    takedown: {
      created_at: "2026-11-22T09:00:00.5+00:00",
      stores: [{ store: "spotify", sent_at: "2026-11-22T09:00:01.000001+00:00", taken_down_at: null }],
    },
  },
  created_at: new Date("2026-11-22T09:00:02.123Z"),
  seq: "3",
};
const royalties: EventRow = {
  ...release,
  type: "royalties.imported",
  seq: 1,
  data: {
    object: {
      id: "0b6f7c9e-3f52-4a54-9d55-2b8f5f1d7a10",
      object: "royalty_import",
      lines: 4,
      imported_at: "2026-11-22T09:00:00.123Z",
      totals: [
        { currency: "EUR", lines: 3, units: "970", gross: "3.64", fees: "1.088", net: "2.552" },
        { currency: "USD", lines: 1, units: 12, gross: "1", fees: "0", net: "1" },
      ],
    },
  },
};

test("payload 1.1: every time RFC 3339 UTC with milliseconds, every count an integer", () => {
  const e = toEnvelope(release, "1.1");
  assert.equal(e.created, "2026-11-22T09:00:02.123Z");
  assert.deepEqual(e.data, {
    object: {
      id: "3f2b6a5e-8c1d-4e7a-9b0f-2a6c5d4e3f21",
      title: "Midnight Signals",
      release_date: "2026-12-18",
      submitted_at: null,
      created_at: "2026-11-22T09:00:00.123Z",
      updated_at: "2026-11-22T09:00:00.000Z",
      copyright_year: 2026,
    },
    takedown: {
      created_at: "2026-11-22T09:00:00.500Z",
      stores: [{ store: "spotify", sent_at: "2026-11-22T09:00:01.000Z", taken_down_at: null }],
    },
  });
  const totals = (toEnvelope(royalties, "1.1").data.object as { totals: { units: unknown }[] }).totals;
  assert.deepEqual(
    totals.map((t) => t.units),
    [970, 12],
  );
  // The default is the current version.
  assert.equal(envelopeBody(release), JSON.stringify(toEnvelope(release, "1.1")));
});

test("payload 1.0: the data as stored, as before 1.1.0, the royalty units as strings", () => {
  assert.deepEqual(toEnvelope(release, "1.0").data, release.data);
  const totals = (toEnvelope(royalties, "1.0").data.object as { totals: { units: unknown }[] }).totals;
  assert.deepEqual(
    totals.map((t) => t.units),
    ["970", "12"],
  );
  assert.equal(toEnvelope(release, "1.0").created, "2026-11-22T09:00:02.123Z");
});
