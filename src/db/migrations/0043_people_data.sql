-- People's own data (docs/privacy.md): a person's export and erasure, decided in the database.
-- Placeholder taken to hold the number; the functions follow in the next commit.
select 1;
