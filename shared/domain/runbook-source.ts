import { isMap, isSeq, LineCounter, parseDocument, type Node as YamlNode } from 'yaml';
import type { Issue } from './errors.js';
import { ValidationError } from './errors.js';
import { type Runbook, validateRunbook } from './runbook.js';
import { formatPath, type PathSegment } from './zod-issues.js';

export type RunbookFormat = 'yaml' | 'json';

/**
 * Parses a runbook written as YAML or JSON (JSON is YAML, so one parser serves both and
 * both get line numbers). Throws a {@link ValidationError} whose issues carry the path and
 * the line and column of the offending node.
 */
export function parseRunbookSource(source: string, format: RunbookFormat = 'yaml'): Runbook {
  const lineCounter = new LineCounter();
  const doc = guarded(format, () =>
    parseDocument(source, { lineCounter, prettyErrors: false, uniqueKeys: true, strict: true }),
  );
  const syntax = [...doc.errors];
  if (syntax.length > 0) {
    const issues: Issue[] = syntax.map((error) => {
      const pos = lineCounter.linePos(error.pos[0]);
      return {
        path: '(document)',
        message: `${format.toUpperCase()} syntax: ${error.message.split('\n')[0]}`,
        line: pos.line,
        column: pos.col,
      };
    });
    throw new ValidationError(`the runbook is not valid ${format.toUpperCase()}`, issues);
  }
  if (format === 'json') {
    try {
      JSON.parse(source);
    } catch (error) {
      throw new ValidationError('the runbook is not valid JSON', [
        { path: '(document)', message: (error as Error).message },
      ]);
    }
  }
  const result = validateRunbook(guarded(format, () => doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT }) as unknown));
  if (result.ok) return result.runbook;
  const issues = result.issues.map((issue): Issue => {
    const offset = nodeOffset(doc.contents as YamlNode | null, issue.path);
    const base: Issue = { path: formatPath(issue.path), message: issue.message };
    if (offset === undefined) return base;
    const at = lineCounter.linePos(offset);
    return { ...base, line: at.line, column: at.col };
  });
  throw new ValidationError('the runbook is not valid', issues);
}

/** Aliases a document may expand: a few anchors are handy, thousands are a billion-laughs attack. */
const MAX_ALIAS_COUNT = 50;

/**
 * Runs a step of reading the document; what the parser throws on hostile input (too many
 * aliases, nesting deep enough to exhaust the stack) is a problem with the document, not a fault.
 */
function guarded<T>(format: RunbookFormat, read: () => T): T {
  try {
    return read();
  } catch (error) {
    const message =
      error instanceof RangeError
        ? 'the document nests too deeply'
        : /alias/i.test((error as Error).message)
          ? `the document expands too many aliases (at most ${MAX_ALIAS_COUNT})`
          : (error as Error).message;
    throw new ValidationError(`the runbook is not valid ${format.toUpperCase()}`, [{ path: '(document)', message }]);
  }
}

/** Offset of the deepest node on `path` that exists (a missing field points at its parent). */
function nodeOffset(root: YamlNode | null, path: readonly PathSegment[]): number | undefined {
  let node: unknown = root;
  let offset = root?.range?.[0];
  for (const key of path) {
    if (isMap(node)) {
      const pair = node.items.find((item) => (item.key as { value?: unknown } | null)?.value === key);
      if (!pair) break;
      const keyNode = pair.key as YamlNode | null;
      node = pair.value;
      offset = (node as YamlNode | null)?.range?.[0] ?? keyNode?.range?.[0] ?? offset;
    } else if (isSeq(node) && typeof key === 'number') {
      const item = node.items[key] as YamlNode | undefined;
      if (!item) break;
      node = item;
      offset = item.range?.[0] ?? offset;
    } else {
      break;
    }
  }
  return offset;
}
