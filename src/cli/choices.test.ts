import assert from "node:assert/strict";
import { test } from "node:test";
import { JOB_STATUSES } from "../jobs/queue.ts";
import { SCOPES } from "../public-api/auth.ts";
import { DEFAULT_SCOPES } from "../public-api/keys/service.ts";
import { FORMAT_NAMES } from "../royalties/formats/index.ts";
import { SAMPLE_FORMATS } from "../royalties/sample.ts";
import { MEMBERSHIP_ROLES } from "../tenancy/memberships.ts";
import { STAFF_ROLES } from "../tenancy/staff.ts";
import { ACCOUNT_KINDS, POLICY_PRESETS } from "../tenancy/tenants.ts";
import * as choices from "./choices.ts";

test("the CLI's option lists are the services' own", () => {
  assert.deepEqual(choices.POLICY_PRESETS, POLICY_PRESETS);
  assert.deepEqual(choices.ACCOUNT_KINDS, ACCOUNT_KINDS);
  assert.deepEqual(choices.MEMBERSHIP_ROLES, MEMBERSHIP_ROLES);
  assert.deepEqual(choices.JOB_STATUSES, JOB_STATUSES);
  assert.deepEqual(choices.SCOPES, SCOPES);
  assert.deepEqual(choices.DEFAULT_SCOPES, DEFAULT_SCOPES);
  assert.deepEqual(choices.FORMAT_NAMES, FORMAT_NAMES);
  assert.deepEqual(choices.SAMPLE_FORMATS, SAMPLE_FORMATS);
  assert.deepEqual(choices.STAFF_ROLES, STAFF_ROLES);
});
