import { openApiDocument } from '../../shared/resources/openapi.js';
import { ROUTES } from '../../shared/resources/routes.js';
import { httpHandler } from '../http.js';

// Built once per process: the route table does not change while the function is warm.
const document = openApiDocument(ROUTES, { version: '1.0.0' });

/** GET /v1/openapi.json: the OpenAPI 3.1 document of this API. Public, like the health check. */
export const handler = httpHandler(async () => ({ status: 200, body: document }));
