import type { IncidentAlerts, IncidentCause } from '../app/incidents.js';
import type { Run } from '../domain/entities.js';
import { deliverAlert, type NotifyTargets } from './notify.js';

export interface IncidentAlertOptions extends NotifyTargets {
  /** Where people open a run; the link is `<base>/v1/runs/<id>`. */
  readonly linkBase?: string;
  readonly log: (message: string, fields: Record<string, unknown>) => void;
}

/** The message posted to the webhook: what happened, the run, its error and how to acknowledge. */
export function incidentText(run: Run, cause: IncidentCause, linkBase?: string): string {
  const link = `${linkBase?.replace(/\/$/, '') ?? ''}/v1/runs/${run.runId}`;
  const headline =
    cause.kind === 'breaker_opened'
      ? `INCIDENT: circuit breaker opened for runbook ${cause.runbookId}; its new runs wait`
      : `INCIDENT: run of ${run.runbookId} failed`;
  return [
    `*${headline}*`,
    `Run: <${link}|${run.runId}> (${run.runbookId} v${run.runbookVersion}, requested by ${run.requestedBy})`,
    ...(run.error ? [`Error: ${run.error.code}: ${run.error.message}`] : []),
    `Acknowledge: POST ${link}/incident/ack` +
      (cause.kind === 'breaker_opened' ? `; reset: POST /v1/breakers/${cause.runbookId}/reset` : ''),
  ].join('\n');
}

/** Incidents out to EventBridge (detail-type `incident.raised`) and the notify webhook; never throws. */
export function makeIncidentAlerts(options: IncidentAlertOptions): IncidentAlerts {
  return {
    async raised(run, cause) {
      const failures = await deliverAlert(options, {
        detailType: 'incident.raised',
        detail: {
          runId: run.runId,
          tenantId: run.tenantId,
          runbookId: run.runbookId,
          cause: cause.kind,
          ...(run.ticket && { ticket: run.ticket }),
          ...(run.error && { error: run.error }),
        },
        text: incidentText(run, cause, options.linkBase),
      });
      for (const error of failures) options.log('incident alert not delivered', { runId: run.runId, error });
    },
  };
}
