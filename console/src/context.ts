import { createContext } from 'preact';
import { useContext } from 'preact/hooks';
import type { Api } from './api.js';
import type { Identity } from './auth/session.js';
import type { EventStream } from './stream.js';

/** What every screen needs: the API, the one live stream, and who is signed in. */
export interface Session {
  readonly api: Api;
  readonly stream: EventStream;
  readonly identity: Identity;
}

export const SessionContext = createContext<Session | undefined>(undefined);

export function useSession(): Session {
  const session = useContext(SessionContext);
  if (!session) throw new Error('useSession outside a signed-in console');
  return session;
}
