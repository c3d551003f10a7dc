-- Catalogue transfer from an archive (issue 40, docs/catalogue.md "An archive of ERN messages"): a
-- transfer upload may be a .zip of a previous distributor's ERN delivery with its audio and
-- artwork, kept beside its slot as the other transfer files are (content), at most 64 MiB.

alter table internal.transfer_uploads drop constraint transfer_uploads_content_type_check;
alter table internal.transfer_uploads add constraint transfer_uploads_content_type_check
  check (content_type in ('text/csv', 'application/xml', 'application/zip'));
