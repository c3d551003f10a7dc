/**
 * Every e-mail sent for a tenant carries its branding (docs/portal.md, "Branding"): the sender's
 * name is the tenant's display name, the HTML part opens with its logo (or its name) in its
 * primary colour and shows the message's links as buttons in that colour, and both parts end with
 * the support address. Messages are queued as plain text by the code that sends them; the brand is
 * put on when the message leaves (`Mailer.deliver`), from the branding saved at that moment, so a
 * change in the console's settings reaches the next mail without touching any sender.
 */

export interface MailBrand {
  display_name: string | null;
  logo_url: string | null;
  primary_color: string | null;
  support_email: string | null;
}

export interface BrandedMail {
  /** The sender's display name (the address stays MAIL_FROM's). */
  fromName: string | undefined;
  text: string;
  html: string;
}

/** What a plain message becomes for `brand`; without a tenant's branding only the text is kept. */
export function brandMessage(message: { subject: string; text: string }, brand: MailBrand): BrandedMail {
  const name = brand.display_name?.trim() || undefined;
  const color = /^#[0-9a-f]{6}$/i.test(brand.primary_color ?? "")
    ? (brand.primary_color as string)
    : "#1f4fd1";
  const footer = footerLines(name, brand.support_email);
  const text = footer.length > 0 ? `${message.text}\n\n-- \n${footer.join("\n")}` : message.text;
  return { fromName: name, text, html: htmlOf(message, brand, name, color, footer.length > 0) };
}

function footerLines(name: string | undefined, support: string | null): string[] {
  const lines: string[] = [];
  if (name) lines.push(name);
  if (support) lines.push(`Questions? Write to ${support}`);
  return lines;
}

const URL_PATTERN = /https?:\/\/[^\s<>"]+/g;

export function escapeHtml(value: string): string {
  return value
    .replaceAll("&", "&amp;")
    .replaceAll("<", "&lt;")
    .replaceAll(">", "&gt;")
    .replaceAll('"', "&quot;")
    .replaceAll("'", "&#39;");
}

/** White or near-black text, whichever reads better on the colour (WCAG's relative luminance). */
function textOn(color: string): string {
  const n = Number.parseInt(color.slice(1), 16);
  const lin = (v: number) => {
    const s = v / 255;
    return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
  };
  const l = 0.2126 * lin((n >> 16) & 255) + 0.7152 * lin((n >> 8) & 255) + 0.0722 * lin(n & 255);
  return 1.05 / (l + 0.05) >= (l + 0.05) / 0.05 ? "#ffffff" : "#111111";
}

/**
 * A line that is only a link, or a label and a link ("Open this link: https://…"), becomes a
 * button; links inside other text become plain links. Everything else is escaped text.
 */
function lineHtml(line: string, color: string): string {
  const lone = /^(?:([^:]{1,60}):\s+)?(https?:\/\/\S+)$/.exec(line.trim());
  if (lone?.[2]) {
    const href = escapeHtml(lone[2]);
    const label = escapeHtml(lone[1] ?? "Open the link");
    return `<p style="margin:24px 0"><a href="${href}" style="background:${color};color:${textOn(color)};padding:12px 20px;border-radius:6px;text-decoration:none;font-weight:600;display:inline-block">${label}</a></p>
<p style="margin:0 0 16px;font-size:12px;color:#555">Or paste this address into your browser: <span style="word-break:break-all">${href}</span></p>`;
  }
  let out = "";
  let last = 0;
  for (const m of line.matchAll(URL_PATTERN)) {
    out += escapeHtml(line.slice(last, m.index));
    const href = escapeHtml(m[0]);
    out += `<a href="${href}" style="color:${color}">${href}</a>`;
    last = (m.index ?? 0) + m[0].length;
  }
  return out + escapeHtml(line.slice(last));
}

function htmlOf(
  message: { subject: string; text: string },
  brand: MailBrand,
  name: string | undefined,
  color: string,
  withFooter: boolean,
): string {
  const paragraphs = message.text
    .split(/\n{2,}/)
    .map((block) => block.split("\n").map((l) => lineHtml(l, color)))
    .map((lines) =>
      lines.length === 1 && lines[0]?.startsWith("<p ")
        ? lines[0]
        : `<p style="margin:0 0 16px">${lines.join("<br>")}</p>`,
    )
    .join("\n");
  const logo =
    brand.logo_url && /^https?:\/\//.test(brand.logo_url)
      ? `<img src="${escapeHtml(brand.logo_url)}" alt="${escapeHtml(name ?? "")}" height="40" style="height:40px;max-width:240px;border:0">`
      : name
        ? `<span style="font-size:20px;font-weight:700;color:${color}">${escapeHtml(name)}</span>`
        : "";
  const footer = withFooter
    ? `<p style="margin:24px 0 0;font-size:12px;color:#555">${[
        name ? escapeHtml(name) : "",
        brand.support_email
          ? `Questions? Write to <a href="mailto:${escapeHtml(brand.support_email)}" style="color:${color}">${escapeHtml(brand.support_email)}</a>`
          : "",
      ]
        .filter(Boolean)
        .join("<br>")}</p>`
    : "";
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>${escapeHtml(message.subject)}</title></head>
<body style="margin:0;padding:0;background:#f6f7f9">
<div style="max-width:560px;margin:0 auto;padding:24px 16px;font-family:-apple-system,'Segoe UI',Roboto,Helvetica,Arial,sans-serif;font-size:15px;line-height:1.5;color:#111">
${logo ? `<div style="border-bottom:3px solid ${color};padding-bottom:12px;margin-bottom:20px">${logo}</div>` : ""}
${paragraphs}
${footer}
</div>
</body></html>`;
}
