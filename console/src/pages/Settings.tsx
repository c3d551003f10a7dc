import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useEffect, useId, useState } from "react";
import { api } from "../api/admin.ts";
import type { TenantSettings } from "../api/types.ts";
import { ErrorState, Loading, Page } from "../ui/common.tsx";

interface Form {
  lead_days: string;
  auto_review: boolean;
  display_name: string;
  logo_url: string;
  primary_color: string;
  support_email: string;
}

function toForm(s: TenantSettings): Form {
  const b = (s.branding ?? {}) as Record<string, unknown>;
  const str = (v: unknown) => (typeof v === "string" ? v : "");
  return {
    lead_days: s.lead_days === undefined || s.lead_days === null ? "" : String(s.lead_days),
    auto_review: Boolean(s.auto_review),
    display_name: str(s.display_name ?? b.display_name),
    logo_url: str(s.logo_url ?? b.logo_url),
    primary_color: str(s.primary_color ?? b.primary_color),
    support_email: str(s.support_email ?? b.support_email),
  };
}

/** The tenant's settings: release lead days, automatic review, and the branding of part 2. */
export default function Settings() {
  const client = useQueryClient();
  const settings = useQuery({ queryKey: ["settings"], queryFn: api.settings });
  const [form, setForm] = useState<Form | null>(null);
  const ids = useId();
  useEffect(() => {
    if (settings.data) setForm(toForm(settings.data));
  }, [settings.data]);
  const save = useMutation({
    mutationFn: (body: Partial<TenantSettings>) => api.patchSettings(body),
    onSuccess: (s) => client.setQueryData(["settings"], s),
  });
  const set = (key: keyof Form) => (value: string | boolean) =>
    setForm((f) => (f ? { ...f, [key]: value } : f));

  function submit(event: FormEvent) {
    event.preventDefault();
    if (!form) return;
    const nullable = (v: string) => (v.trim() === "" ? null : v.trim());
    save.mutate({
      ...(form.lead_days.trim() !== "" ? { lead_days: Number(form.lead_days) } : {}),
      auto_review: form.auto_review,
      display_name: nullable(form.display_name),
      logo_url: nullable(form.logo_url),
      primary_color: nullable(form.primary_color),
      support_email: nullable(form.support_email),
    });
  }
  const fieldError = (param: string) => {
    const e = save.error as {
      errors?: { param?: string; message?: string }[];
      param?: string;
      message?: string;
    } | null;
    const hit = e?.errors?.find((x) => x.param === param) ?? (e?.param === param ? e : undefined);
    return hit?.message;
  };

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
            Lead days (days between approval and the earliest release date)
          </label>
          <input
            id={`${ids}-lead`}
            type="number"
            min={0}
            value={form.lead_days}
            onChange={(e) => set("lead_days")(e.target.value)}
            aria-invalid={Boolean(fieldError("lead_days"))}
            data-testid="settings-lead-days"
          />
          {fieldError("lead_days") ? <p className="error-text">{fieldError("lead_days")}</p> : null}
          <label>
            <input
              type="checkbox"
              checked={form.auto_review}
              onChange={(e) => set("auto_review")(e.target.checked)}
              data-testid="settings-auto-review"
            />{" "}
            Approve submitted releases automatically (no review queue)
          </label>
          <h2>Branding</h2>
          {(
            [
              ["display_name", "Display name", "text"],
              ["logo_url", "Logo URL", "url"],
              ["primary_color", "Primary colour (#rrggbb)", "text"],
              ["support_email", "Support e-mail", "email"],
            ] as const
          ).map(([key, label, type]) => (
            <div key={key}>
              <label htmlFor={`${ids}-${key}`}>{label}</label>
              <input
                id={`${ids}-${key}`}
                type={type}
                value={form[key]}
                onChange={(e) => set(key)(e.target.value)}
                aria-invalid={Boolean(fieldError(key))}
                data-testid={`settings-${key.replace(/_/g, "-")}`}
              />
              {fieldError(key) ? <p className="error-text">{fieldError(key)}</p> : null}
            </div>
          ))}
          <button type="submit" className="primary" disabled={save.isPending} data-testid="settings-save">
            Save
          </button>
          {save.isSuccess ? (
            <p role="status" data-testid="settings-saved">
              Saved.
            </p>
          ) : null}
          {save.isError ? <ErrorState error={save.error} /> : null}
        </form>
      ) : null}
    </Page>
  );
}
