import { makeReceiveWebhook } from '../../shared/app/intake.js';
import { intakeDeps } from '../dependencies.js';
import { httpHandler } from '../http.js';

const receive = makeReceiveWebhook(intakeDeps());

/**
 * POST /v1/webhooks/{source}: no JWT, the signature authenticates. 202 with the run id (the
 * existing run's for a redelivery); 202 `matched: false` for a ticket no rule routes (recorded).
 */
export const handler = httpHandler(async (request) => {
  const result = await receive({
    source: request.path.source ?? '',
    body: request.body,
    signature: request.headers['x-capstan-signature'],
    timestamp: request.headers['x-capstan-timestamp'],
  });
  if (result.outcome === 'unmatched') return { status: 202, body: { matched: false } };
  return {
    status: 202,
    body: {
      runId: result.runId,
      status: result.status,
      duplicate: result.outcome === 'duplicate',
      rule: result.ruleId,
    },
  };
});
