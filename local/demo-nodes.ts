/** The nodes the demo service stands in for: a small web pool behind a load balancer. */
export const DEMO_NODE_IDS = ['demo-web-1', 'demo-web-2', 'demo-web-3', 'demo-web-4'] as const;
/** Their inventory group: a group of their own, so runbooks over `web` never touch them. */
export const DEMO_NODE_GROUP = 'demo-web';
/** How long a restart keeps a node down: long enough that two restarts in flight overlap. */
const RESTART_MS = 300;

export type DemoNodeAction = 'drain' | 'restart' | 'health' | 'enable';

/** One call a node received, in the order the service handled them. */
export interface DemoNodeCall {
  readonly node: string;
  readonly action: DemoNodeAction;
  /** When the call took effect (a restart: when the node was up again), in ms since the epoch. */
  readonly at: number;
  /** The answer's status: a refused call is recorded too. */
  readonly status: number;
}

interface NodeState {
  inPool: boolean;
  status: 'up' | 'restarting' | 'down';
  restarts: number;
  failNextRestart: boolean;
}

/** What a node route answers. */
export interface NodeReply {
  readonly status: number;
  readonly body: unknown;
}

/** The demo pool: each node's state, and the journal of every call in order. */
export interface DemoNodes {
  /** Every call the nodes received, oldest first. */
  journal(): readonly DemoNodeCall[];
  /** Makes the next restart of `node` fail and leave it down (to show the failure path). */
  failNextRestart(node: string): void;
  /** Answers `/nodes/{id}/{action}`, or undefined when the path is not a node route. */
  handle(method: string, path: string): Promise<NodeReply> | undefined;
}

const ROUTE = /^\/nodes\/([a-z0-9-]{1,63})\/(drain|restart|enable|health)$/;
const METHODS: Record<DemoNodeAction, string> = { drain: 'POST', restart: 'POST', enable: 'POST', health: 'GET' };

/**
 * A pool of demo nodes that behave like a service behind a load balancer: `drain` takes a node
 * out of the pool, `restart` refuses a node still in the pool and keeps it down for a moment,
 * `health` says whether it is up, `enable` puts it back. The journal lets a test prove the order
 * and the overlap of the calls a runbook made.
 */
export function makeDemoNodes(now: () => number = Date.now): DemoNodes {
  const nodes = new Map<string, NodeState>(
    DEMO_NODE_IDS.map((id) => [id, { inPool: true, status: 'up', restarts: 0, failNextRestart: false }]),
  );
  const calls: DemoNodeCall[] = [];
  const view = (id: string, node: NodeState) => ({
    id,
    status: node.status,
    inPool: node.inPool,
    restarts: node.restarts,
  });
  const record = (id: string, action: DemoNodeAction, reply: NodeReply): NodeReply => {
    calls.push({ node: id, action, at: now(), status: reply.status });
    return reply;
  };

  async function restart(id: string, node: NodeState): Promise<NodeReply> {
    if (node.inPool) return { status: 409, body: { error: `${id} is still in the pool: drain it first` } };
    if (node.status === 'restarting') return { status: 409, body: { error: `${id} is already restarting` } };
    node.status = 'restarting';
    await new Promise((resolve) => setTimeout(resolve, RESTART_MS));
    if (node.failNextRestart) {
      node.failNextRestart = false;
      node.status = 'down';
      return { status: 500, body: { error: `${id} did not come back up` } };
    }
    node.status = 'up';
    node.restarts += 1;
    return { status: 200, body: view(id, node) };
  }

  return {
    journal: () => [...calls],
    failNextRestart(id) {
      const node = nodes.get(id);
      if (!node) throw new Error(`no demo node '${id}'`);
      node.failNextRestart = true;
    },
    handle(method, path) {
      const match = ROUTE.exec(path);
      if (!match?.[1] || !match[2]) return undefined;
      const id = match[1];
      const action = match[2] as DemoNodeAction;
      const node = nodes.get(id);
      if (!node) return Promise.resolve({ status: 404, body: { error: `no demo node '${id}'` } });
      if (method !== METHODS[action])
        return Promise.resolve({ status: 405, body: { error: `${action} takes ${METHODS[action]}` } });
      switch (action) {
        case 'drain':
          node.inPool = false;
          return Promise.resolve(record(id, action, { status: 200, body: view(id, node) }));
        case 'enable':
          node.inPool = true;
          return Promise.resolve(record(id, action, { status: 200, body: view(id, node) }));
        case 'health':
          return Promise.resolve(
            record(id, action, { status: node.status === 'up' ? 200 : 503, body: view(id, node) }),
          );
        case 'restart':
          return restart(id, node).then((reply) => record(id, action, reply));
      }
    },
  };
}

/**
 * Declares the demo nodes in the inventory of the admin token's tenant through the public API
 * (`PUT /v1/inventory/nodes/{id}`), each with the `url` a runbook reaches it at. Declaring again
 * replaces the attributes, so a restart on another port points them at the new service.
 */
export async function declareDemoNodes(restUrl: string, adminToken: string, demoUrl: string): Promise<void> {
  for (const id of DEMO_NODE_IDS) {
    const response = await fetch(`${restUrl}/inventory/nodes/${id}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ groups: [DEMO_NODE_GROUP], attributes: { url: `${demoUrl}/nodes/${id}` } }),
    });
    if (!response.ok)
      throw new Error(`declaring demo node ${id} failed: HTTP ${response.status} ${await response.text()}`);
  }
}
