import fs from "node:fs";
import path from "node:path";
import { validateXML, type XMLFileInfo } from "xmllint-wasm";
import { SHARED_REQUIRED, sharedPath } from "./shared.ts";

/**
 * Validation against DDEX's own ERN 4.3 schema (`release-notification.xsd` with the
 * `allowed-value-sets.xsd` it imports), and its ERN 3.8.2 schema (below), with libxml2 compiled
 * to WebAssembly (xmllint-wasm).
 * The schema files are DDEX's and never kept in this repository: they are read from
 * `DDEX_SCHEMA_DIR`, or else from shared/ddex/ern43/ (test/support/shared.ts). Without them the
 * suites that use this are skipped with a message saying so — except under `CI=true`, where a
 * missing schema fails (`schemaMissing()`).
 */

export const ERN_SCHEMA_DIR = process.env.DDEX_SCHEMA_DIR
  ? path.resolve(process.env.DDEX_SCHEMA_DIR)
  : sharedPath("ddex", "ern43");
const MAIN = "release-notification.xsd";
const AVS = "allowed-value-sets.xsd";

export const ernSchemaPresent =
  fs.existsSync(path.join(ERN_SCHEMA_DIR, MAIN)) && fs.existsSync(path.join(ERN_SCHEMA_DIR, AVS));

/** Why the schema suites do not run here, or undefined when they do. */
export const ernSchemaSkip = ernSchemaPresent
  ? undefined
  : `the DDEX ERN 4.3 schema is not at ${ERN_SCHEMA_DIR} (${MAIN} and ${AVS}): set DDEX_SCHEMA_DIR to validate messages against it`;

/** Under CI a missing schema is a failure, not a skip. */
export const schemaMissingFails = !ernSchemaPresent && SHARED_REQUIRED;

let files: { schema: XMLFileInfo; avs: XMLFileInfo } | undefined;

/** Every schema error of the document: [] when it is valid. */
export async function ernSchemaErrors(xml: string): Promise<string[]> {
  files ??= {
    schema: { fileName: MAIN, contents: fs.readFileSync(path.join(ERN_SCHEMA_DIR, MAIN), "utf8") },
    avs: { fileName: AVS, contents: fs.readFileSync(path.join(ERN_SCHEMA_DIR, AVS), "utf8") },
  };
  return validate(xml, files);
}

async function validate(xml: string, with_: { schema: XMLFileInfo; avs: XMLFileInfo }): Promise<string[]> {
  const result = await validateXML({
    xml: { fileName: "message.xml", contents: xml },
    schema: with_.schema,
    preload: [with_.avs],
    // The allowed-value sets are large: room for libxml2 to hold them.
    maxMemoryPages: 16_384,
  });
  if (result.valid) return [];
  const errors = result.errors.map((e) => (e.loc ? `line ${e.loc.lineNumber}: ${e.message}` : e.message));
  return errors.length > 0 ? errors : [result.rawOutput || "invalid (no message from xmllint)"];
}

// ---------------------------------------------------------------------------------------------
// ERN 3.8.2: DDEX's `release-notification.xsd` (namespace http://ddex.net/xml/ern/382) and the
// `avs_20161006.xsd` it imports by that relative name, from shared/ddex/ern382/ — the same
// validator, the same rule (skipped when absent, failing under CI=true).

export const ERN382_SCHEMA_DIR = sharedPath("ddex", "ern382");
const AVS_382 = "avs_20161006.xsd";

export const ern382SchemaPresent =
  fs.existsSync(path.join(ERN382_SCHEMA_DIR, MAIN)) && fs.existsSync(path.join(ERN382_SCHEMA_DIR, AVS_382));

export const ern382SchemaSkip = ern382SchemaPresent
  ? undefined
  : `the DDEX ERN 3.8.2 schema is not at ${ERN382_SCHEMA_DIR} (${MAIN} and ${AVS_382}): set BACKLINE_SHARED_DIR to validate messages against it`;

export const schema382MissingFails = !ern382SchemaPresent && SHARED_REQUIRED;

let files382: { schema: XMLFileInfo; avs: XMLFileInfo } | undefined;

/** Every ERN 3.8.2 schema error of the document: [] when it is valid. */
export async function ern382SchemaErrors(xml: string): Promise<string[]> {
  files382 ??= {
    schema: { fileName: MAIN, contents: fs.readFileSync(path.join(ERN382_SCHEMA_DIR, MAIN), "utf8") },
    avs: { fileName: AVS_382, contents: fs.readFileSync(path.join(ERN382_SCHEMA_DIR, AVS_382), "utf8") },
  };
  return validate(xml, files382);
}
