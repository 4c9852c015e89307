import { CapstanError } from '../domain/errors.js';

/** The queue stayed unavailable (throttling, 5xx, network) through every retry; the send may pass later. */
export class TransientQueueError extends CapstanError {
  readonly code = 'QUEUE_UNAVAILABLE';
}
