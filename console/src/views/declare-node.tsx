import { useState } from 'preact/hooks';
import { describeError } from '../api.js';
import { useSession } from '../context.js';

/** "web, eu" as groups; blanks dropped (the API says what a bad name is). */
const groupsOf = (text: string): string[] =>
  text
    .split(/[,\s]+/)
    .map((g) => g.trim())
    .filter(Boolean);

/** One `key=value` a line as attributes; a line without `=` is refused here, before the API sees it. */
function attributesOf(text: string): Record<string, string> | string {
  const attributes: Record<string, string> = {};
  for (const line of text.split('\n').map((l) => l.trim())) {
    if (!line) continue;
    const at = line.indexOf('=');
    if (at <= 0) return `attribute "${line}" is not key=value`;
    attributes[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  return attributes;
}

/** An admin declares a node (or replaces a declared one's groups and attributes). */
export function DeclareNodeForm({ onDeclared }: { onDeclared: () => void }) {
  const { api } = useSession();
  const [id, setId] = useState('');
  const [groups, setGroups] = useState('');
  const [attributes, setAttributes] = useState('');
  const [busy, setBusy] = useState(false);
  const [message, setMessage] = useState<{ text: string; ok: boolean }>();

  const submit = async (event: Event) => {
    event.preventDefault();
    const parsed = attributesOf(attributes);
    if (typeof parsed === 'string') {
      setMessage({ text: parsed, ok: false });
      return;
    }
    setBusy(true);
    setMessage(undefined);
    try {
      await api.declareNode(id.trim(), groupsOf(groups), parsed);
      setMessage({ text: `Declared ${id.trim()}.`, ok: true });
      setId('');
      setGroups('');
      setAttributes('');
      onDeclared();
    } catch (failure) {
      setMessage({ text: describeError(failure), ok: false });
    } finally {
      setBusy(false);
    }
  };

  return (
    <details class="declare">
      <summary>Declare a node</summary>
      <form class="decide" onSubmit={submit} aria-label="Declare a node">
        <label>
          Node id
          <input required value={id} placeholder="db-01" onInput={(e) => setId(e.currentTarget.value)} />
        </label>
        <label>
          Groups (comma separated)
          <input value={groups} placeholder="db, eu" onInput={(e) => setGroups(e.currentTarget.value)} />
        </label>
        <label>
          Attributes (one key=value a line)
          <textarea
            rows={3}
            value={attributes}
            placeholder="host=10.0.0.7"
            onInput={(e) => setAttributes(e.currentTarget.value)}
          />
        </label>
        <div class="row">
          <button type="submit" class="primary" disabled={busy}>
            Declare
          </button>
          {message && (
            <span role={message.ok ? 'status' : 'alert'} class={message.ok ? 'ok' : 'error'}>
              {message.text}
            </span>
          )}
        </div>
      </form>
    </details>
  );
}
