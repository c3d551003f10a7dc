import assert from "node:assert/strict";
import { test } from "node:test";
import { ApiError, describeError } from "../../console/src/api/errors.ts";

/** The console's errors in plain words: no "Error 400 (400)", no machine codes, no CLI commands. */
test("errors read as plain words, with what to do", () => {
  const cases: [ApiError | Error, { title: string | RegExp; detail: string | RegExp }][] = [
    [
      new ApiError(400, "invalid_credentials", "Invalid login credentials"),
      { title: "Wrong e-mail or password", detail: /Check the e-mail address/ },
    ],
    [
      new ApiError(400, "400", "Invalid login credentials"),
      { title: "Wrong e-mail or password", detail: /password/ },
    ],
    [
      new ApiError(415, "invalid_media_type", "Unsupported Media Type"),
      { title: "This kind of file or data is not accepted", detail: /types the form names/ },
    ],
    [
      new ApiError(403, "not_staff", "You are not staff of tenant acme. Ask an admin: backline staff add."),
      {
        title: "Not staff here",
        detail: "You are not staff of this tenant: ask one of its admins to add you.",
      },
    ],
    [
      new ApiError(
        422,
        "validation_failed",
        "branding.primary_color: a colour as #rrggbb",
        "branding.primary_color",
        [{ param: "branding.primary_color", message: "a colour as #rrggbb" }],
      ),
      { title: "Check what you entered", detail: "branding.primary_color: a colour as #rrggbb" },
    ],
    [
      new ApiError(503, "unavailable", "Try again shortly."),
      { title: "The server could not do this", detail: /shortly/ },
    ],
    [new TypeError("fetch failed"), { title: "Network error", detail: /could not be reached/ }],
  ];
  for (const [error, expected] of cases) {
    const got = describeError(error);
    const check = (value: string, want: string | RegExp) =>
      typeof want === "string" ? assert.equal(value, want) : assert.match(value, want);
    check(got.title, expected.title);
    check(got.detail, expected.detail);
    assert.doesNotMatch(
      `${got.title} ${got.detail}`,
      /Error \d{3}|\(\w+_\w+\)|backline staff/,
      JSON.stringify(got),
    );
  }
});
