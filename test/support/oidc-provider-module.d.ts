// oidc-provider ships no type declarations: the tests use it through test/support/oidc-provider.ts.
declare module "oidc-provider";
