-- Webhook payload versions (docs/webhooks.md, "Payload versions"; issue 29, one way to write a
-- number and a time). From 1.1.0 an event's data writes every time as RFC 3339 in UTC with
-- milliseconds and every count as an integer; the royalty totals' `units` were decimal strings
-- before. A receiver written against the old payload must not break silently, so each endpoint
-- carries the version it is sent in, as Stripe pins a webhook endpoint's API version:
-- endpoints registered before this migration keep '1.0' until their owner moves them (PATCH
-- payload_version), and every endpoint registered from now on gets '1.1'.

alter table internal.webhook_endpoints
  add column payload_version text not null default '1.0' check (payload_version in ('1.0', '1.1'));
alter table internal.webhook_endpoints alter column payload_version set default '1.1';

comment on column internal.webhook_endpoints.payload_version is
  'The payload version events are sent in: 1.1 (times RFC 3339 UTC with milliseconds, counts as integers) or 1.0 (as before 1.1.0; deprecated).';

grant select (payload_version), insert (payload_version), update (payload_version)
  on internal.webhook_endpoints to authenticated;
