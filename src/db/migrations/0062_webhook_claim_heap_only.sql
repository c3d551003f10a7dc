-- Webhook claims as heap-only updates (issue 45, item 5; bench/README.md, "bench/webhooks").
--
-- A claim sets a delivery's lease (locked_by, locked_until). The partial index on locked_by made
-- every such update write a new entry into each of the deliveries' six indexes whose condition the
-- row meets, though no index key changed; without it the lease columns are in no index, and the
-- update is heap-only (HOT): the new row version goes beside the old one on its page, no index is
-- written. For that the pages keep room: fillfactor 75 leaves a quarter of each new page free for
-- the versions a claim and its record make (a record changes the status, in the partial indexes'
-- conditions, so it is not heap-only; it too lands on the same page when there is room).
--
-- What the index served: finding a dispatcher's leased deliveries when it stops or is found dead
-- (src/webhooks/dispatcher.ts, unregister and reap). Those are rare (a dispatcher's stop, or one
-- found dead) and now read the pending deliveries through a pending index, so their cost grows
-- with the backlog of pending deliveries, once per stop; the claim's saving is on every delivery.
drop index internal.webhook_deliveries_locked;
alter table internal.webhook_deliveries set (fillfactor = 75);

