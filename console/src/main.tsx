import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { completeOidcSignIn, type Identity, keepIdentity, storedIdentity } from './auth/session.js';
import { type ConsoleConfig, loadConfig } from './config.js';
import { App } from './views/app.js';
import { SignInScreen } from './views/signin.js';

function Root() {
  const [config, setConfig] = useState<ConsoleConfig>();
  const [identity, setIdentity] = useState<Identity | undefined>(storedIdentity);
  const [problem, setProblem] = useState<string>();
  useEffect(() => {
    loadConfig().then(
      async (loaded) => {
        setConfig(loaded);
        if (loaded.auth.mode === 'oidc') {
          const signedIn = await completeOidcSignIn(loaded.auth).catch((e: unknown) => {
            setProblem(e instanceof Error ? e.message : String(e));
            return undefined;
          });
          if (signedIn) {
            keepIdentity(signedIn);
            setIdentity(signedIn);
          }
        }
      },
      (e: unknown) => setProblem(e instanceof Error ? e.message : String(e)),
    );
  }, []);
  if (!config)
    return (
      <main id="main">
        {problem ? (
          <p role="alert" class="error">
            {problem}
          </p>
        ) : (
          <p aria-busy="true">Loading…</p>
        )}
      </main>
    );
  if (!identity)
    return (
      <SignInScreen
        auth={config.auth}
        problem={problem}
        onSignIn={(signedIn) => {
          keepIdentity(signedIn);
          setIdentity(signedIn);
        }}
      />
    );
  return <App config={config} identity={identity} onSignOut={() => setIdentity(undefined)} />;
}

const mount = document.getElementById('app');
if (mount) render(<Root />, mount);
