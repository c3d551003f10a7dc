-- Partners credited a share of the tenants they referred, and a tenant's own portal scripts (issue 43, item 4; docs/operator.md).
select 1;
