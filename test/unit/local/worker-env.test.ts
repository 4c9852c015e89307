import { describe, expect, it } from 'vitest';
import { workerEnv } from '../../../local/stack.js';

describe("a local worker's environment", () => {
  it("is the functions' own without their DynamoDB socket cap", () => {
    const functions = {
      CAPSTAN_STATE_TABLE: 'capstan-state',
      CAPSTAN_DYNAMODB_MAX_SOCKETS: '4',
      AWS_REGION: 'us-east-1',
    };
    expect(workerEnv(functions)).toEqual({ CAPSTAN_STATE_TABLE: 'capstan-state', AWS_REGION: 'us-east-1' });
  });
});
