import { useState } from "react";

/** A secret shown once: selectable, with a copy button, and plain words that it will not be shown again. */
export function SecretOnce({
  label,
  secret,
  testid,
  onDone,
}: {
  label: string;
  secret: string;
  testid: string;
  onDone: () => void;
}) {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(secret);
      setCopied(true);
    } catch {
      // No clipboard (an insecure origin, a refusal): the text stays selectable.
      setCopied(false);
    }
  };
  return (
    <div className="secret" role="status" data-testid={testid}>
      <p>
        <strong>{label}</strong> Copy it now and keep it somewhere safe: it is not shown again, not even to
        you.
      </p>
      <code className="secret-value" data-testid={`${testid}-value`}>
        {secret}
      </code>
      <div className="buttons">
        <button type="button" className="secondary" onClick={copy}>
          {copied ? "Copied" : "Copy"}
        </button>
        <button type="button" className="secondary" onClick={onDone} data-testid={`${testid}-done`}>
          I have stored it
        </button>
      </div>
    </div>
  );
}
