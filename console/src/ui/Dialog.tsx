import { type ReactNode, useEffect, useRef } from "react";

/**
 * A modal <dialog>: focus moves into it, Escape closes it, focus returns where it was. Its body
 * scrolls while its title and `actions` (the buttons) stay in view, so on a short screen the
 * button that decides is never below the fold.
 */
export function Dialog({
  open,
  onClose,
  title,
  testid,
  actions,
  children,
}: {
  open: boolean;
  onClose: () => void;
  title: string;
  testid: string;
  /** The buttons, kept visible below the scrolling body. */
  actions?: ReactNode;
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
      <h2 id={`${testid}-title`} className="dialog-title">
        {title}
      </h2>
      <div className="dialog-body" data-testid={`${testid}-body`}>
        {open ? children : null}
      </div>
      {open && actions ? (
        <div className="dialog-actions" data-testid={`${testid}-actions`}>
          {actions}
        </div>
      ) : null}
    </dialog>
  );
}

/**
 * Asks before a destructive act: the title asks, the body says what will happen (and what cannot
 * be undone); the confirming button names the act. Cancel (or Escape) does nothing.
 */
export function ConfirmDialog({
  open,
  onClose,
  onConfirm,
  title,
  confirmLabel,
  busy = false,
  testid,
  children,
}: {
  open: boolean;
  onClose: () => void;
  onConfirm: () => void;
  title: string;
  confirmLabel: string;
  busy?: boolean;
  testid: string;
  children: ReactNode;
}) {
  return (
    <Dialog
      open={open}
      onClose={onClose}
      title={title}
      testid={testid}
      actions={
        <>
          <button
            type="button"
            className="reject"
            onClick={onConfirm}
            disabled={busy}
            data-testid={`${testid}-confirm`}
          >
            {confirmLabel}
          </button>
          {/* biome-ignore lint/a11y/noAutofocus: the safe choice has the focus, so Enter cancels */}
          <button type="button" autoFocus onClick={onClose} data-testid={`${testid}-cancel`}>
            Cancel
          </button>
        </>
      }
    >
      {children}
    </Dialog>
  );
}
