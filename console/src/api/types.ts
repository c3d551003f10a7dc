/**
 * The shapes the console reads from /admin/v1 (docs/operator.md). Fields the console does not
 * name are still shown where a page lists "every field"; optional ones may be missing on a server
 * that does not have them yet.
 */

export interface Page<T> {
  data: T[];
  has_more?: boolean;
}

export interface Problem {
  param?: string;
  code: string;
  message: string;
}

export interface StaffMembership {
  tenant_id: string;
  tenant_slug?: string;
  tenant_name?: string;
  role: "reviewer" | "operator" | "admin";
}

export interface AdminMe {
  /** null for a service-role key. */
  user: { id: string; email?: string | null } | null;
  tenant_id: string;
  platform_role: null | "reviewer" | "operator" | "admin";
  staff: StaffMembership[];
}

export interface QueuedRelease {
  id: string;
  account_id?: string;
  title: string;
  artist_name?: string | null;
  status: string;
  submitted_at: string | null;
  problems?: Problem[];
  [field: string]: unknown;
}

export interface ReviewPage extends Page<QueuedRelease> {
  counts?: Record<string, number>;
}

/** A media file of the review page: `url` is a signed /storage/v1 URL, valid 15 minutes. */
export interface MediaFile {
  asset_id?: string;
  status?: string;
  content_type?: string | null;
  filename?: string | null;
  bytes?: number | null;
  metadata?: Record<string, unknown> | null;
  problems?: unknown;
  url?: string | null;
  url_expires_at?: string | null;
  [k: string]: unknown;
}

export interface TrackForReview {
  id: string;
  title?: string;
  version?: string | null;
  track_number?: number;
  disc_number?: number;
  isrc?: string | null;
  /** Seconds. */
  duration?: number | null;
  audio?: MediaFile | null;
  [field: string]: unknown;
}

export interface MediaCheck {
  slot: "cover" | "audio" | string;
  track_id?: string | null;
  status: string;
  problems?: { code: string; message: string }[];
}

export interface ReleaseForReview {
  id: string;
  title: string;
  status: string;
  artist_name?: string | null;
  cover?: MediaFile | null;
  tracks?: TrackForReview[];
  checks?: Problem[];
  media_checks?: MediaCheck[];
  correction?: {
    version?: number;
    corrected_at?: string;
    delivered?: Record<string, unknown> | null;
    changes?: { field: string; delivered: unknown; current: unknown }[] | null;
  } | null;
  history?: {
    from_status?: string;
    to_status?: string;
    reason?: string | null;
    actor_role?: string;
    actor: string;
    created_at?: string;
  }[];
  [field: string]: unknown;
}

export interface ReviewReason {
  code?: string;
  label?: string;
  text?: string;
  reason?: string;
}

export interface Decision {
  id: string;
  status: string;
  status_reason: string | null;
}

export interface ReleaseRef {
  id: string;
  account_id?: string;
  title?: string;
  artist_name?: string | null;
  status?: string;
}

export interface Delivery {
  id: string;
  release?: ReleaseRef;
  store: string;
  action?: string;
  status: string;
  attempts?: number;
  message?: string | null;
  store_reference?: string | null;
  created_at?: string | null;
  updated_at?: string | null;
  live_at?: string | null;
  [field: string]: unknown;
}

export interface DeliveryDetail extends Delivery {
  /** Every record of the same release and store, newest first, with the store's messages. */
  history?: Delivery[];
  /** The jobs that sent or confirmed it. */
  jobs?: Job[];
  /** The store's acknowledgement files about it, newest first; set-aside ones with their error. */
  acknowledgements?: DeliveryAcknowledgement[];
}

export interface DeliveryAcknowledgement {
  file: string;
  /** applied, waiting, expired, invalid or unreadable. */
  outcome: string;
  error: string | null;
  errors: string[];
  tries: number;
  received_at: string;
  last_tried_at: string;
}

export interface TakedownRequest {
  id: string;
  release?: ReleaseRef;
  status: string;
  status_reason?: string | null;
  reason?: string | null;
  created_at?: string;
  completed_at?: string | null;
  stores?: {
    store: string;
    status: string;
    sent_at?: string | null;
    taken_down_at?: string | null;
    confirmed_by?: string | null;
  }[];
  [field: string]: unknown;
}

export interface OacRequest {
  id: string;
  account_id?: string;
  artist_id?: string;
  artist_name?: string;
  store: string;
  channel_url?: string;
  status: string;
  status_reason?: string | null;
  created_at?: string;
  completed_at?: string | null;
  [field: string]: unknown;
}

export interface Job {
  /** A number, as a string. */
  id: string;
  kind?: string;
  status: string;
  attempts?: number;
  max_attempts?: number;
  run_at?: string | null;
  last_error?: string | null;
  created_at?: string;
  updated_at?: string;
  finished_at?: string | null;
  payload?: unknown;
  [field: string]: unknown;
}

export interface ImportProgress {
  phase: "receiving" | "importing" | "done" | "failed";
  total_bytes?: number | null;
  bytes_received?: number;
  bytes_read?: number;
  lines?: number;
  import_id?: string | null;
  error?: string | null;
}

export interface RoyaltyImport {
  id: string;
  object?: string;
  format: string;
  file_name?: string | null;
  reporting_period?: string | null;
  /** The first and last sale period of its lines (YYYY-MM-DD). */
  period_from?: string | null;
  period_to?: string | null;
  store?: string | null;
  /** running (see progress), completed, rejected, voided; duplicate / failed while polled. */
  status: string;
  lines_total: number;
  lines_matched: number;
  lines_unmatched: number;
  lines_malformed: number;
  progress?: ImportProgress | null;
  errors?: unknown;
  totals?: unknown;
  unmatched?: unknown;
  started_at?: string;
  completed_at?: string | null;
  voided_at?: string | null;
  void_reason?: string | null;
  [field: string]: unknown;
}

export interface AccountDetail {
  id: string;
  name?: string;
  kind?: string;
  is_sandbox?: boolean;
  created_at?: string;
  updated_at?: string;
  members?: {
    user_id?: string;
    email?: string;
    role?: string;
    created_at?: string;
    last_sign_in_at?: string | null;
  }[];
  invitations?: {
    id?: string;
    email?: string;
    role?: string;
    created_at?: string;
    accepted_at?: string | null;
  }[];
  counts?: Record<string, number>;
  [field: string]: unknown;
}

export interface ApiKey {
  id: string;
  name?: string;
  prefix?: string;
  mode?: string;
  scopes?: string[];
  account_role?: string;
  status?: string;
  expires_at?: string | null;
  created_at?: string;
  last_used_at?: string | null;
  revoked_at?: string | null;
  [field: string]: unknown;
}

/** A store of the installation, named by its code. */
export interface Store {
  code: string;
  name?: string;
  kind?: string;
  enabled?: boolean;
  offers_oac?: boolean;
  sort?: number;
  adapter?: string;
  updated_at?: string;
  /** Platform staff only: the adapter's settings without credentials. */
  settings?: Record<string, unknown>;
  /** Platform staff only: where credentials are set (paths, never values). */
  credentials?: string[];
  [field: string]: unknown;
}

export interface Branding {
  display_name: string | null;
  logo_url: string | null;
  primary_color: string | null;
  support_email: string | null;
  custom_css?: string | null;
}

export interface TenantSettings {
  tenant_id?: string;
  release_lead_days: number;
  auto_review: boolean;
  require_media?: boolean;
  branding: Branding;
  updated_at?: string;
}

export interface SettingsPatch {
  release_lead_days?: number;
  auto_review?: boolean;
  require_media?: boolean;
  branding?: Partial<Branding>;
}
