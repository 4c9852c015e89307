import { Tracer } from '@aws-lambda-powertools/tracer';

/**
 * The process's X-Ray tracer (Powertools). Outside Lambda it disables itself, so the local stack
 * and the worker pay nothing for it; their spans go through `withSpan` instead.
 */
export const tracer = new Tracer({ serviceName: 'capstan' });

/** An AWS SDK v3 client whose calls are X-Ray subsegments of the invocation's trace. */
export function traced<T>(client: T): T {
  return tracer.captureAWSv3Client(client);
}
