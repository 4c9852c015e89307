import { useEffect, useState } from 'preact/hooks';
import type { AuthConfig } from '../config.js';
import {
  beginOidcSignIn,
  identityFromToken,
  type Identity,
  type LocalIdentity,
  loadLocalIdentities,
} from '../auth/session.js';

/** Sign-in: a development identity locally, the deployment's issuer (OIDC + PKCE) in AWS. */
export function SignInScreen({
  auth,
  onSignIn,
  problem,
}: {
  auth: AuthConfig;
  onSignIn: (i: Identity) => void;
  problem?: string;
}) {
  const [identities, setIdentities] = useState<LocalIdentity[]>();
  const [error, setError] = useState<string | undefined>(problem);
  useEffect(() => {
    if (auth.mode === 'local')
      loadLocalIdentities(auth.identitiesUrl).then(setIdentities, (e: unknown) => setError(String(e)));
  }, [auth]);
  return (
    <main id="main" class="signin">
      <h1>Sign in to Capstan</h1>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      {auth.mode === 'oidc' ? (
        <button
          type="button"
          class="primary"
          onClick={() => beginOidcSignIn(auth).catch((e: unknown) => setError(String(e)))}
        >
          Sign in with your organisation
        </button>
      ) : (
        <>
          <p>The local stack issues a token for each development identity. Choose who you are:</p>
          <ul class="identities">
            {(identities ?? []).map((i) => (
              <li key={i.name}>
                <button
                  type="button"
                  data-identity={i.name}
                  onClick={() => {
                    const identity = identityFromToken(i.token, i.name);
                    if (identity) onSignIn(identity);
                    else setError(`the token of ${i.name} has expired: restart the local stack`);
                  }}
                >
                  <strong>{i.name}</strong>{' '}
                  <span class="muted">
                    {i.sub} · {i.roles.join(', ')} · tenant {i.tenant}
                  </span>
                </button>
              </li>
            ))}
          </ul>
        </>
      )}
    </main>
  );
}
