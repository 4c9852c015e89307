import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { describeError } from '../api.js';

export interface ActionButtonProps {
  /** The button's words. */
  readonly label: string;
  /** What the confirmation dialog asks. */
  readonly question: string;
  readonly confirmLabel?: string;
  readonly danger?: boolean;
  /** Does the action; a thrown API error is shown in the API's words. */
  readonly run: () => Promise<unknown>;
  readonly onDone?: () => void;
  readonly children?: ComponentChildren;
}

/** A button whose action asks first, in a modal dialog, and shows the API's error if it fails. */
export function ActionButton(props: ActionButtonProps) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [open, setOpen] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string>();
  useEffect(() => {
    if (open) dialog.current?.showModal();
    else dialog.current?.close();
  }, [open]);
  const confirm = async () => {
    setBusy(true);
    setError(undefined);
    try {
      await props.run();
      setOpen(false);
      props.onDone?.();
    } catch (failure) {
      setError(describeError(failure));
    } finally {
      setBusy(false);
    }
  };
  const id = `confirm-${props.label.toLowerCase().replace(/[^a-z0-9]+/g, '-')}`;
  return (
    <>
      <button type="button" class={props.danger ? 'danger' : ''} onClick={() => setOpen(true)}>
        {props.label}
      </button>
      <dialog ref={dialog} aria-labelledby={`${id}-title`} onClose={() => setOpen(false)}>
        <h2 id={`${id}-title`}>{props.label}</h2>
        <p>{props.question}</p>
        {props.children}
        {error && (
          <p role="alert" class="error">
            {error}
          </p>
        )}
        <div class="row">
          <button type="button" class={props.danger ? 'danger' : 'primary'} disabled={busy} onClick={confirm}>
            {props.confirmLabel ?? `Yes, ${props.label.toLowerCase()}`}
          </button>
          <button type="button" onClick={() => setOpen(false)}>
            Keep it
          </button>
        </div>
      </dialog>
    </>
  );
}
