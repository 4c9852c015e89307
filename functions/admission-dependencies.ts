import { MetricUnit, Metrics } from '@aws-lambda-powertools/metrics';
import { makeDynamoAdmissionStore } from '../shared/adapters/dynamodb/admission-store.js';
import { documentClient } from '../shared/adapters/dynamodb/client.js';
import { makeRunStore } from '../shared/adapters/dynamodb/run-store.js';
import { makeSfnRunStarter } from '../shared/adapters/sfn.js';
import { sfnClient } from '../shared/adapters/aws-clients.js';
import { makeAdmission } from '../shared/app/admission.js';
import { systemClock } from '../shared/app/ports.js';
import { config, required } from '../shared/config.js';

const metrics = new Metrics({ namespace: 'Capstan', serviceName: 'capstan-admission' });

/** The admission store, built once per process. */
export const admissionStore = () => makeDynamoAdmissionStore(documentClient, config().CAPSTAN_STATE_TABLE);

/** Admission wired to AWS: quotas, limits, breakers and dependencies in the state table. */
export const admission = () =>
  makeAdmission({
    runs: makeRunStore(documentClient, {
      state: config().CAPSTAN_STATE_TABLE,
      events: config().CAPSTAN_EVENTS_TABLE,
    }),
    admission: admissionStore(),
    starter: makeSfnRunStarter(sfnClient(), required('CAPSTAN_STATE_MACHINE_ARN')),
    clock: systemClock,
    refused: (limit) => {
      metrics.addDimensions({ limit });
      metrics.addMetric('quota_exceeded_total', MetricUnit.Count, 1);
      metrics.publishStoredMetrics();
    },
  });

/** For the quota, limit and breaker routes. */
export const controlDeps = () => ({ admission: admissionStore(), clock: systemClock });
