import { makeRegisterRunbook } from '../../shared/app/runbooks.js';
import { ValidationError } from '../../shared/domain/errors.js';
import { runbookDeps } from '../dependencies.js';
import { httpHandler, requirePrincipal } from '../http.js';

const registerRunbook = makeRegisterRunbook(runbookDeps);

/** POST /v1/runbooks: JSON, or YAML with Content-Type application/yaml. */
export const handler = httpHandler(async (request) => {
  const principal = requirePrincipal(request);
  const contentType = (request.headers['content-type'] ?? 'application/json').split(';')[0]?.trim();
  const format =
    contentType === 'application/yaml' || contentType === 'application/x-yaml' || contentType === 'text/yaml'
      ? 'yaml'
      : 'json';
  if (format === 'json' && contentType !== 'application/json') {
    throw new ValidationError('unsupported content type', [
      { path: 'content-type', message: 'use application/json or application/yaml' },
    ]);
  }
  if (!request.body)
    throw new ValidationError('the request needs a runbook body', [{ path: 'body', message: 'required' }]);
  const result = await registerRunbook({ principal, source: request.body, format });
  return {
    status: result.created ? 201 : 200,
    body: { id: result.id, version: result.version, digest: result.digest },
  };
});
