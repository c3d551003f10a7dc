/**
 * Every table with a column that may hold a person's data, and what the export and the erasure do
 * with it (docs/privacy.md, "Table by table"). test/people-data.test.ts lists the tables of a
 * migrated database whose columns look personal (PERSONAL_COLUMN) and fails on any table or column
 * missing here: a new table with personal data cannot be forgotten. The work itself is done in the
 * database (migrations 0043 and 0058, internal.person_export and internal.person_erase); this list is the
 * review, kept beside the code that follows it.
 *
 * `exported`: the key of the export (GET /me/export) that holds the person's rows, or null.
 * `erasure`: deleted (the person's rows go), anonymised (the rows stay, the personal fields go),
 * kept (the rows stay as they are: `why` says why), or none (the table holds nobody's personal
 * data: the column only looks personal, or names a pseudonymous user id).
 */
export type ErasureRule = "deleted" | "anonymised" | "kept" | "none";

export interface PersonalTable {
  /** The columns that look personal, each reviewed. */
  columns: readonly string[];
  exported: string | null;
  erasure: ErasureRule;
  /** What the erasure does, or why the rows are kept. */
  why: string;
}

/**
 * A column name that may hold personal data: an address, a name, a client address or agent, a
 * user id or who did something, a tax or payment detail. Times (`*_at`) are left out.
 */
export const PERSONAL_COLUMN =
  /^(?!.*_at$)(?:.*(?:^|_)(?:email|phone|ip|address|agent|name|contact|author|actor|owner|identity|meta)(?:_|$).*|(?:.*_)?user_id|.*_by|tax_.*|payout_method|method)$/;

/** A user id kept after erasure: it names the anonymised user row, a pseudonym, and nothing else. */
const PSEUDONYM =
  "names the person by user id only: after erasure the id is a pseudonym (the user row holds nothing personal)";
const NOT_PERSONAL = "names a thing (a label, a store, a file), not a person";

export const PERSONAL_TABLES: Record<string, PersonalTable> = {
  "internal.users": {
    columns: ["email", "phone", "raw_app_meta_data", "raw_user_meta_data", "email_change"],
    exported: "user",
    erasure: "anonymised",
    why: "e-mail replaced by the pseudonym erased-<id>@erased.invalid; phone, password, metadata and pending change cleared; banned for ever",
  },
  "internal.identities": {
    columns: ["user_id", "identity_data"],
    exported: "identities",
    erasure: "deleted",
    why: "sign-in ends",
  },
  "internal.sessions": {
    columns: ["user_id", "user_agent", "ip"],
    exported: "sessions",
    erasure: "deleted",
    why: "sign-in ends; their refresh tokens go with them",
  },
  "internal.mfa_factors": {
    columns: ["user_id", "friendly_name"],
    exported: "mfa_factors",
    erasure: "deleted",
    why: "sign-in ends; their challenges (internal.mfa_challenges) go with them",
  },
  "internal.mfa_challenges": {
    columns: ["ip"],
    exported: null,
    erasure: "deleted",
    why: "deleted with the factor they challenged",
  },
  "internal.one_time_tokens": {
    columns: ["user_id", "email"],
    exported: null,
    erasure: "deleted",
    why: "pending links and codes, by user or address (secrets: never exported)",
  },
  "internal.email_code_failures": {
    columns: ["email"],
    exported: null,
    erasure: "deleted",
    why: "a counter of wrong codes for the address",
  },
  "internal.passkeys": {
    // Migration 0058 (internal.person_erase and person_export over 0043's).
    columns: ["user_id", "friendly_name"],
    exported: "passkeys",
    erasure: "deleted",
    why: "sign-in ends; exported by name, kind of device and dates (never the public key or credential id)",
  },
  "internal.passkey_challenges": {
    columns: ["user_id"],
    exported: null,
    erasure: "deleted",
    why: "a registration under way (short-lived, a secret challenge: never exported)",
  },
  "internal.oauth_flow_states": {
    columns: ["link_user_id", "user_id"],
    exported: null,
    erasure: "deleted",
    why: "a sign-in through an OpenID Connect provider under way (short-lived, secrets: never exported)",
  },
  "internal.memberships": {
    columns: ["user_id"],
    exported: "memberships",
    erasure: "deleted",
    why: "refused while the person is an account's only owner (sole_owner, naming the account)",
  },
  "internal.staff": {
    columns: ["user_id"],
    exported: "staff_roles",
    erasure: "kept",
    why: "erasure is refused while the person is staff (staff): removing a staff role is an act of its own",
  },
  "internal.invitations": {
    columns: ["email", "invited_by"],
    exported: "invitations_received",
    erasure: "deleted",
    why: "invitations to their address are deleted; those they sent keep invited_by, a pseudonym",
  },
  "public.notifications": {
    columns: ["user_id"],
    exported: "notifications",
    erasure: "deleted",
    why: "their notifications",
  },
  "internal.mail_outbox": {
    columns: ["to_address"],
    exported: "mail",
    erasure: "deleted",
    why: "mail to their address, sent or waiting",
  },
  "internal.idempotency_keys": {
    columns: ["owner", "method"],
    exported: null,
    erasure: "deleted",
    why: "stored answers to their requests (owner user:<id>); method is the HTTP method",
  },
  "internal.jobs": {
    columns: ["locked_by"],
    exported: null,
    erasure: "deleted",
    why: "jobs not running whose payload names their address; locked_by is a worker's name",
  },
  "internal.payees": {
    columns: [
      "email",
      "name",
      "user_id",
      "tax_form",
      "tax_status",
      "tax_country",
      "tax_name",
      "tax_id_sealed",
      "tax_id_last4",
      "payout_method",
    ],
    exported: "payees",
    erasure: "anonymised",
    why: "name, e-mail, user, tax identity and payout method cleared, erased_at set (money.payee_erased): the ledger keeps the payee id",
  },
  "internal.payouts": {
    columns: ["method", "requested_by"],
    exported: "payouts",
    erasure: "kept",
    why: "a payment made or asked for is an accounting record kept for the legal retention period (amount, date, where it was paid)",
  },
  "internal.audit_log": {
    columns: ["actor_type", "actor", "actor_detail", "ip"],
    exported: "audit",
    erasure: "anonymised",
    why: 'in the rows about them, e-mail, client address and other personal keys become "erased" through internal.audit_rewrite (which records itself); actor keeps the user id, a pseudonym',
  },
  "internal.tickets": {
    // assignee_user_id: the staff member a ticket is assigned to (migration 0049).
    columns: ["opened_by", "assignee_user_id"],
    exported: "tickets",
    erasure: "kept",
    why: `the account's support history; ${PSEUDONYM}`,
  },
  "internal.ticket_replies": {
    columns: ["author_user_id", "author_staff"],
    exported: "tickets",
    erasure: "kept",
    why: `the account's support history; ${PSEUDONYM}`,
  },
  "internal.api_keys": {
    columns: ["name", "created_by"],
    exported: "api_keys_created",
    erasure: "kept",
    why: `the account's keys; ${PSEUDONYM}`,
  },
  "internal.webhook_endpoints": {
    columns: ["created_by"],
    exported: null,
    erasure: "kept",
    why: `the account's endpoints; ${PSEUDONYM}`,
  },
  "internal.oac_requests": {
    columns: ["created_by"],
    exported: null,
    erasure: "kept",
    why: `the account's requests; ${PSEUDONYM}`,
  },
  "internal.release_history": {
    columns: ["actor_role", "actor_user_id", "actor_api_key_id"],
    exported: null,
    erasure: "kept",
    why: `the catalogue's history; ${PSEUDONYM}`,
  },
  "public.releases": {
    columns: ["artist_name", "label_name", "created_by"],
    exported: null,
    erasure: "kept",
    why: `the account's catalogue (credits published to stores); ${PSEUDONYM}`,
  },
  "public.tracks": {
    columns: ["artist_name", "created_by"],
    exported: null,
    erasure: "kept",
    why: `the account's catalogue (credits published to stores); ${PSEUDONYM}`,
  },
  "public.artist_profiles": {
    columns: ["name", "created_by"],
    exported: null,
    erasure: "kept",
    why: `the account's artists (public stage names); ${PSEUDONYM}`,
  },
  "public.media_assets": {
    columns: ["created_by"],
    exported: null,
    erasure: "kept",
    why: `the account's media; ${PSEUDONYM}`,
  },
  "public.takedown_requests": {
    columns: ["created_by"],
    exported: null,
    erasure: "kept",
    why: `the account's requests; ${PSEUDONYM}`,
  },
  "internal.recoupables": {
    columns: ["created_by"],
    exported: null,
    erasure: "kept",
    why: `the account's money (an accounting record); ${PSEUDONYM}`,
  },
  "internal.money_periods": {
    columns: ["approved_by"],
    exported: null,
    erasure: "kept",
    why: `a period's approval (an accounting record); ${PSEUDONYM}`,
  },
  "internal.payout_batches": {
    columns: ["approved_by"],
    exported: null,
    erasure: "kept",
    why: `a batch's approval (an accounting record); ${PSEUDONYM}`,
  },
  "internal.release_deliveries": {
    columns: ["confirmed_by"],
    exported: null,
    erasure: "kept",
    why: `a delivery's confirmation; ${PSEUDONYM}`,
  },
  "internal.organization_settings": {
    columns: ["display_name", "support_email"],
    exported: null,
    erasure: "none",
    why: "the tenant's own name and support address, set by its admins: a business contact, not a member's account",
  },
  "internal.partners": {
    columns: ["name", "contact_email"],
    exported: null,
    erasure: "none",
    why: "a business partner's contact, set by the operator: not a member's account",
  },
  "internal.accounts": {
    columns: ["name"],
    exported: "memberships",
    erasure: "deleted",
    why: "an account only they belong to that holds nothing (the personal account sign-up made, named after them) is deleted; one with a catalogue or money of which they are the only owner refuses the erasure (sole_owner); others are the label's, not theirs",
  },
  "storage.buckets": {
    columns: ["owner"],
    exported: null,
    erasure: "kept",
    why: `the tenant's bucket; ${PSEUDONYM}`,
  },
  "storage.objects": {
    columns: ["name", "owner"],
    exported: null,
    erasure: "kept",
    why: `the account's files (name: a path the uploader chose); ${PSEUDONYM}`,
  },
  "internal.add_on_orders": {
    columns: ["name", "ordered_by"],
    exported: null,
    erasure: "kept",
    why: `the account's purchases (an accounting record; name is the add-on's); ${PSEUDONYM}`,
  },
  "internal.invoices": {
    columns: ["tax_rate", "tax_rule", "tax_note", "issued_by"],
    exported: null,
    erasure: "kept",
    why: `an invoice to a tenant (an accounting record; tax_* is the tax applied, not a person's tax identity); ${PSEUDONYM}`,
  },
  "internal.credit_notes": {
    columns: ["tax_rate", "issued_by"],
    exported: null,
    erasure: "kept",
    why: `a credit note to a tenant (an accounting record; tax_rate is the rate applied); ${PSEUDONYM}`,
  },
  "internal.whitelabel_payments": {
    columns: ["method", "recorded_by"],
    exported: null,
    erasure: "kept",
    why: `a tenant's payment to the operator (an accounting record; method is how it paid); ${PSEUDONYM}`,
  },
  "internal.billing_issuer": {
    columns: ["legal_name", "address", "email", "tax_rates"],
    exported: null,
    erasure: "none",
    why: "the operator's own business identity on its invoices, set by the operator: not a member's account",
  },
  "internal.tenant_billing": {
    columns: ["legal_name", "address", "email"],
    exported: null,
    erasure: "none",
    why: "a tenant's billing name, address and contact (a business customer of the operator), set by the operator: not a member's account",
  },
  "internal.oidc_providers": {
    columns: ["name", "display_name"],
    exported: null,
    erasure: "none",
    why: "names an identity provider (Google, a company's sign-in), not a person",
  },
  "internal.add_on_settings": { columns: ["name"], exported: null, erasure: "none", why: NOT_PERSONAL },
  "internal.billing_plans": { columns: ["name"], exported: null, erasure: "none", why: NOT_PERSONAL },
  "internal.custom_scripts": { columns: ["name"], exported: null, erasure: "none", why: NOT_PERSONAL },
  "internal.genres": { columns: ["name"], exported: null, erasure: "none", why: NOT_PERSONAL },
  "internal.territories": { columns: ["name"], exported: null, erasure: "none", why: NOT_PERSONAL },
  "internal.stores": { columns: ["name"], exported: null, erasure: "none", why: NOT_PERSONAL },
  "internal.tenants": { columns: ["name"], exported: null, erasure: "none", why: NOT_PERSONAL },
  "internal.schema_migrations": { columns: ["name"], exported: null, erasure: "none", why: NOT_PERSONAL },
  "internal.store_inbox_files": { columns: ["name"], exported: null, erasure: "none", why: NOT_PERSONAL },
  "internal.royalty_imports": { columns: ["file_name"], exported: null, erasure: "none", why: NOT_PERSONAL },
  "internal.royalty_import_runs": {
    columns: ["file_name"],
    exported: null,
    erasure: "none",
    why: NOT_PERSONAL,
  },
  "internal.webhook_deliveries": {
    columns: ["locked_by"],
    exported: null,
    erasure: "none",
    why: "locked_by is a dispatcher's name",
  },
  // Kept whole: an approved statement never changes (migration 0036's trigger).
  "internal.statements": {
    columns: [],
    exported: "statements",
    erasure: "kept",
    why: "an approved statement is an accounting record, frozen once approved and kept for the legal retention period: its document keeps the payee's name and address as sent",
  },
  "internal.rate_counters": {
    columns: [],
    exported: null,
    erasure: "deleted",
    why: "counters whose key names their address (short-lived)",
  },
  "internal.rate_limits": {
    columns: [],
    exported: null,
    erasure: "deleted",
    why: "counters whose key names their address (short-lived)",
  },
};

/** Tables whose rows may still hold the person's e-mail after erasure, and why (docs/privacy.md). */
export const KEPT_WITH_ADDRESS = ["internal.statements"] as const;
