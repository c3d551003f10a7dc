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

export interface TrackForReview {
  id: string;
  title?: string;
  position?: number;
  track_number?: number;
  isrc?: string | null;
  duration_ms?: number | null;
  audio_url?: string | null;
  audio?: { url?: string | null; [k: string]: unknown } | null;
  [field: string]: unknown;
}

export interface ReleaseForReview {
  id: string;
  title: string;
  status: string;
  artist_name?: string | null;
  cover_url?: string | null;
  cover?: { url?: string | null; [k: string]: unknown } | null;
  tracks?: TrackForReview[];
  artists?: { id?: string; name: string; role?: string }[];
  problems?: Problem[];
  media_checks?: unknown;
  correction?: unknown;
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

export interface Delivery {
  id: string;
  release_id?: string;
  release_title?: string;
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
  history?: {
    at?: string;
    created_at?: string;
    status?: string;
    message?: string | null;
    [k: string]: unknown;
  }[];
  messages?: unknown[];
}

export interface TakedownRequest {
  id: string;
  release_id?: string;
  release_title?: string;
  status: string;
  reason?: string | null;
  created_at?: string;
  stores?: { store: string; status: string; [k: string]: unknown }[];
  [field: string]: unknown;
}

export interface OacRequest {
  id: string;
  artist_id?: string;
  artist_name?: string;
  store: string;
  channel_url?: string;
  status: string;
  created_at?: string;
  [field: string]: unknown;
}

export interface Job {
  id: string;
  kind?: string;
  queue?: string;
  name?: string;
  state: string;
  attempts?: number;
  last_error?: string | null;
  created_at?: string;
  updated_at?: string;
  [field: string]: unknown;
}

export interface RoyaltyImport {
  id: string;
  object?: string;
  format: string;
  file_name?: string | null;
  reporting_period?: string | null;
  store?: string | null;
  status: string;
  lines_total: number;
  lines_matched: number;
  lines_unmatched: number;
  lines_malformed: number;
  bytes_total?: number | null;
  bytes_read?: number | null;
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
  created_at?: string;
  members?: { user_id?: string; email?: string; role?: string; [k: string]: unknown }[];
  invitations?: { id?: string; email?: string; role?: string; status?: string; [k: string]: unknown }[];
  [field: string]: unknown;
}

export interface ApiKey {
  id: string;
  name?: string;
  prefix?: string;
  mode?: string;
  created_at?: string;
  last_used_at?: string | null;
  revoked_at?: string | null;
  [field: string]: unknown;
}

export interface Store {
  id: string;
  code?: string;
  name?: string;
  enabled?: boolean;
  adapter?: string;
  settings?: Record<string, unknown>;
  [field: string]: unknown;
}

export interface TenantSettings {
  lead_days?: number;
  auto_review?: boolean;
  display_name?: string | null;
  logo_url?: string | null;
  primary_color?: string | null;
  support_email?: string | null;
  branding?: Record<string, unknown>;
  [field: string]: unknown;
}
