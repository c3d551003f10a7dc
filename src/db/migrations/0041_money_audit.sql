-- The operator's money acts in the audit log (issue 39: "exact to the last decimal and auditable";
-- docs/operator.md, "The audit log"). The ledger says what moved; the audit log says who set the
-- rule that moved it, from where: the money settings, the fees, the exchange rates, the advances
-- and expenses, a period's approval, and a payout's way through a batch. Written by the trigger
-- every other audited table has (internal.audit_row('people'): the server's own work is not an
-- act to record, so an allocation by the worker writes nothing here).
--
-- Not by trigger: a payee's row (a split's e-mail creates one, and an erasure would copy the very
-- data it removes into the append-only log) — its acts are named instead, without personal data,
-- by src/money/payees.ts through internal.audit() (money.tax_review, money.payout_method,
-- money.payee_erased); nor statements (their documents are the record) or the ledger itself.

create trigger audit after insert or update on internal.money_settings
  for each row execute function internal.audit_row('people');
create trigger audit after insert or update or delete on internal.distribution_fees
  for each row execute function internal.audit_row('people');
create trigger audit after update on internal.money_periods
  for each row execute function internal.audit_row('people');
create trigger audit after insert or update or delete on internal.exchange_rates
  for each row execute function internal.audit_row('people');
create trigger audit after insert or update on internal.recoupables
  for each row execute function internal.audit_row('people');
create trigger audit after insert or update on internal.payout_batches
  for each row execute function internal.audit_row('people');
create trigger audit after update on internal.payouts
  for each row execute function internal.audit_row('people');
