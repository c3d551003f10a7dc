import { useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useState } from "react";
import {
  type Balance,
  fileTaxForm,
  moneyWords,
  type Payee,
  type PayoutMethod,
  requestPayout,
  setPayoutMethod,
  type TaxFormKind,
} from "../../api/money.ts";
import {
  confirmSecondFactor,
  hasSecondFactor,
  PlainError,
  startSecondFactor,
  verifySecondFactor,
} from "../../api/portal.ts";
import { errorFor, Field, FormError, Notice, SelectField } from "../../ui.tsx";
import { amount, TAX_STATUS_WORDS } from "./format.ts";

const FORMS: readonly (readonly [TaxFormKind, string])[] = [
  ["W-9", "W-9: a US person or company"],
  ["W-8BEN", "W-8BEN: a person outside the US"],
  ["W-8BEN-E", "W-8BEN-E: a company outside the US"],
];

/** Refreshes everything the money page shows after a change. */
function useRefresh() {
  const client = useQueryClient();
  return () => client.invalidateQueries({ queryKey: ["money"] });
}

/** The payee's tax form: its state (the tax id only by its last four), and a form to file one. */
function TaxForm({ payee }: { payee: Payee }) {
  const refresh = useRefresh();
  const tax = payee.tax;
  const [open, setOpen] = useState(tax.status === "missing" || tax.status === "rejected");
  const [form, setForm] = useState<TaxFormKind>(tax.form ?? "W-9");
  const [name, setName] = useState(payee.name ?? "");
  const [country, setCountry] = useState(tax.country ?? "");
  const [taxId, setTaxId] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [done, setDone] = useState(false);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setError(null);
    setDone(false);
    const c = (form === "W-9" && !country.trim() ? "US" : country).trim().toUpperCase();
    const problems: Record<string, string> = {};
    if (!name.trim()) problems.name = "Enter the name on the form: yours, or your company's.";
    if (!/^[A-Z]{2}$/.test(c))
      problems.country = "Enter the country as its two-letter code, such as US, GB or BR.";
    if (taxId.trim().length < 4) problems.tax_id = "Enter your tax id: at least 4 characters.";
    if (Object.keys(problems).length > 0) {
      setError(
        new PlainError("Some fields need a change: see the messages beside them.", { fields: problems }),
      );
      return;
    }
    setBusy(true);
    try {
      await fileTaxForm(payee.id, { form, name: name.trim(), country: c, tax_id: taxId.trim() });
      setTaxId("");
      await refresh();
      setOpen(false);
      setDone(true);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const id = `tax-${payee.id}`;
  return (
    <section className="money-step" aria-labelledby={`${id}-heading`} data-testid="tax-form">
      <h3 id={`${id}-heading`}>Tax form</h3>
      <p data-testid="tax-status" data-status={tax.status}>
        {TAX_STATUS_WORDS[tax.status] ?? tax.status}
        {tax.form ? (
          <>
            {" "}
            · {tax.form}
            {tax.country ? `, ${tax.country}` : ""}
            {tax.tax_id_last4 ? (
              <>
                , tax id ending <span data-testid="tax-last4">{tax.tax_id_last4}</span>
              </>
            ) : null}
          </>
        ) : null}
        {tax.status === "verified" && tax.withholding_rate !== "0" ? (
          <> · {tax.withholding_rate}% is withheld from each payout</>
        ) : null}
      </p>
      {done ? (
        <Notice testid="tax-filed">
          <p>Your form was sent. It is checked before your first payout; your tax id is kept sealed.</p>
        </Notice>
      ) : null}
      {open ? (
        <form className="form" onSubmit={submit} noValidate aria-label="Tax form">
          <SelectField
            label="Form"
            options={FORMS}
            value={form}
            onChange={(e) => setForm(e.target.value as TaxFormKind)}
            error={errorFor(error, "form")}
            testid="tax-kind"
          />
          <Field
            label="Name on the form"
            autoComplete="name"
            value={name}
            onChange={(e) => setName(e.target.value)}
            error={errorFor(error, "name")}
            testid="tax-name"
          />
          <Field
            label="Country"
            hint="Two letters, such as US, GB or BR: where you (or your company) pay tax."
            autoComplete="country"
            maxLength={2}
            value={country}
            onChange={(e) => setCountry(e.target.value.toUpperCase())}
            error={errorFor(error, "country")}
            testid="tax-country"
          />
          <Field
            label="Tax id"
            hint="SSN, EIN or ITIN for a W-9; your country's tax number for a W-8. It is kept sealed: only its last four characters are ever shown."
            autoComplete="off"
            spellCheck={false}
            value={taxId}
            onChange={(e) => setTaxId(e.target.value)}
            error={errorFor(error, "tax_id")}
            testid="tax-id"
          />
          <FormError error={error} testid="tax-error" shown={["form", "name", "country", "tax_id"]} />
          <div className="buttons">
            <button type="submit" disabled={busy} data-testid="tax-submit">
              Send the tax form
            </button>
            {tax.status !== "missing" && tax.status !== "rejected" ? (
              <button type="button" className="secondary" onClick={() => setOpen(false)}>
                Cancel
              </button>
            ) : null}
          </div>
        </form>
      ) : (
        <button type="button" className="secondary" onClick={() => setOpen(true)} data-testid="tax-new">
          File a new tax form
        </button>
      )}
    </section>
  );
}

/** Where the payee is paid: PayPal, or a bank account through Wise (the details its currency needs). */
function Method({ payee }: { payee: Payee }) {
  const refresh = useRefresh();
  const current = payee.payout_method;
  const [open, setOpen] = useState(current === null);
  const [provider, setProvider] = useState<"paypal" | "wise">(current?.provider ?? "paypal");
  const [v, setV] = useState<Record<string, string>>({
    receiver: current?.provider === "paypal" ? current.receiver : (payee.email ?? ""),
    name: payee.name ?? "",
    email: payee.email ?? "",
    receiver_type: "PERSON",
    account_type: "CHECKING",
  });
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [saved, setSaved] = useState(false);
  const set = (k: string) => (e: { target: { value: string } }) =>
    setV((o) => ({ ...o, [k]: e.target.value }));
  const cur = payee.currency;
  const bank: "usd" | "gbp" | "iban" = cur === "USD" ? "usd" : cur === "GBP" ? "gbp" : "iban";
  const methodOf = (): PayoutMethod => {
    const t = (k: string) => (v[k] ?? "").trim();
    if (provider === "paypal") return { provider: "paypal", receiver: t("receiver") };
    const base = {
      provider: "wise" as const,
      name: t("name"),
      email: t("email"),
      receiver_type: (t("receiver_type") || "PERSON") as "PERSON" | "BUSINESS",
    };
    if (bank === "gbp")
      return {
        ...base,
        sort_code: t("sort_code").replace(/[\s-]/g, ""),
        account_number: t("account_number"),
      };
    if (bank === "usd")
      return {
        ...base,
        routing_number: t("routing_number"),
        account_number: t("account_number"),
        account_type: (t("account_type") || "CHECKING") as "CHECKING" | "SAVINGS",
        address: {
          country: t("country").toUpperCase(),
          city: t("city"),
          post_code: t("post_code"),
          first_line: t("first_line"),
          ...(t("state") ? { state: t("state") } : {}),
        },
      };
    return { ...base, iban: t("iban"), ...(t("bic") ? { bic: t("bic") } : {}) };
  };
  const save = async (e: FormEvent) => {
    e.preventDefault();
    setError(null);
    setSaved(false);
    setBusy(true);
    try {
      await setPayoutMethod(payee.id, methodOf());
      await refresh();
      setOpen(false);
      setSaved(true);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const err = (k: string) => errorFor(error, `method.${k}`) ?? errorFor(error, `method.address.${k}`);
  const field = (k: string, label: string, extra: Record<string, unknown> = {}) => (
    <Field
      label={label}
      value={v[k] ?? ""}
      onChange={set(k)}
      error={err(k)}
      testid={`method-${k.replace(/_/g, "-")}`}
      {...extra}
    />
  );
  const shown = [
    "method",
    "method.provider",
    ...["receiver", "name", "email", "receiver_type", "iban", "bic", "account_number", "sort_code"].map(
      (k) => `method.${k}`,
    ),
    ...["routing_number", "account_type"].map((k) => `method.${k}`),
    ...["country", "city", "post_code", "first_line", "state"].map((k) => `method.address.${k}`),
  ];
  return (
    <section
      className="money-step"
      aria-labelledby={`method-${payee.id}-heading`}
      data-testid="payout-method"
    >
      <h3 id={`method-${payee.id}-heading`}>Where to send the money</h3>
      <p data-testid="payout-method-current">
        {current === null
          ? "Not said yet."
          : current.provider === "paypal"
            ? `PayPal: ${current.receiver}`
            : `Bank account through Wise: ${current.name}${current.iban ? `, IBAN ending ${current.iban.replace(/\s/g, "").slice(-4)}` : current.account_number ? `, account ending ${current.account_number.slice(-4)}` : ""}`}
      </p>
      {saved ? (
        <Notice testid="method-saved">
          <p>Saved: your next payout goes there.</p>
        </Notice>
      ) : null}
      {open ? (
        <form className="form" onSubmit={save} noValidate aria-label="Payout method">
          <SelectField
            label="Paid through"
            options={[
              ["paypal", "PayPal"],
              ["wise", `A bank account (Wise, in ${cur})`],
            ]}
            value={provider}
            onChange={(e) => setProvider(e.target.value as "paypal" | "wise")}
            testid="method-provider"
          />
          {provider === "paypal" ? (
            field("receiver", "PayPal e-mail address", {
              type: "email",
              autoComplete: "email",
              hint: "Or a US mobile number, such as +14155550123.",
            })
          ) : (
            <>
              {field("name", "Account holder's name", { autoComplete: "name" })}
              {field("email", "Account holder's e-mail", { type: "email", autoComplete: "email" })}
              <SelectField
                label="The account holder is"
                options={[
                  ["PERSON", "A person"],
                  ["BUSINESS", "A company"],
                ]}
                value={v.receiver_type}
                onChange={set("receiver_type")}
                error={err("receiver_type")}
                testid="method-receiver-type"
              />
              {bank === "iban" ? (
                <>
                  {field("iban", "IBAN", { spellCheck: false, hint: "Spaces are fine." })}
                  {field("bic", "BIC (SWIFT code), if your bank gave you one", { spellCheck: false })}
                </>
              ) : null}
              {bank === "gbp" ? (
                <>
                  {field("sort_code", "Sort code", { inputMode: "numeric", hint: "Six digits." })}
                  {field("account_number", "Account number", { inputMode: "numeric" })}
                </>
              ) : null}
              {bank === "usd" ? (
                <>
                  {field("routing_number", "Routing number (ABA)", {
                    inputMode: "numeric",
                    hint: "Nine digits.",
                  })}
                  {field("account_number", "Account number", { inputMode: "numeric" })}
                  <SelectField
                    label="Account type"
                    options={[
                      ["CHECKING", "Checking"],
                      ["SAVINGS", "Savings"],
                    ]}
                    value={v.account_type}
                    onChange={set("account_type")}
                    error={err("account_type")}
                    testid="method-account-type"
                  />
                  {field("first_line", "Address", { autoComplete: "address-line1" })}
                  {field("city", "City", { autoComplete: "address-level2" })}
                  {field("state", "State", { autoComplete: "address-level1" })}
                  {field("post_code", "ZIP or post code", { autoComplete: "postal-code" })}
                  {field("country", "Country (two letters, such as US)", {
                    autoComplete: "country",
                    maxLength: 2,
                  })}
                </>
              ) : null}
            </>
          )}
          <FormError error={error} testid="method-error" shown={shown} />
          <div className="buttons">
            <button type="submit" disabled={busy} data-testid="method-save">
              Save where to send it
            </button>
            {current !== null ? (
              <button type="button" className="secondary" onClick={() => setOpen(false)}>
                Cancel
              </button>
            ) : null}
          </div>
        </form>
      ) : (
        <button type="button" className="secondary" onClick={() => setOpen(true)} data-testid="method-change">
          Change where to send it
        </button>
      )}
    </section>
  );
}

/**
 * Asking to be paid the available balance: the API's refusal in words beside the button. Where a
 * second factor is needed, the authenticator's code (as the sign-in's second step asks it), or,
 * for a person without an authenticator app, setting one up (its QR code and key, then its first
 * code); then the same request again.
 */
function RequestPayout({ payee, balance }: { payee: Payee; balance: Balance | undefined }) {
  const refresh = useRefresh();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [asked, setAsked] = useState<string | null>(null);
  const [mfa, setMfa] = useState<null | "verify" | "setup">(null);
  const [setup, setSetup] = useState<{ factorId: string; qr: string; secret: string } | null>(null);
  const [code, setCode] = useState("");
  const [codeError, setCodeError] = useState<unknown>(null);
  const ask = async () => {
    setError(null);
    setAsked(null);
    setBusy(true);
    try {
      const p = await requestPayout(payee.id);
      setAsked(
        `${amount(p.amount, p.currency)}${p.withholding !== "0" && !/^0\.?0*$/.test(p.withholding) ? ` (${amount(p.withholding, p.currency)} withheld for tax, ${amount(p.net_amount, p.currency)} sent)` : ""}`,
      );
      setMfa(null);
      await refresh();
    } catch (err) {
      if (err instanceof PlainError && err.code === "aal2_required") {
        setMfa(
          await hasSecondFactor()
            .then((has) => (has ? "verify" : "setup"))
            .catch(() => "verify" as const),
        );
      } else setMfa(null);
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const begin = async () => {
    setCodeError(null);
    setBusy(true);
    try {
      setSetup(await startSecondFactor());
    } catch (err) {
      setCodeError(err);
    } finally {
      setBusy(false);
    }
  };
  const verify = async (e: FormEvent) => {
    e.preventDefault();
    setCodeError(null);
    setBusy(true);
    try {
      if (mfa === "setup" && setup) await confirmSecondFactor(setup.factorId, code);
      else await verifySecondFactor(code);
      setCode("");
      setSetup(null);
    } catch (err) {
      setCodeError(err);
      setBusy(false);
      return;
    }
    setBusy(false);
    await ask();
  };
  const words = !error
    ? null
    : mfa === "setup"
      ? "Asking to be paid needs a second step: an authenticator app on your phone. Set one up below, then enter its code."
      : (moneyWords(error, payee) ?? errorFor(error, undefined) ?? "That did not work. Try again.");
  const available = balance?.available ?? "0";
  const describedBy = words ? `payout-${payee.id}-error` : undefined;
  const codeForm = mfa === "verify" || (mfa === "setup" && setup !== null);
  return (
    <section
      className="money-step"
      aria-labelledby={`payout-${payee.id}-heading`}
      data-testid="payout-request-box"
    >
      <h3 id={`payout-${payee.id}-heading`}>Ask to be paid</h3>
      <p>
        Available: <strong data-testid="payout-available">{amount(available, payee.currency)}</strong>. A
        payout is the available balance, rounded down to the cent; what is left over stays for the next one.
      </p>
      <div className="buttons">
        <button
          type="button"
          onClick={ask}
          disabled={busy}
          aria-describedby={describedBy}
          data-testid="payout-request"
        >
          Ask to be paid {amount(available, payee.currency)}
        </button>
      </div>
      {words ? (
        <p className="field-error" role="alert" id={describedBy} data-testid="payout-request-error">
          {words}
        </p>
      ) : null}
      {mfa === "setup" && !setup ? (
        <div data-testid="mfa-setup-offer">
          <p className="hint">
            An authenticator app (such as Google Authenticator, Microsoft Authenticator, 1Password or Aegis)
            shows a new six-digit code every 30 seconds; you will be asked for one before each payout.
          </p>
          <button type="button" disabled={busy} onClick={begin} data-testid="mfa-setup-start">
            Set up an authenticator app
          </button>
          <FormError error={codeError} testid="mfa-setup-error" />
        </div>
      ) : null}
      {mfa === "setup" && setup ? (
        <div className="mfa-setup" data-testid="mfa-setup">
          <p>Scan this code with your authenticator app, or type the key below into it.</p>
          <img
            src={setup.qr}
            alt="QR code to scan with your authenticator app"
            width={180}
            height={180}
            data-testid="mfa-setup-qr"
          />
          <p>
            Key: <code data-testid="mfa-setup-secret">{setup.secret}</code>
          </p>
        </div>
      ) : null}
      {codeForm ? (
        <form
          className="form inline-form"
          onSubmit={verify}
          noValidate
          aria-label="Confirm with your authenticator"
        >
          <Field
            label="Code from your authenticator app"
            inputMode="numeric"
            autoComplete="one-time-code"
            value={code}
            onChange={(e) => setCode(e.target.value)}
            error={errorFor(codeError, "code")}
            testid="payout-mfa-code"
          />
          <FormError error={codeError} testid="payout-mfa-error" />
          <button type="submit" disabled={busy} data-testid="payout-mfa-verify">
            Confirm and ask to be paid
          </button>
        </form>
      ) : null}
      {asked ? (
        <Notice testid="payout-requested">
          <p>Asked: {asked}. You will see here when it is paid.</p>
        </Notice>
      ) : null}
    </section>
  );
}

/** Getting paid for one payee: the tax form, where to send the money, and asking for it. */
export function GettingPaid({ payee, balance }: { payee: Payee; balance: Balance | undefined }) {
  return (
    <div className="getting-paid" data-testid="getting-paid">
      <RequestPayout payee={payee} balance={balance} />
      <TaxForm payee={payee} />
      <Method payee={payee} />
    </div>
  );
}
