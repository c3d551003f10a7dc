-- A royalty import's warnings (issue 41, item 3; docs/royalties.md, "Warnings"): what the import
-- read past without refusing the report, such as an identifier whose check digit is wrong (the
-- line is matched by its other identifiers) or a DSR footer whose counts disagree with the body.
-- [{"line": 9, "message": "...", "lines": 3}]: the line it was first seen on (null for the file
-- as a whole), what it is, and on how many lines; the first 100 distinct messages.
alter table internal.royalty_imports
  add column warnings jsonb not null default '[]' check (jsonb_typeof(warnings) = 'array');
