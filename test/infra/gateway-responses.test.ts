import { App } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../infra/app.js';

const CONTEXT = {
  'capstan:jwtIssuer': 'https://auth.example.com/',
  'capstan:jwksUrl': 'https://auth.example.com/.well-known/jwks.json',
  'capstan:platformTenant': 'ops',
  'aws:cdk:bundling-stacks': [],
};

let stateless: Template;

beforeAll(() => {
  stateless = Template.fromStack(buildApp(new App({ context: CONTEXT })).stateless);
});

type Response = {
  Properties: { ResponseType: string; StatusCode?: string; ResponseTemplates: Record<string, string> };
};

function response(type: string): Response['Properties'] {
  const found = Object.values(stateless.findResources('AWS::ApiGateway::GatewayResponse')) as Response[];
  const match = found.find((r) => r.Properties.ResponseType === type);
  if (!match) throw new Error(`no gateway response of type ${type}`);
  return match.Properties;
}

describe("API Gateway's own answers", () => {
  it.each([
    ['UNAUTHORIZED', 'UNAUTHORIZED'],
    ['ACCESS_DENIED', 'FORBIDDEN'],
    ['REQUEST_TOO_LARGE', 'PAYLOAD_TOO_LARGE'],
    ['DEFAULT_4XX', 'BAD_REQUEST'],
    ['DEFAULT_5XX', 'INTERNAL'],
  ])('answers %s in the error shape with code %s', (type, code) => {
    const template = response(type).ResponseTemplates['application/json'] ?? '';
    // The message variable is a JSON string literal at run time; substitute one to parse the shape.
    const body = JSON.parse(template.replace('$context.error.messageString', '"m"').replace('$context.requestId', 'r'));
    expect(body).toEqual({ error: expect.objectContaining({ code, message: 'm' }) });
  });

  it('names the request id in a 5xx body', () => {
    expect(response('DEFAULT_5XX').ResponseTemplates['application/json']).toContain('"requestId":"$context.requestId"');
  });

  it('answers an unknown route 404 instead of a missing token 403', () => {
    expect(response('MISSING_AUTHENTICATION_TOKEN').StatusCode).toBe('404');
  });

  it("gives the functions the deployment's platform tenant", () => {
    stateless.hasResourceProperties('AWS::Lambda::Function', {
      Environment: { Variables: Match.objectLike({ CAPSTAN_PLATFORM_TENANT: 'ops' }) },
    });
  });
});
