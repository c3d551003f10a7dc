/**
 * /admin/v1 with a staff user's session (docs/console.md): the tenant's anon key as `apikey`, the
 * user's access token as the bearer, and the tenant acted on as `Backline-Tenant`. Lists are
 * cursor pages (`limit`, `starting_after`) answered as `{data, has_more}`.
 */
import { accessToken } from "./auth.ts";
import { ApiError, errorFrom } from "./errors.ts";
import { getSession } from "./session.ts";
import type {
  AccountDetail,
  AdminMe,
  ApiKey,
  Decision,
  Delivery,
  DeliveryDetail,
  Job,
  OacRequest,
  Page,
  ReleaseForReview,
  ReviewPage,
  ReviewReason,
  RoyaltyImport,
  SettingsPatch,
  Store,
  TakedownRequest,
  TenantSettings,
} from "./types.ts";

export type Params = Record<string, string | number | boolean | undefined | null>;

export function query(params: Params = {}): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") search.set(key, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

export async function adminHeaders(): Promise<Record<string, string>> {
  const stored = getSession();
  if (!stored) throw new ApiError(401, "signed_out", "Sign in first.");
  const token = await accessToken();
  const headers: Record<string, string> = {
    apikey: stored.tenant.anon_key,
    authorization: `Bearer ${token}`,
  };
  const acting = getSession()?.actingTenantId;
  if (acting) headers["backline-tenant"] = acting;
  return headers;
}

export async function admin<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers = await adminHeaders();
  if (body !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(`/admin/v1${path}`, {
    method,
    headers,
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  if (!response.ok) throw await errorFrom(response);
  const text = await response.text();
  return (text ? JSON.parse(text) : {}) as T;
}

const get = <T>(path: string, params?: Params) => admin<T>("GET", `${path}${query(params)}`);
const post = <T>(path: string, body?: unknown) => admin<T>("POST", path, body ?? {});
const id = encodeURIComponent;

export const api = {
  me: () => get<AdminMe>("/me"),

  reviews: (params: Params) => get<ReviewPage>("/reviews", params),
  release: (releaseId: string) => get<ReleaseForReview>(`/releases/${id(releaseId)}`),
  approve: (releaseId: string) => post<Decision>(`/releases/${id(releaseId)}/approve`),
  reject: (releaseId: string, reason: string) =>
    post<Decision>(`/releases/${id(releaseId)}/reject`, { reason }),
  reviewReasons: () => get<{ data: ReviewReason[] }>("/review-reasons"),

  deliveries: (params: Params) => get<Page<Delivery>>("/deliveries", params),
  releaseDeliveries: (releaseId: string) => get<Page<Delivery>>(`/releases/${id(releaseId)}/deliveries`),
  delivery: (deliveryId: string) => get<DeliveryDetail>(`/deliveries/${id(deliveryId)}`),
  retryRelease: (releaseId: string) =>
    post<{ release_id: string; retried: number }>(`/releases/${id(releaseId)}/deliveries/retry`),
  report: (deliveryId: string, body: { status: string; message?: string; note?: string }) =>
    post<Delivery>(`/deliveries/${id(deliveryId)}/report`, body),

  takedowns: (params: Params) => get<Page<TakedownRequest>>("/takedowns", params),

  oacRequests: (params: Params) => get<Page<OacRequest>>("/oac-requests", params),
  approveOac: (requestId: string, note?: string) =>
    post<Decision>(`/oac-requests/${id(requestId)}/approve`, note ? { note } : {}),
  rejectOac: (requestId: string, reason: string) =>
    post<Decision>(`/oac-requests/${id(requestId)}/reject`, { reason }),

  jobs: (params: Params) => get<Page<Job>>("/jobs", params),
  retryJob: (jobId: string) => post<Job>(`/jobs/${id(jobId)}/retry`),

  royaltyImports: (params: Params) => get<Page<RoyaltyImport>>("/royalty-imports", params),
  royaltyImport: (importId: string) => get<RoyaltyImport>(`/royalty-imports/${id(importId)}`),
  voidImport: (importId: string, reason: string) =>
    post<RoyaltyImport>(`/royalty-imports/${id(importId)}/void`, { reason }),

  accounts: (params: Params) => get<Page<AccountDetail>>("/accounts", params),
  account: (accountId: string) => get<AccountDetail>(`/accounts/${id(accountId)}`),
  apiKeys: (accountId: string) => get<Page<ApiKey>>(`/accounts/${id(accountId)}/api-keys`),
  createAccount: (body: { name: string; kind: "label" | "artist" }) => post<AccountDetail>("/accounts", body),
  addMember: (accountId: string, body: { email: string; role: string }) =>
    post<{ status: "added" | "invited"; role: string; email?: string }>(
      `/accounts/${id(accountId)}/members`,
      body,
    ),
  issueApiKey: (accountId: string, body: { name: string; mode: "live" | "test" }) =>
    post<{ key: ApiKey; account_id: string; secret: string }>(`/accounts/${id(accountId)}/api-keys`, body),

  stores: () => get<Page<Store>>("/stores"),
  store: (code: string) => get<Store>(`/stores/${id(code)}`),
  patchStore: (code: string, body: Record<string, unknown>) =>
    admin<Store>("PATCH", `/stores/${id(code)}`, body),
  /** What `backline stores configure --check` runs (platform staff, aal2). */
  checkStore: (code: string) => post<{ ok: boolean; message: string }>(`/stores/${id(code)}/check`),

  settings: () => get<TenantSettings>("/settings"),
  patchSettings: (body: SettingsPatch) => admin<TenantSettings>("PATCH", "/settings", body),
  uploadLogo: async (file: File): Promise<TenantSettings> => {
    const headers = await adminHeaders();
    const response = await fetch("/admin/v1/settings/logo", {
      method: "POST",
      headers: { ...headers, "content-type": file.type.startsWith("image/") ? file.type : "image/png" },
      body: file,
    });
    if (!response.ok) throw await errorFrom(response);
    return (await response.json()) as TenantSettings;
  },
};

export interface UploadProgress {
  sent: number;
  total: number;
  /** true once every byte is sent: the server imports it now. */
  done: boolean;
}

/**
 * Uploads a royalty report with XMLHttpRequest, whose upload events give the bytes sent (fetch
 * has none); the answer comes once the import is done (the request lasts as long as it does).
 * `params.id` names the import so its progress can be polled meanwhile (GET /royalty-imports/{id}).
 */
export async function uploadRoyaltyReport(
  file: File,
  params: Params,
  onProgress: (p: UploadProgress) => void,
  signal?: AbortSignal,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const headers = await adminHeaders();
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", `/admin/v1/royalty-imports${query(params)}`);
    for (const [key, value] of Object.entries(headers)) xhr.setRequestHeader(key, value);
    xhr.setRequestHeader("content-type", file.type && file.type !== "" ? file.type : "text/csv");
    xhr.upload.onprogress = (event) =>
      onProgress({
        sent: event.loaded,
        total: event.lengthComputable ? event.total : file.size,
        done: false,
      });
    xhr.upload.onload = () => onProgress({ sent: file.size, total: file.size, done: true });
    xhr.onerror = () => reject(new TypeError("The upload failed: the server could not be reached."));
    xhr.onabort = () => reject(new DOMException("Upload cancelled", "AbortError"));
    xhr.onload = () => {
      let body: Record<string, unknown> = {};
      try {
        body = JSON.parse(xhr.responseText) as Record<string, unknown>;
      } catch {
        // Not JSON.
      }
      // 201 completed, 200 duplicate, 422 rejected: each brings the import report.
      if ((xhr.status >= 200 && xhr.status < 300) || (xhr.status === 422 && body.import)) {
        return resolve({ status: xhr.status, body });
      }
      const errors = Array.isArray(body.errors) ? (body.errors as ApiError["errors"]) : [];
      reject(
        new ApiError(
          xhr.status,
          String(body.code ?? `http_${xhr.status}`),
          String(body.detail ?? body.message ?? (xhr.statusText || "Upload failed")),
          typeof body.param === "string" ? body.param : undefined,
          errors,
        ),
      );
    };
    signal?.addEventListener("abort", () => xhr.abort());
    xhr.send(file);
  });
}
