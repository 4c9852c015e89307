import { makeDecideApproval } from '../../shared/app/approvals.js';
import { decisionBodySchema } from '../../shared/domain/approvals.js';
import { approvalDeps } from '../dependencies.js';
import { approvalPathSchema } from '../../shared/resources/api-schemas.js';
import { httpHandler, parseJsonBody, requirePrincipal } from '../http.js';

const decideApproval = makeDecideApproval(approvalDeps());

/**
 * POST /v1/runs/{id}/approvals/{approvalId} `{"decision": "approve"|"reject", "notes"?}`: 200 with
 * the gate; `counted: false` when this approver had decided already.
 */
export const handler = httpHandler(async (request) => {
  const principal = requirePrincipal(request);
  const { id, approvalId } = approvalPathSchema.parse(request.path);
  const body = parseJsonBody(request, decisionBodySchema);
  const { approval, counted, resolved } = await decideApproval(principal, id, approvalId, body);
  return { status: 200, body: { approval, counted, ...(resolved && { resolved }) } };
});
