-- Placeholder (h-stores): keeps this branch's numbering whole so it runs on its own; the lead drops
-- it at merge, when 0024_store_inbox.sql is renumbered after the other branches' migrations.
select 1;
