import { makeInMemoryInventoryStore } from '../../../shared/app/ports/in-memory/inventory.js';
import { inventoryStoreContract } from '../../contract/inventory-store.js';

let now = new Date('2026-03-01T00:00:00.000Z');
const store = makeInMemoryInventoryStore({ clock: { now: () => now }, heartbeatMs: 15_000 });

inventoryStoreContract('in memory', () => ({ store, setNow: (at) => (now = at), heartbeatMs: 15_000 }));
