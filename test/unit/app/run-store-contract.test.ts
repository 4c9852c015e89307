import { makeInMemoryStores } from '../../../shared/app/ports/in-memory/runs.js';
import { runStoreContract } from '../../contract/run-store.js';

runStoreContract('in memory', () => makeInMemoryStores());
