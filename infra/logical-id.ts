import { createHash } from 'node:crypto';

/**
 * The logical id CloudFormation knows a resource by, from its construct path below the stack,
 * computed as CDK computes it (`makeUniqueId`): the path's letters and digits without `Default`,
 * `Resource` and repeated components, then the first 8 hex digits of the path's MD5. CDK has kept
 * this scheme since 1.0 because changing it would replace every deployed resource.
 */
export function logicalIdOf(path: readonly string[]): string {
  const components = path.filter((c) => c !== 'Default');
  if (components.length === 0) throw new Error('a logical id needs at least one path component');
  const alphanumeric = (s: string) => s.replace(/[^A-Za-z0-9]/g, '');
  if (components.length === 1) {
    const only = alphanumeric(components[0] ?? '');
    if (only.length <= 255) return only;
  }
  const hash = createHash('md5').update(components.join('/')).digest('hex').slice(0, 8).toUpperCase();
  const human: string[] = [];
  for (const c of components) if (human.length === 0 || !(human.at(-1) ?? '').endsWith(c)) human.push(c);
  return (
    human
      .filter((c) => c !== 'Resource')
      .map(alphanumeric)
      .join('')
      .slice(0, 240) + hash
  );
}
