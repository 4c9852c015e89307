import { ResourceNotFoundException } from '@aws-sdk/client-secrets-manager';
import type { WebhookKeys } from '../app/intake.js';
import type { SecretSource } from './secrets.js';

/** Webhook signing keys from Secrets Manager: the secret `<prefix>/webhooks/<source>`. */
export function makeSecretWebhookKeys(secrets: SecretSource, prefix: string): WebhookKeys {
  return {
    async keyFor(source) {
      try {
        return await secrets.get(`${prefix}/webhooks/${source}`);
      } catch (error) {
        if (error instanceof ResourceNotFoundException) return undefined;
        throw error;
      }
    },
  };
}
