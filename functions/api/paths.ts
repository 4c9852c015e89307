import { z } from 'zod';

/** The `{id}` of `/v1/runs/{id}/...` routes. Its own module, so a handler imports it without another handler's start-up. */
export const runPathSchema = z.object({ id: z.string().regex(/^run-[0-9a-f-]{36}$/, 'must be a run id') });
