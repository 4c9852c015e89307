import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../infra/app.js';

const CONTEXT = {
  'capstan:jwtIssuer': 'https://auth.example.com/',
  'capstan:jwksUrl': 'https://auth.example.com/.well-known/jwks.json',
  'aws:cdk:bundling-stacks': [],
};

type Statement = { Action: string | string[]; Resource: unknown };
let statements: Array<{ id: string; actions: string[]; resource: string }>;

beforeAll(() => {
  const stateless = Template.fromStack(buildApp(new App({ context: CONTEXT })).stateless);
  statements = Object.entries(stateless.findResources('AWS::IAM::Policy')).flatMap(([id, policy]) =>
    (policy as { Properties: { PolicyDocument: { Statement: Statement[] } } }).Properties.PolicyDocument.Statement.map(
      (s) => ({ id, actions: [s.Action].flat(), resource: JSON.stringify(s.Resource) }),
    ),
  );
});

/** The actions a role (by the start of its policy's logical id) has on the agent node queues. */
const nodeQueueActions = (part: RegExp) =>
  statements
    .filter((s) => part.test(s.id) && s.resource.includes(':capstan-node-*'))
    .flatMap((s) => s.actions)
    .sort();

describe('agent node queues in the stack', () => {
  it('lets every worker task role create, receive from and delete on the node queues, and only those', () => {
    for (const profile of ['devflex', 'prodcritical']) {
      const actions = nodeQueueActions(new RegExp(`^Workers.*${profile}`, 'i'));
      expect(actions).toEqual(
        expect.arrayContaining(['sqs:CreateQueue', 'sqs:ReceiveMessage', 'sqs:DeleteMessage', 'sqs:GetQueueUrl']),
      );
      expect(actions).not.toContain('sqs:DeleteQueue');
    }
  });

  it('lets the dispatcher and the reconciler send to the node queues, and no read-only route', () => {
    expect(nodeQueueActions(/^RunInterpreter.*Fndispatch/)).toContain('sqs:SendMessage');
    expect(nodeQueueActions(/^Reconciler/)).toContain('sqs:SendMessage');
    expect(nodeQueueActions(/Fnapilistinventory|Fnapigetrun/)).toEqual([]);
  });
});
