import { notifyPostParams } from '../../shared/domain/catalogue.js';
import { ActionError, type Backend, typed } from './types.js';

const TIMEOUT_MS = 10_000;

/**
 * Posts `{ "text": ... }` to a Slack-compatible incoming webhook. The webhook URL is itself a
 * secret (it is a credential), named by `webhook_secret` and fetched like any step secret.
 */
export async function postToWebhook(url: string, text: string, signal?: AbortSignal): Promise<number> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ text }),
    signal: signal ? AbortSignal.any([signal, AbortSignal.timeout(TIMEOUT_MS)]) : AbortSignal.timeout(TIMEOUT_MS),
  });
  await response.body?.cancel().catch(() => undefined);
  return response.status;
}

/** `notify.post`: a message to a Slack-compatible incoming webhook. */
export function makeNotifyBackend(): Backend {
  return {
    name: 'notify',
    secretsFor: (_action, params) => (typeof params.webhook_secret === 'string' ? [params.webhook_secret] : []),
    actions: {
      async post({ params, secrets, signal, output }) {
        const { webhook_secret, text } = typed(notifyPostParams, params);
        const url = secrets[webhook_secret];
        if (!url)
          throw new ActionError('SECRET_MISSING', `the webhook secret '${webhook_secret}' was not fetched`, false);
        let status: number;
        try {
          status = await postToWebhook(url, text, signal);
        } catch (error) {
          if (signal.aborted) throw signal.reason;
          throw new ActionError('WEBHOOK_UNREACHABLE', `the webhook did not answer: ${(error as Error).name}`, true);
        }
        if (status < 200 || status >= 300)
          throw new ActionError(
            'WEBHOOK_REFUSED',
            `the webhook answered HTTP ${status}`,
            status >= 500 || status === 429,
          );
        output('stdout', `posted ${text.length} characters to the webhook`);
        return { output: { status } };
      },
    },
  };
}
