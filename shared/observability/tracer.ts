import type { Tracer } from '@aws-lambda-powertools/tracer';
import { lambdaXRayTracing } from '../config.js';

/**
 * The process's X-Ray tracer (Powertools), in a Lambda function that traces; elsewhere none.
 *
 * Loaded only there: the tracer's X-Ray SDK installs async hooks (cls-hooked) as it is imported,
 * and they track every promise the process makes, whether or not anything is traced. In the local
 * stack that cost about a sixth of its CPU. The local stack and the worker record spans through
 * `withSpan` instead.
 */
export const tracer: Tracer | undefined = lambdaXRayTracing()
  ? new (await import('@aws-lambda-powertools/tracer')).Tracer({ serviceName: 'capstan' })
  : undefined;

/** An AWS SDK v3 client whose calls are X-Ray subsegments of the invocation's trace. */
export function traced<T>(client: T): T {
  return tracer ? tracer.captureAWSv3Client(client) : client;
}
