-- OpenID Connect providers per tenant (docs/auth.md, "OpenID Connect providers"): issue 42, item 6.
select 1;
