import { ResponseType, type RestApiBase } from 'aws-cdk-lib/aws-apigateway';
import { Construct } from 'constructs';

export interface ErrorGatewayResponsesProps {
  /** The REST API whose own answers (before or instead of a function) get the error shape. */
  readonly restApi: RestApiBase;
}

/** The answers API Gateway gives itself, with the code each carries in the API's error shape. */
const RESPONSES: ReadonlyArray<{ id: string; type: ResponseType; code: string; statusCode?: string }> = [
  { id: 'Unauthorized', type: ResponseType.UNAUTHORIZED, code: 'UNAUTHORIZED' },
  { id: 'ExpiredToken', type: ResponseType.EXPIRED_TOKEN, code: 'UNAUTHORIZED' },
  { id: 'AccessDenied', type: ResponseType.ACCESS_DENIED, code: 'FORBIDDEN' },
  // API Gateway answers an unknown path as a missing token (403); the API calls it what it is.
  { id: 'NoRoute', type: ResponseType.MISSING_AUTHENTICATION_TOKEN, code: 'NOT_FOUND', statusCode: '404' },
  { id: 'TooLarge', type: ResponseType.REQUEST_TOO_LARGE, code: 'PAYLOAD_TOO_LARGE', statusCode: '413' },
  { id: 'Throttled', type: ResponseType.THROTTLED, code: 'THROTTLED' },
  { id: 'BadParameters', type: ResponseType.BAD_REQUEST_PARAMETERS, code: 'VALIDATION_FAILED' },
  { id: 'BadBody', type: ResponseType.BAD_REQUEST_BODY, code: 'VALIDATION_FAILED' },
  { id: 'Default4xx', type: ResponseType.DEFAULT_4XX, code: 'BAD_REQUEST' },
  { id: 'Default5xx', type: ResponseType.DEFAULT_5XX, code: 'INTERNAL' },
];

/**
 * Gateway responses in the API's error shape, `{"error": {"code", "message", "details"?}}`: a
 * client parses one shape whether a function or API Gateway itself answered. A 5xx names its
 * request id, so a caller can quote it; the message stays API Gateway's generic one.
 */
export class ErrorGatewayResponses extends Construct {
  constructor(scope: Construct, id: string, props: ErrorGatewayResponsesProps) {
    super(scope, id);
    for (const response of RESPONSES) {
      const details = response.type === ResponseType.DEFAULT_5XX ? ',"details":{"requestId":"$context.requestId"}' : '';
      props.restApi.addGatewayResponse(response.id, {
        type: response.type,
        ...(response.statusCode === undefined ? {} : { statusCode: response.statusCode }),
        responseHeaders: { 'Content-Type': "'application/json'" },
        templates: {
          'application/json': `{"error":{"code":"${response.code}","message":$context.error.messageString${details}}}`,
        },
      });
    }
  }
}
