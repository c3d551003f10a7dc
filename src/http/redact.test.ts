import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { isSecretName, REDACTED, redactHeaders, redactText, redactUrl } from "./redact.ts";

const JWT =
  "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJyb2xlIjoic2VydmljZV9yb2xlIn0.c2lnbmF0dXJlLXNpZ25hdHVyZS1zaWduYXR1cmU";
const STORAGE_TOKEN = `eyJ1c2UiOiJkb3dubG9hZCJ9.${"A".repeat(43)}`;

describe("redaction", () => {
  test("secret query parameters lose their values; the route and other filters stay", () => {
    const cases: [string, string][] = [
      ["/rest/v1/releases?select=id&apikey=abc", `/rest/v1/releases?select=id&apikey=${REDACTED}`],
      ["/x?api_key=1&x-api-key=2", `/x?api_key=${REDACTED}&x-api-key=${REDACTED}`],
      ["/auth/v1/verify?token=t0k&type=signup", `/auth/v1/verify?token=${REDACTED}&type=signup`],
      ["/auth/v1/verify?token_hash=h&type=signup", `/auth/v1/verify?token_hash=${REDACTED}&type=signup`],
      ["/cb?code=123456", `/cb?code=${REDACTED}`],
      [
        "/t?grant_type=refresh_token&refresh_token=r&access_token=a",
        `/t?grant_type=refresh_token&refresh_token=${REDACTED}&access_token=${REDACTED}`,
      ],
      [
        "/o?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AK%2F2026&X-Amz-Signature=ff&X-Amz-Security-Token=s",
        `/o?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=${REDACTED}&X-Amz-Signature=${REDACTED}&X-Amz-Security-Token=${REDACTED}`,
      ],
      [
        "/o?sig=1&signature=2&password=3&client_secret=4",
        `/o?sig=${REDACTED}&signature=${REDACTED}&password=${REDACTED}&client_secret=${REDACTED}`,
      ],
      ["/rest/v1/tracks?isrc=eq.QZ1&order=title", "/rest/v1/tracks?isrc=eq.QZ1&order=title"],
    ];
    for (const [url, expected] of cases) assert.equal(redactUrl(url), expected, url);
  });

  test("a URL inside a parameter is redacted too", () => {
    const url = `/auth/v1/verify?type=signup&redirect_to=${encodeURIComponent("https://app.example/cb?code=999&x=1")}`;
    const out = redactUrl(url);
    assert.ok(!out.includes("999"), out);
    assert.ok(out.includes(encodeURIComponent("https://app.example/cb?code=")), out);
    assert.equal(
      redactUrl("/v?redirect_to=https://app/cb?code=999"),
      `/v?redirect_to=https://app/cb?code=${REDACTED}`,
    );
  });

  test("path segments that are tokens are redacted", () => {
    assert.equal(
      redactUrl(`/api/public/v1/api-keys/bk_live_${"a".repeat(49)}`),
      `/api/public/v1/api-keys/${REDACTED}`,
    );
    assert.equal(redactUrl(`/storage/v1/object/${JWT}/x`), `/storage/v1/object/${REDACTED}/x`);
    assert.equal(redactUrl(`/storage/v1/${STORAGE_TOKEN}`), `/storage/v1/${REDACTED}`);
    const plain = "/storage/v1/object/sign/artwork/0d6c1f8e-2a8b-4c39-9a37-0f5d3e6b7a21/cover.jpg";
    assert.equal(redactUrl(plain), plain);
  });

  test("free text: bearer credentials, JWTs, API keys, webhook secrets, storage tokens, URL passwords", () => {
    const text = [
      `Authorization: Bearer ${JWT}`,
      `key bk_test_${"Z".repeat(49)}`,
      `secret whsec_${Buffer.alloc(24, 1).toString("base64")}`,
      `token ${STORAGE_TOKEN}`,
      "postgres://backline:hunter2hunter2@db.internal:5432/app",
      "GET https://s3.example/b/k?X-Amz-Signature=deadbeef failed",
    ].join("\n");
    const out = redactText(text);
    for (const secret of [
      JWT,
      "Z".repeat(49),
      Buffer.alloc(24, 1).toString("base64"),
      STORAGE_TOKEN,
      "hunter2",
      "deadbeef",
    ]) {
      assert.ok(!out.includes(secret), `${secret} in ${out}`);
    }
    assert.ok(out.includes("postgres://[REDACTED]@db.internal:5432/app"), out);
    assert.equal(
      redactText("Bearer token expired"),
      "Bearer token expired",
      "a short word is not a credential",
    );
  });

  test("headers: the values of secret ones go, the others stay", () => {
    assert.deepEqual(
      redactHeaders({
        authorization: `Bearer ${JWT}`,
        apikey: JWT,
        "x-api-key": "k",
        cookie: "sb=1",
        "set-cookie": ["a=1", "b=2"],
        "proxy-authorization": "Basic eDp5",
        "content-type": "application/json",
        "user-agent": "curl/8",
      }),
      {
        authorization: REDACTED,
        apikey: REDACTED,
        "x-api-key": REDACTED,
        cookie: REDACTED,
        "set-cookie": REDACTED,
        "proxy-authorization": REDACTED,
        "content-type": "application/json",
        "user-agent": "curl/8",
      },
    );
  });

  test("names: `code` is a secret in a query string, an error code in a logged field", () => {
    assert.equal(isSecretName("code", { query: true }), true);
    assert.equal(isSecretName("code"), false);
    assert.equal(isSecretName("accessToken"), true);
    assert.equal(isSecretName("api_key_id"), false);
    assert.equal(isSecretName("author"), false);
  });
});
