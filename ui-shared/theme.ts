import { accents } from "./brand-colours.ts";

/** Sets a tenant's primary colour, made readable (brand-colours.ts), as the page's accent. */
export function applyBrand(primary: string | null | undefined): void {
  const { light, dark } = accents(primary);
  const root = document.documentElement.style;
  root.setProperty("--brand-light", light);
  root.setProperty("--brand-dark", dark);
}
