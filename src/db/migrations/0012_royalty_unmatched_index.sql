-- The import report lists the codes that matched nothing, most lines first: counted by the
-- database over the import's unmatched lines (about 2% of a typical report) through this index,
-- instead of tallied in the importer's memory.
create index royalty_lines_unmatched on internal.royalty_lines (import_id, isrc, upc) where account_id is null;
