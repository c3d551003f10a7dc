import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useEffect, useId, useState } from "react";
import { api } from "../api/admin.ts";
import { ApiError } from "../api/errors.ts";
import type { TenantConfig } from "../api/session.ts";
import type { SettingsPatch, TenantSettings } from "../api/types.ts";
import { Checkbox, ErrorState, Loading, Page, When } from "../ui/common.tsx";
import { fieldProblems } from "../ui/field-errors.ts";
import { CustomScripts } from "./CustomScripts.tsx";

interface Form {
  release_lead_days: string;
  auto_review: boolean;
  require_media: boolean;
  display_name: string;
  logo_url: string;
  primary_color: string;
  support_email: string;
  custom_css: string;
}

const BRANDING = [
  ["display_name", "Display name", "text"],
  ["logo_url", "Logo URL", "url"],
  ["primary_color", "Primary colour (#rrggbb)", "text"],
  ["support_email", "Support e-mail", "email"],
] as const;

function toForm(s: TenantSettings): Form {
  return {
    release_lead_days: String(s.release_lead_days ?? ""),
    auto_review: Boolean(s.auto_review),
    require_media: Boolean(s.require_media),
    display_name: s.branding?.display_name ?? "",
    logo_url: s.branding?.logo_url ?? "",
    primary_color: s.branding?.primary_color ?? "",
    support_email: s.branding?.support_email ?? "",
    custom_css: s.branding?.custom_css ?? "",
  };
}

/** The tenant's settings: release lead days, automatic review, media required, and the branding of part 2. */
export default function Settings() {
  const client = useQueryClient();
  const settings = useQuery({ queryKey: ["settings"], queryFn: api.settings });
  const [form, setForm] = useState<Form | null>(null);
  const ids = useId();
  useEffect(() => {
    if (settings.data) setForm(toForm(settings.data));
  }, [settings.data]);
  const save = useMutation({
    mutationFn: (body: SettingsPatch) => api.patchSettings(body),
    onSuccess: (s) => {
      client.setQueryData(["settings"], s);
      // The header wears the new branding at once (the public tenant answer is cached a few seconds).
      client.setQueriesData<TenantConfig>({ queryKey: ["tenant-config"] }, (old) =>
        old && old.id === s.tenant_id ? { ...old, branding: { ...old.branding, ...s.branding } } : old,
      );
    },
  });
  const logo = useMutation({
    mutationFn: (file: File) => api.uploadLogo(file),
    onSuccess: (s) => {
      client.setQueryData(["settings"], s);
      setForm((f) => (f ? { ...f, logo_url: s.branding.logo_url ?? "" } : f));
    },
  });
  const logoError =
    fieldProblems(logo.error)
      .map((p) => p.message)
      .join(" ") ||
    (logo.error instanceof ApiError ? logo.error.message : logo.error ? String(logo.error) : "");
  const set = (key: keyof Form) => (value: string | boolean) =>
    setForm((f) => (f ? { ...f, [key]: value } : f));

  function submit(event: FormEvent) {
    event.preventDefault();
    if (!form) return;
    const nullable = (v: string) => (v.trim() === "" ? null : v.trim());
    const days = form.release_lead_days.trim();
    save.mutate({
      ...(days !== "" ? { release_lead_days: Number(days) } : {}),
      auto_review: form.auto_review,
      require_media: form.require_media,
      branding: {
        display_name: nullable(form.display_name),
        logo_url: nullable(form.logo_url),
        primary_color: nullable(form.primary_color),
        support_email: nullable(form.support_email),
        custom_css: form.custom_css.trim() === "" ? null : form.custom_css,
      },
    });
  }
  /** The refusal of `param` in plain words, without the API's path (`branding.primary_color: …`). */
  const fieldError = (param: string): string | undefined =>
    fieldProblems(save.error).find((x) => x.param === param)?.message;
  const errorId = (key: string) => `${ids}-${key}-error`;
  /** Whether the form shows the error next to its fields (then it is not said again below). */
  const fieldsClaim = (e: unknown): boolean =>
    e instanceof ApiError &&
    [e.param, ...e.errors.map((x) => x.param)].some(
      (p) => p === "release_lead_days" || Boolean(p?.startsWith("branding.")),
    );

  return (
    <Page title="Settings" testid="page-settings">
      {settings.isPending ? (
        <Loading />
      ) : settings.isError ? (
        <ErrorState error={settings.error} onRetry={() => settings.refetch()} />
      ) : form ? (
        <form className="card" onSubmit={submit} data-testid="settings-form" noValidate>
          <h2>Releases</h2>
          <label htmlFor={`${ids}-lead`}>
            Lead days (0–365: days between submission and the earliest release date)
          </label>
          <input
            id={`${ids}-lead`}
            type="number"
            min={0}
            max={365}
            value={form.release_lead_days}
            onChange={(e) => set("release_lead_days")(e.target.value)}
            aria-invalid={Boolean(fieldError("release_lead_days"))}
            aria-describedby={errorId("release_lead_days")}
            data-testid="settings-lead-days"
          />
          <p id={errorId("release_lead_days")} className="error-text" data-testid="settings-lead-days-error">
            {fieldError("release_lead_days") ?? ""}
          </p>
          <Checkbox checked={form.auto_review} onChange={set("auto_review")} testid="settings-auto-review">
            Approve submitted releases automatically (no review queue)
          </Checkbox>
          <Checkbox
            checked={form.require_media}
            onChange={set("require_media")}
            testid="settings-require-media"
          >
            Require the cover and audio before a release can be submitted
          </Checkbox>
          <h2>Branding</h2>
          {BRANDING.map(([key, label, type]) => (
            <div key={key}>
              <label htmlFor={`${ids}-${key}`}>{label}</label>
              <input
                id={`${ids}-${key}`}
                type={type}
                value={form[key]}
                onChange={(e) => set(key)(e.target.value)}
                aria-invalid={Boolean(fieldError(`branding.${key}`))}
                aria-describedby={errorId(key)}
                data-testid={`settings-${key.replace(/_/g, "-")}`}
              />
              <p
                id={errorId(key)}
                className="error-text"
                data-testid={`settings-${key.replace(/_/g, "-")}-error`}
              >
                {fieldError(`branding.${key}`) ?? ""}
              </p>
            </div>
          ))}
          <label htmlFor={`${ids}-logo-file`}>Upload a logo (PNG, JPEG or WebP, at most 1 MB)</label>
          <input
            id={`${ids}-logo-file`}
            type="file"
            accept="image/png,image/jpeg,image/webp"
            onChange={(e) => {
              const file = e.target.files?.[0];
              if (file) logo.mutate(file);
            }}
            aria-invalid={Boolean(logoError)}
            aria-describedby={errorId("logo-file")}
            data-testid="settings-logo-file"
          />
          <p id={errorId("logo-file")} className="error-text" data-testid="settings-logo-error">
            {logoError}
          </p>
          {logo.isPending ? <p role="status">Uploading the logo…</p> : null}
          {form.logo_url ? (
            <p>
              <img
                src={form.logo_url}
                alt="The logo as saved"
                className="logo-preview"
                data-testid="settings-logo-preview"
              />
            </p>
          ) : null}
          <label htmlFor={`${ids}-custom_css`}>
            Custom CSS for the portal (optional, at most 64 KB, loaded after the portal's own styles)
          </label>
          <textarea
            id={`${ids}-custom_css`}
            rows={6}
            value={form.custom_css}
            onChange={(e) => set("custom_css")(e.target.value)}
            aria-invalid={Boolean(fieldError("branding.custom_css"))}
            aria-describedby={errorId("custom_css")}
            data-testid="settings-custom-css"
          />
          <p id={errorId("custom_css")} className="error-text">
            {fieldError("branding.custom_css") ?? ""}
          </p>
          <button type="submit" className="primary" disabled={save.isPending} data-testid="settings-save">
            Save
          </button>
          {save.isSuccess ? (
            <p role="status" data-testid="settings-saved">
              Saved <When at={save.data.updated_at} />.
            </p>
          ) : null}
          {save.isError && !fieldsClaim(save.error) ? <ErrorState error={save.error} /> : null}
          {save.isError && fieldsClaim(save.error) ? (
            <p className="error-text" role="alert" data-testid="settings-fields-error">
              Nothing was saved: correct the fields marked above.
            </p>
          ) : null}
        </form>
      ) : null}
      {settings.isSuccess ? <CustomScripts /> : null}
    </Page>
  );
}
