/**
 * The element id of the control for a public API param (`release_date`, `tracks[0].audio`), so
 * that the completeness list links each problem to its field.
 */
export function fieldId(param: string): string {
  return `f-${param.replace(/[^a-z0-9]+/gi, "-").replace(/-+$/, "")}`;
}

/** Moves to a field and puts the cursor in it (a details element around it is opened). */
export function goToField(param: string): void {
  const target =
    document.getElementById(fieldId(param)) ??
    // tracks[2].splits and the like: the track's own block when the field itself is not shown.
    document.getElementById(fieldId(param.replace(/\.[a-z_]+$/, ""))) ??
    document.getElementById(fieldId(param.replace(/\[\d+\].*$/, "")));
  if (!target) return;
  const details = target.closest("details");
  if (details) details.open = true;
  target.scrollIntoView({ block: "center" });
  target.focus({ preventScroll: true });
}
