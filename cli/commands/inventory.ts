import type { Command } from 'commander';
import {
  declaredNodeSchema,
  inventoryListSchema,
  removedNodeSchema,
} from '../../shared/resources/inventory-schemas.js';
import { type ContextFor, example } from '../context.js';
import { UsageError } from '../errors.js';
import { age, paint, statusStyle, table } from '../output.js';

const collect = (value: string, previous: string[]) => [...previous, value];

/** `--attr host=10.0.0.5` into an attribute; the value may contain `=`. */
function attribute(text: string): [string, string] {
  const at = text.indexOf('=');
  if (at <= 0) throw new UsageError(`--attr '${text}' is not key=value`, 'write --attr name=value, once per attribute');
  return [text.slice(0, at), text.slice(at + 1)];
}

/** `inventory list|put|rm`: the tenant's nodes. */
export function registerInventoryCommands(program: Command, contextFor: ContextFor): void {
  const inventory = example(
    program.command('inventory').description("the tenant's nodes: agents that registered and nodes admins declared"),
    'capstan inventory list --group web',
  );

  example(
    inventory
      .command('list')
      .description('nodes with their groups, source and status as of now')
      .option('--group <group>', "only this group's nodes"),
    'capstan inventory list --group web',
    'capstan inventory list --json | jq -r \'.nodes[] | select(.status == "online") | .id\'',
  ).action(async function (this: Command) {
    const { group } = this.opts<{ group?: string }>();
    const context = contextFor(this);
    const { data, raw } = await context
      .client()
      .request('GET', '/inventory', inventoryListSchema, { query: { group } });
    if (context.output.json) return context.output.data(raw);
    const now = Date.now();
    const rows = data.nodes.map((n) => [
      n.id,
      n.source,
      paint(context.output, statusStyle(n.status), n.status),
      n.groups.join(',') || '-',
      Object.entries(n.attributes)
        .map(([k, v]) => `${k}=${v}`)
        .join(' ') || '-',
      age(Math.max(0, Math.round((now - Date.parse(n.lastSeen)) / 1000))),
    ]);
    context.output.line(
      rows.length === 0
        ? group === undefined
          ? 'no nodes in the inventory'
          : `no nodes in group ${group}`
        : table(context.output, ['node', 'source', 'status', 'groups', 'attributes', 'seen'], rows),
    );
  });

  example(
    inventory
      .command('put')
      .description("declare a node the profile's workers act on remotely, or replace its groups and attributes (admin)")
      .argument('<id>', 'the node id: a host name, instance id or service name')
      .option('--group <group>', 'a group of the node (repeat for more)', collect, [])
      .option('--attr <key=value>', 'an attribute steps read as {{ target.attributes.<key> }} (repeat)', collect, []),
    'capstan inventory put db-1 --group db --attr host=10.0.0.5 --as admin',
  ).action(async function (this: Command, id: string) {
    const options = this.opts<{ group: string[]; attr: string[] }>();
    const context = contextFor(this);
    const body = { groups: options.group, attributes: Object.fromEntries(options.attr.map(attribute)) };
    const { data, raw } = await context
      .client()
      .request('PUT', `/inventory/nodes/${encodeURIComponent(id)}`, declaredNodeSchema, { body });
    if (context.output.json) return context.output.data(raw);
    context.output.line(
      `node ${data.node.id}: ${data.created ? 'declared' : 'updated'} in ${data.node.groups.join(', ') || 'no group'}`,
    );
  });

  example(
    inventory.command('rm').description('remove a node from the inventory (admin)').argument('<id>', 'the node id'),
    'capstan inventory rm db-1 --as admin',
  ).action(async function (this: Command, id: string) {
    const context = contextFor(this);
    const { data, raw } = await context
      .client()
      .request('DELETE', `/inventory/nodes/${encodeURIComponent(id)}`, removedNodeSchema);
    if (context.output.json) return context.output.data(raw);
    context.output.line(`node ${data.id}: removed`);
  });
}
