import { useEffect, useMemo, useState } from 'preact/hooks';
import { describeError, type NodeView } from '../api.js';
import { hasRole } from '../auth/session.js';
import { useSession } from '../context.js';
import { age } from '../format.js';
import { ActionButton } from './confirm.js';
import { DeclareNodeForm } from './declare-node.js';

/** One read of the whole list this often, and whenever the page comes back into view: never a request per row. */
const REFRESH_MS = 10_000;
/** The section of nodes that belong to no group. */
const UNGROUPED = '';

/** The nodes of each group, groups in name order; a node of two groups is in both. */
function byGroup(nodes: readonly NodeView[], only: string): Array<[string, NodeView[]]> {
  const groups = new Map<string, NodeView[]>();
  for (const node of nodes) {
    const names = node.groups.length > 0 ? node.groups : [UNGROUPED];
    for (const name of names.filter((g) => !only || g === only)) groups.set(name, [...(groups.get(name) ?? []), node]);
  }
  return [...groups].sort(([a], [b]) => (a === UNGROUPED ? 1 : b === UNGROUPED ? -1 : a.localeCompare(b)));
}

/** Inventory: the tenant's agent and declared nodes by group, with status and attributes; admins declare and remove. */
export function InventoryScreen() {
  const { api, identity } = useSession();
  const [group, setGroup] = useState('');
  const [nodes, setNodes] = useState<NodeView[]>();
  const [known, setKnown] = useState<string[]>([]);
  const [error, setError] = useState<string>();
  const [version, setVersion] = useState(0);

  useEffect(() => {
    let stale = false;
    const load = () =>
      api.inventory(group || undefined).then(
        (page) => {
          if (stale) return;
          setNodes(page.nodes);
          setError(undefined);
          // The filter offers every group seen, so choosing one does not empty the choice.
          setKnown((seen) => [...new Set([...seen, ...page.nodes.flatMap((n) => n.groups)])].sort());
        },
        (failure: unknown) => !stale && setError(describeError(failure)),
      );
    void load();
    const timer = setInterval(load, REFRESH_MS);
    const onVisible = () => document.visibilityState === 'visible' && void load();
    addEventListener('focus', onVisible);
    document.addEventListener('visibilitychange', onVisible);
    return () => {
      stale = true;
      clearInterval(timer);
      removeEventListener('focus', onVisible);
      document.removeEventListener('visibilitychange', onVisible);
    };
  }, [api, group, version]);

  const admin = hasRole(identity, ['admin']);
  const sections = useMemo(() => byGroup(nodes ?? [], group), [nodes, group]);
  const reload = () => setVersion((v) => v + 1);
  return (
    <section aria-labelledby="inventory-title">
      <h1 id="inventory-title">Inventory</h1>
      <p class="muted">
        Agent nodes register themselves from their workers and go offline when their heartbeats stop; declared nodes are
        hosts or services the profile's workers act on remotely.
      </p>
      <form class="filters" onSubmit={(e) => e.preventDefault()}>
        <label>
          Group
          <select value={group} onChange={(e) => setGroup(e.currentTarget.value)}>
            <option value="">every group</option>
            {known.map((g) => (
              <option value={g} key={g}>
                {g}
              </option>
            ))}
          </select>
        </label>
      </form>
      {admin && <DeclareNodeForm onDeclared={reload} />}
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      {nodes === undefined ? (
        <p aria-busy="true">Loading the inventory…</p>
      ) : sections.length === 0 ? (
        <p>{group ? `No node is in group ${group}.` : 'No node is in the inventory yet.'}</p>
      ) : (
        sections.map(([name, members]) => (
          <section key={name} class="group" data-group={name} aria-labelledby={`group-${name || 'none'}`}>
            <h2 id={`group-${name || 'none'}`}>
              {name ? `Group ${name}` : 'No group'}{' '}
              <span class="muted">
                {members.filter((n) => n.status === 'online').length} of {members.length} online
              </span>
            </h2>
            <div class="table-wrap">
              <table>
                <caption class="visually-hidden">Nodes of {name ? `group ${name}` : 'no group'}</caption>
                <thead>
                  <tr>
                    <th scope="col">Node</th>
                    <th scope="col">Status</th>
                    <th scope="col">Source</th>
                    <th scope="col">Last seen</th>
                    <th scope="col">Attributes</th>
                    {admin && (
                      <th scope="col">
                        <span class="visually-hidden">Actions</span>
                      </th>
                    )}
                  </tr>
                </thead>
                <tbody>
                  {members.map((node) => (
                    <tr key={node.id} data-node={node.id}>
                      <td data-label="Node">
                        {node.id}
                        {node.groups.length > 1 && (
                          <div class="muted">also in {node.groups.filter((g) => g !== name).join(', ')}</div>
                        )}
                      </td>
                      <td data-label="Status">
                        <span class={`badge node-${node.status}`}>{node.status}</span>
                      </td>
                      <td data-label="Source">{node.source}</td>
                      <td data-label="Last seen">
                        <time dateTime={node.lastSeen} title={node.lastSeen}>
                          {age(node.lastSeen)} ago
                        </time>
                      </td>
                      <td data-label="Attributes">
                        {Object.keys(node.attributes).length === 0 ? (
                          '—'
                        ) : (
                          <dl class="attributes">
                            {Object.entries(node.attributes).map(([key, value]) => (
                              <div key={key}>
                                <dt>{key}</dt>
                                <dd>{value}</dd>
                              </div>
                            ))}
                          </dl>
                        )}
                      </td>
                      {admin && (
                        <td>
                          {/* Offered once, in the node's first group: a dialog per copy would repeat its ids. */}
                          {node.source === 'declared' && name === (node.groups[0] ?? UNGROUPED) && (
                            <ActionButton
                              label={`Remove ${node.id}`}
                              danger
                              question={`Remove the declared node ${node.id}? Steps that already resolved it keep it; new steps will not find it.`}
                              confirmLabel="Yes, remove it"
                              run={() => api.removeNode(node.id)}
                              onDone={reload}
                            />
                          )}
                        </td>
                      )}
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          </section>
        ))
      )}
    </section>
  );
}
