/**
 * A tenant's primary colour as the portal's and the console's accent, kept readable: buttons carry white text on
 * it and links are drawn in it on a light page, so on a light page it is darkened (same hue)
 * until white on it reaches WCAG AA's 4.5:1; on a dark page it is lightened until it reaches
 * 4.5:1 against the page, with near-black text on it. Set as CSS custom properties through the
 * CSSOM by theme.ts (allowed by the strict Content-Security-Policy, unlike a style element).
 * No DOM here: the colours are computed alone (and tested so).
 */

type Rgb = [number, number, number];

function parse(hex: string): Rgb | undefined {
  const m = /^#([0-9a-f]{6})$/i.exec(hex.trim());
  if (!m?.[1]) return undefined;
  const n = Number.parseInt(m[1], 16);
  return [(n >> 16) & 255, (n >> 8) & 255, n & 255];
}

const hex = (c: Rgb) => `#${c.map((v) => Math.round(v).toString(16).padStart(2, "0")).join("")}`;

function luminance([r, g, b]: Rgb): number {
  const lin = (v: number) => {
    const s = v / 255;
    return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
  };
  return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
}

export function contrast(a: Rgb, b: Rgb): number {
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x) as [number, number];
  return (hi + 0.05) / (lo + 0.05);
}

const mix = (c: Rgb, to: Rgb, t: number): Rgb => c.map((v, i) => v + ((to[i] as number) - v) * t) as Rgb;

/** The colour moved toward `to` in small steps until it has `ratio` against `against`. */
function until(c: Rgb, to: Rgb, against: Rgb, ratio: number): Rgb {
  for (let t = 0; t <= 1; t += 0.02) {
    const next = mix(c, to, t);
    if (contrast(next, against) >= ratio) return next;
  }
  return to;
}

const WHITE: Rgb = [255, 255, 255];
const BLACK: Rgb = [0, 0, 0];
const LIGHT_PAGE: Rgb = [0xf6, 0xf7, 0xf9];
const DARK_PAGE: Rgb = [0x12, 0x14, 0x17];

/** The accent colours for a brand colour (the default blue without one). */
export function accents(primary: string | null | undefined): { light: string; dark: string } {
  const base = parse(primary ?? "") ?? [0x1f, 0x4f, 0xd1];
  // White text on it, and it as text on the light page (the page is a little darker than white).
  const light = until(until(base, BLACK, WHITE, 4.6), BLACK, LIGHT_PAGE, 4.6);
  const dark = until(base, WHITE, DARK_PAGE, 4.6);
  return { light: hex(light), dark: hex(dark) };
}
