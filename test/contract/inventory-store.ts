import { describe, expect, it } from 'vitest';
import type { InventoryStore } from '../../shared/app/ports/inventory.js';
import { ConflictError } from '../../shared/domain/errors.js';

/** The clock both stores read: the suite moves it. */
export interface InventoryFixture {
  readonly store: InventoryStore;
  readonly setNow: (at: Date) => void;
  readonly heartbeatMs: number;
}

let counter = 0;
const T0 = new Date('2026-03-01T00:00:00.000Z');
const later = (ms: number) => new Date(T0.getTime() + ms);

/** A tenant of its own for each test, so the suites share one table without seeing each other. */
const freshTenant = () => `tenant-inv-${Date.now()}-${++counter}`;

/** The inventory store's contract, run against the in-memory and the DynamoDB implementations. */
export function inventoryStoreContract(name: string, fixture: () => InventoryFixture): void {
  describe(`inventory store contract (${name})`, () => {
    it('lists a declared node online with its groups, attributes and source', async () => {
      const { store, setNow } = fixture();
      const tenantId = freshTenant();
      setNow(T0);
      const { created } = await store.declare(
        { tenantId, id: 'db-1', groups: ['db'], attributes: { host: '10.0.0.5' } },
        T0,
      );
      expect(created).toBe(true);
      expect(await store.list(tenantId)).toEqual([
        {
          id: 'db-1',
          tenantId,
          groups: ['db'],
          attributes: { host: '10.0.0.5' },
          source: 'declared',
          status: 'online',
          lastSeen: T0.toISOString(),
        },
      ]);
    });

    it('replaces a declared node and says it was not created', async () => {
      const { store } = fixture();
      const tenantId = freshTenant();
      await store.declare({ tenantId, id: 'db-1', groups: ['db'], attributes: {} }, T0);
      const again = await store.declare({ tenantId, id: 'db-1', groups: ['db', 'eu'], attributes: { a: 'b' } }, T0);
      expect(again.created).toBe(false);
      expect((await store.list(tenantId)).map((n) => n.groups)).toEqual([['db', 'eu']]);
    });

    it('filters by group and orders by id', async () => {
      const { store } = fixture();
      const tenantId = freshTenant();
      for (const [id, groups] of [
        ['web-2', ['web']],
        ['db-1', ['db']],
        ['web-1', ['web', 'eu']],
      ] as const)
        await store.declare({ tenantId, id, groups: [...groups], attributes: {} }, T0);
      expect((await store.list(tenantId, { group: 'web' })).map((n) => n.id)).toEqual(['web-1', 'web-2']);
      expect((await store.list(tenantId)).map((n) => n.id)).toEqual(['db-1', 'web-1', 'web-2']);
      expect(await store.list(tenantId, { group: 'missing' })).toEqual([]);
    });

    it('keeps each tenant to its own nodes', async () => {
      const { store } = fixture();
      const [mine, theirs] = [freshTenant(), freshTenant()];
      await store.declare({ tenantId: mine, id: 'shared-name', groups: ['web'], attributes: {} }, T0);
      expect(await store.list(theirs)).toEqual([]);
      expect(await store.remove(theirs, 'shared-name')).toBe(false);
      expect((await store.list(mine)).map((n) => n.id)).toEqual(['shared-name']);
    });

    it('removes a node once and answers false the second time', async () => {
      const { store } = fixture();
      const tenantId = freshTenant();
      await store.declare({ tenantId, id: 'db-1', groups: [], attributes: {} }, T0);
      expect(await store.remove(tenantId, 'db-1')).toBe(true);
      expect(await store.remove(tenantId, 'db-1')).toBe(false);
      expect(await store.list(tenantId)).toEqual([]);
    });

    it('shows an agent online while it heartbeats and offline after three missed beats', async () => {
      const { store, setNow, heartbeatMs } = fixture();
      const tenantId = freshTenant();
      const agent = { tenantId, id: 'web-1', groups: ['web'], attributes: {}, workerId: 'w-1' };
      await store.registerAgent(agent, T0);
      setNow(later(heartbeatMs));
      expect(await store.list(tenantId)).toMatchObject([{ id: 'web-1', source: 'agent', status: 'online' }]);
      expect(await store.heartbeatAgent(agent, later(2 * heartbeatMs))).toBe(true);
      setNow(later(5 * heartbeatMs));
      expect(await store.list(tenantId)).toMatchObject([{ status: 'online' }]);
      setNow(later(5 * heartbeatMs + 1));
      expect(await store.list(tenantId)).toMatchObject([
        { status: 'offline', lastSeen: later(2 * heartbeatMs).toISOString() },
      ]);
    });

    it('shows a deregistered agent offline at once and refuses its heartbeats until it registers again', async () => {
      const { store, setNow } = fixture();
      const tenantId = freshTenant();
      const agent = { tenantId, id: 'web-1', groups: ['web'], attributes: {}, workerId: 'w-1' };
      setNow(T0);
      await store.registerAgent(agent, T0);
      await store.deregisterAgent(agent, T0);
      expect(await store.list(tenantId)).toMatchObject([{ status: 'offline' }]);
      expect(await store.heartbeatAgent(agent, T0)).toBe(false);
      await store.registerAgent(agent, T0);
      expect(await store.list(tenantId)).toMatchObject([{ status: 'online' }]);
    });

    it('refuses the heartbeat of a worker that no longer holds the node', async () => {
      const { store } = fixture();
      const tenantId = freshTenant();
      const first = { tenantId, id: 'web-1', groups: ['web'], attributes: {}, workerId: 'w-1' };
      await store.registerAgent(first, T0);
      await store.registerAgent({ ...first, workerId: 'w-2' }, T0);
      expect(await store.heartbeatAgent(first, T0)).toBe(false);
      await store.deregisterAgent(first, T0);
      expect(await store.heartbeatAgent({ ...first, workerId: 'w-2' }, T0)).toBe(true);
      await store.remove(tenantId, 'web-1');
      expect(await store.heartbeatAgent({ ...first, workerId: 'w-2' }, T0)).toBe(false);
    });

    it('refuses to declare over an agent node, and an agent over a declared node', async () => {
      const { store } = fixture();
      const tenantId = freshTenant();
      await store.registerAgent({ tenantId, id: 'web-1', groups: ['web'], attributes: {}, workerId: 'w-1' }, T0);
      await expect(store.declare({ tenantId, id: 'web-1', groups: [], attributes: {} }, T0)).rejects.toBeInstanceOf(
        ConflictError,
      );
      await store.declare({ tenantId, id: 'db-1', groups: [], attributes: {} }, T0);
      await expect(
        store.registerAgent({ tenantId, id: 'db-1', groups: [], attributes: {}, workerId: 'w-2' }, T0),
      ).rejects.toBeInstanceOf(ConflictError);
      expect((await store.list(tenantId)).map((n) => [n.id, n.source])).toEqual([
        ['db-1', 'declared'],
        ['web-1', 'agent'],
      ]);
    });
  });
}
