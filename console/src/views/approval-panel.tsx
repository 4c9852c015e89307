import { useState } from 'preact/hooks';
import { describeError, type RunDetail } from '../api.js';
import { CAN_APPROVE, hasRole } from '../auth/session.js';
import { useSession } from '../context.js';

/** The open gate of a run: what it asks, quorum progress, and approve / reject with notes for who may. */
export function ApprovalPanel({ run, onDecided }: { run: RunDetail; onDecided?: () => void }) {
  const { api, identity } = useSession();
  const [notes, setNotes] = useState('');
  const [busy, setBusy] = useState(false);
  const [message, setMessage] = useState<{ text: string; error: boolean }>();
  const open = run.approvals
    .filter((a) => a.status === 'requested' || a.status === 'escalated')
    .sort((a, b) => b.requestedAt.localeCompare(a.requestedAt))[0];
  if (!open) return null;
  const approvals = open.decisions.filter((d) => d.decision === 'approve').length;
  const mine = open.decisions.find((d) => d.approver === identity.sub);
  const requester = run.requestedBy === identity.sub;
  const canDecide = hasRole(identity, CAN_APPROVE);
  const decide = async (decision: 'approve' | 'reject') => {
    setBusy(true);
    setMessage(undefined);
    try {
      await api.decide(run.runId, open.approvalId, decision, notes);
      setNotes('');
      setMessage({ text: decision === 'approve' ? 'Approval recorded.' : 'Rejection recorded.', error: false });
      onDecided?.();
    } catch (error) {
      setMessage({ text: describeError(error), error: true });
    } finally {
      setBusy(false);
    }
  };
  const notesId = `notes-${open.approvalId}`;
  return (
    <section class="approval" aria-label={`Approval for step ${open.stepId}`}>
      <p>
        <strong>Step {open.stepId}</strong> asks to {open.proposedAction} ({open.blastRadius} blast radius):{' '}
        {open.reason}
      </p>
      <p>
        <span class="quorum" data-testid="quorum">
          {approvals} of {open.requiredApprovals} approvals
        </span>
        <progress max={open.requiredApprovals} value={approvals} aria-label="Quorum progress" />
        {open.decisions.length > 0 && (
          <span class="muted"> · {open.decisions.map((d) => `${d.approver} ${d.decision}d`).join(', ')}</span>
        )}
      </p>
      {!canDecide ? (
        <p class="note">Deciding approvals needs the approver or admin role; you are {identity.roles.join(', ')}.</p>
      ) : requester ? (
        <p class="note" data-testid="requester-note">
          You requested this run, so you cannot approve it: another person must decide (two-person rule).
        </p>
      ) : mine ? (
        <p class="note">You have decided ({mine.decision}); the gate waits for other approvers.</p>
      ) : (
        <div class="decide">
          <label for={notesId}>Notes (optional)</label>
          <textarea
            id={notesId}
            rows={2}
            maxLength={2000}
            value={notes}
            onInput={(e) => setNotes(e.currentTarget.value)}
          />
          <div class="row">
            <button type="button" class="primary" disabled={busy} onClick={() => decide('approve')}>
              Approve
            </button>
            <button type="button" class="danger" disabled={busy} onClick={() => decide('reject')}>
              Reject
            </button>
          </div>
        </div>
      )}
      {message && (
        <p role={message.error ? 'alert' : 'status'} class={message.error ? 'error' : 'ok'}>
          {message.text}
        </p>
      )}
    </section>
  );
}
