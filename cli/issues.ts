import { z } from 'zod';

const issueSchema = z.object({
  path: z.string(),
  message: z.string(),
  line: z.number().int().optional(),
  column: z.number().int().optional(),
});

/** Issues as compilers print them: `file:line:column: path: message`. */
export function issueLines(details: unknown, file?: string): string[] {
  const parsed = z.array(issueSchema).safeParse(details);
  if (!parsed.success) return [];
  return parsed.data.map((issue) => {
    const at = issue.line === undefined ? '' : `${issue.line}:${issue.column ?? 1}`;
    const where = [file, at].filter(Boolean).join(':');
    return `${where ? `${where}: ` : ''}${issue.path}: ${issue.message}`;
  });
}
