import { type ReactNode, useEffect, useRef } from "react";

/** A modal <dialog>: focus moves into it, Escape closes it, focus returns where it was. */
export function Dialog({
  open,
  onClose,
  title,
  testid,
  children,
}: {
  open: boolean;
  onClose: () => void;
  title: string;
  testid: string;
  children: ReactNode;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const dialog = ref.current;
    if (!dialog) return;
    if (open && !dialog.open) dialog.showModal();
    if (!open && dialog.open) dialog.close();
  }, [open]);
  return (
    <dialog ref={ref} onClose={onClose} aria-labelledby={`${testid}-title`} data-testid={testid}>
      <h2 id={`${testid}-title`}>{title}</h2>
      {open ? children : null}
    </dialog>
  );
}
