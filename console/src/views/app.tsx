import { useEffect, useMemo, useState } from 'preact/hooks';
import { Api } from '../api.js';
import { type Identity, signOut } from '../auth/session.js';
import type { ConsoleConfig } from '../config.js';
import { SessionContext } from '../context.js';
import { EventStream } from '../stream.js';
import { ApprovalsScreen } from './approvals.js';
import { InventoryScreen } from './inventory.js';
import { RunsScreen } from './runs.js';
import { WorkersScreen } from './workers.js';
import { WorkspaceScreen } from './workspace.js';

type Route =
  | { screen: 'runs' }
  | { screen: 'run'; runId: string }
  | { screen: 'approvals' }
  | { screen: 'workers' }
  | { screen: 'inventory' };

function parseRoute(hash: string): Route {
  const path = hash.replace(/^#/, '');
  const run = /^\/runs\/([^/]+)$/.exec(path);
  if (run?.[1]) return { screen: 'run', runId: decodeURIComponent(run[1]) };
  if (path === '/approvals') return { screen: 'approvals' };
  if (path === '/workers') return { screen: 'workers' };
  if (path === '/inventory') return { screen: 'inventory' };
  return { screen: 'runs' };
}

const TITLES = {
  runs: 'Runs',
  run: 'Run',
  approvals: 'Approvals',
  workers: 'Workers',
  inventory: 'Inventory',
} as const;

/** The signed-in console: navigation, the live-stream state, and the current screen. */
export function App({
  config,
  identity,
  onSignOut,
}: {
  config: ConsoleConfig;
  identity: Identity;
  onSignOut: () => void;
}) {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  const [live, setLive] = useState<'open' | 'reconnecting'>('open');
  const session = useMemo(() => {
    const api = new Api(config.apiUrl, identity.token);
    const stream = new EventStream(config.wsUrl, identity.token, api);
    stream.onState = setLive;
    return { api, stream, identity };
  }, [config, identity]);
  useEffect(() => () => session.stream.close(), [session]);
  useEffect(() => {
    const onHash = () => setRoute(parseRoute(location.hash));
    addEventListener('hashchange', onHash);
    // A change between the first render and this listener (a link followed right after sign-in)
    // fired no event we heard: read the hash once more.
    onHash();
    return () => removeEventListener('hashchange', onHash);
  }, []);
  useEffect(() => {
    document.title = `${TITLES[route.screen]} · Capstan`;
    // Tests and tools read the stream from here: one socket per page.
    (window as unknown as { capstanStream?: EventStream }).capstanStream = session.stream;
  }, [route, session]);
  const link = (href: string, label: string, current: boolean) => (
    <a href={href} aria-current={current ? 'page' : undefined}>
      {label}
    </a>
  );
  return (
    <SessionContext.Provider value={session}>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <span class="brand">Capstan</span>
        <nav aria-label="Screens">
          {link('#/runs', 'Runs', route.screen === 'runs' || route.screen === 'run')}
          {link('#/approvals', 'Approvals', route.screen === 'approvals')}
          {link('#/workers', 'Workers', route.screen === 'workers')}
          {link('#/inventory', 'Inventory', route.screen === 'inventory')}
        </nav>
        <span class="who">
          <span class={`live ${live}`} role="status">
            {live === 'open' ? 'live' : 'reconnecting…'}
          </span>{' '}
          {identity.sub}{' '}
          <span class="muted">
            ({identity.roles.join(', ')} · {identity.tenant})
          </span>{' '}
          <button
            type="button"
            onClick={() => {
              signOut();
              onSignOut();
            }}
          >
            Sign out
          </button>
        </span>
      </header>
      <main id="main" tabIndex={-1}>
        {route.screen === 'runs' && <RunsScreen />}
        {route.screen === 'run' && <WorkspaceScreen runId={route.runId} />}
        {route.screen === 'approvals' && <ApprovalsScreen />}
        {route.screen === 'workers' && <WorkersScreen />}
        {route.screen === 'inventory' && <InventoryScreen />}
      </main>
    </SessionContext.Provider>
  );
}
