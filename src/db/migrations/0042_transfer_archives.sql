-- Catalogue transfer from an archive (issue 40, docs/catalogue.md "An archive of ERN messages"): a
-- transfer upload may be a .zip of a previous distributor's ERN delivery with its audio and
-- artwork. Such a file is large, so its bytes do not go beside the slot (content) but to the
-- installation's media storage (local disk or the S3 bucket, through the storage driver) under
-- object_key, a key of the tenant's own; the key is dropped with the object once a real run has
-- used it.

alter table internal.transfer_uploads drop constraint transfer_uploads_content_type_check;
alter table internal.transfer_uploads add constraint transfer_uploads_content_type_check
  check (content_type in ('text/csv', 'application/xml', 'application/zip'));

alter table internal.transfer_uploads add column object_key text
  check (object_key ~ '^objects/[0-9a-f-]{36}/[0-9a-f-]{36}$');
-- Not granted to authenticated or tenant_service: their column grant (migration 0038) lists what
-- they may read.
