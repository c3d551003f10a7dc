import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useId, useState } from "react";
import { admin } from "../api/admin.ts";
import { Checkbox, Empty, ErrorState, Loading, TableWrap } from "../ui/common.tsx";
import { ConfirmDialog } from "../ui/Dialog.tsx";
import { fieldProblems } from "../ui/field-errors.ts";

/**
 * Settings' "Scripts on the portal" (docs/operator.md, "Custom scripts on the portal"): the
 * tenant's own analytics or chat scripts, as https addresses, loaded by this tenant's portal only
 * and added to its Content-Security-Policy while enabled (at the tenant's own portal domain only).
 * Through /admin/v1/custom-scripts.
 */

interface CustomScript {
  id: string;
  name: string;
  src: string;
  origin: string;
  placement: "head" | "body_end";
  connect_origins: string[];
  integrity: string | null;
  enabled: boolean;
}

const KEY = ["custom-scripts"];
const list = () => admin<{ data: CustomScript[] }>("GET", "/custom-scripts");

interface Draft {
  name: string;
  src: string;
  placement: "head" | "body_end";
  connect_origins: string;
  integrity: string;
  enabled: boolean;
}
const EMPTY: Draft = {
  name: "",
  src: "",
  placement: "head",
  connect_origins: "",
  integrity: "",
  enabled: false,
};

/**
 * The message of a refused field in plain words, without the API's field path (`src: only https…`
 * is said "Only https…" under the address): `connect_origins[1]` is said under the origins' box.
 */
function fieldMessage(error: unknown, field: string): string | undefined {
  const messages = fieldProblems(error)
    .filter((p) => p.param === field || p.param.startsWith(`${field}[`))
    .map((p) => p.message)
    .filter(Boolean);
  return messages.length > 0 ? messages.join(" ") : undefined;
}

export function CustomScripts() {
  const client = useQueryClient();
  const ids = useId();
  const scripts = useQuery({ queryKey: KEY, queryFn: list });
  const [draft, setDraft] = useState<Draft>(EMPTY);
  const [removing, setRemoving] = useState<CustomScript | null>(null);
  const refresh = () => client.invalidateQueries({ queryKey: KEY });
  const add = useMutation({
    mutationFn: (d: Draft) =>
      admin<CustomScript>("POST", "/custom-scripts", {
        name: d.name.trim(),
        src: d.src.trim(),
        placement: d.placement,
        connect_origins: d.connect_origins
          .split(/[\s,]+/)
          .map((s) => s.trim())
          .filter(Boolean),
        integrity: d.integrity.trim() === "" ? null : d.integrity.trim(),
        enabled: d.enabled,
      }),
    onSuccess: () => {
      setDraft(EMPTY);
      void refresh();
    },
  });
  const toggle = useMutation({
    mutationFn: (s: CustomScript) =>
      admin<CustomScript>("PATCH", `/custom-scripts/${s.id}`, { enabled: !s.enabled }),
    onSuccess: () => void refresh(),
  });
  const remove = useMutation({
    mutationFn: (s: CustomScript) => admin("DELETE", `/custom-scripts/${s.id}`),
    onSuccess: () => {
      setRemoving(null);
      void refresh();
    },
  });
  const set =
    <K extends keyof Draft>(key: K) =>
    (value: Draft[K]) =>
      setDraft((d) => ({ ...d, [key]: value }));
  const submit = (e: FormEvent) => {
    e.preventDefault();
    add.mutate(draft);
  };
  const err = (field: string) => fieldMessage(add.error, field);
  const claimed = ["name", "src", "placement", "connect_origins", "integrity"].some((f) => err(f));

  return (
    <section className="card" aria-labelledby={`${ids}-h`} data-testid="custom-scripts">
      <h2 id={`${ids}-h`}>Scripts on the portal</h2>
      <p>
        Analytics or a chat widget on this tenant&apos;s portal, from addresses you list: each enabled
        script&apos;s origin (and the origins it sends to) is added to the portal&apos;s
        Content-Security-Policy. Without any, the portal loads nothing from another site. Scripts run only
        where the portal is opened at this tenant&apos;s own domain (set by the operator), never at the shared
        address the console is on. A script runs with your members&apos; sessions: list only ones you trust.
      </p>
      {scripts.isPending ? (
        <Loading />
      ) : scripts.isError ? (
        <ErrorState error={scripts.error} onRetry={() => scripts.refetch()} />
      ) : scripts.data.data.length === 0 ? (
        <Empty>No scripts: the portal loads only its own files.</Empty>
      ) : (
        <TableWrap label="Scripts on the portal">
          <table data-testid="custom-scripts-table">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Address</th>
                <th scope="col">Sends to</th>
                <th scope="col">On the portal</th>
                <th scope="col">
                  <span className="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {scripts.data.data.map((s) => (
                <tr key={s.id} data-testid="custom-script-row" data-enabled={s.enabled}>
                  <td>{s.name}</td>
                  <td>
                    <code>{s.src}</code>
                  </td>
                  <td>{s.connect_origins.length > 0 ? s.connect_origins.join(", ") : "its own origin"}</td>
                  <td>
                    <Checkbox
                      checked={s.enabled}
                      onChange={() => toggle.mutate(s)}
                      testid="custom-script-enabled"
                    >
                      <span className="sr-only">Load {s.name} on the portal</span>
                      {s.enabled ? "on" : "off"}
                    </Checkbox>
                  </td>
                  <td>
                    <button type="button" onClick={() => setRemoving(s)} data-testid="custom-script-remove">
                      Remove<span className="sr-only"> {s.name}</span>
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      )}
      {toggle.isError ? <ErrorState error={toggle.error} /> : null}
      <ConfirmDialog
        open={removing !== null}
        onClose={() => setRemoving(null)}
        onConfirm={() => removing && remove.mutate(removing)}
        title={`Remove ${removing?.name ?? "the script"}?`}
        confirmLabel="Remove script"
        busy={remove.isPending}
        testid="custom-script-remove-dialog"
      >
        <p>The portal stops loading it from the next page load. Add it again to bring it back.</p>
        {remove.isError ? <ErrorState error={remove.error} /> : null}
      </ConfirmDialog>

      <form onSubmit={submit} noValidate data-testid="custom-script-form">
        <h3>Add a script</h3>
        {(
          [
            ["name", "Name", "text", "Analytics"],
            ["src", "Script address (https://…)", "url", "https://plausible.io/js/script.js"],
          ] as const
        ).map(([key, label, type, example]) => (
          <div key={key}>
            <label htmlFor={`${ids}-${key}`}>{label}</label>
            <input
              id={`${ids}-${key}`}
              type={type}
              value={draft[key]}
              placeholder={example}
              onChange={(e) => set(key)(e.target.value)}
              aria-invalid={Boolean(err(key))}
              aria-describedby={`${ids}-${key}-error`}
              data-testid={`custom-script-${key}`}
            />
            <p id={`${ids}-${key}-error`} className="error-text" data-testid={`custom-script-${key}-error`}>
              {err(key) ?? ""}
            </p>
          </div>
        ))}
        <label htmlFor={`${ids}-placement`}>Where</label>
        <select
          id={`${ids}-placement`}
          value={draft.placement}
          onChange={(e) => set("placement")(e.target.value as Draft["placement"])}
          data-testid="custom-script-placement"
        >
          <option value="head">In the page&apos;s head (loaded asynchronously)</option>
          <option value="body_end">At the end of the page</option>
        </select>
        <label htmlFor={`${ids}-connect`}>
          Other origins it sends to (optional, one per line, https://host)
        </label>
        <textarea
          id={`${ids}-connect`}
          rows={2}
          value={draft.connect_origins}
          onChange={(e) => set("connect_origins")(e.target.value)}
          aria-invalid={Boolean(err("connect_origins"))}
          aria-describedby={`${ids}-connect-error`}
          data-testid="custom-script-connect-origins"
        />
        <p
          id={`${ids}-connect-error`}
          className="error-text"
          data-testid="custom-script-connect-origins-error"
        >
          {err("connect_origins") ?? ""}
        </p>
        <label htmlFor={`${ids}-integrity`}>Integrity (optional, sha384-…)</label>
        <input
          id={`${ids}-integrity`}
          type="text"
          value={draft.integrity}
          onChange={(e) => set("integrity")(e.target.value)}
          aria-invalid={Boolean(err("integrity"))}
          aria-describedby={`${ids}-integrity-error`}
          data-testid="custom-script-integrity"
        />
        <p id={`${ids}-integrity-error`} className="error-text" data-testid="custom-script-integrity-error">
          {err("integrity") ?? ""}
        </p>
        <Checkbox checked={draft.enabled} onChange={set("enabled")} testid="custom-script-enable">
          Load it on the portal now
        </Checkbox>
        <button type="submit" className="primary" disabled={add.isPending} data-testid="custom-script-add">
          Add script
        </button>
        {add.isError && !claimed ? <ErrorState error={add.error} /> : null}
        {add.isError && claimed ? (
          <p className="error-text" role="alert" data-testid="custom-script-fields-error">
            Nothing was added: correct the fields marked above.
          </p>
        ) : null}
      </form>
    </section>
  );
}
