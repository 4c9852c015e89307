/**
 * Where the bench's DynamoDB Local keeps its tables: in memory unless `CAPSTAN_BENCH_DYNAMODB=disk`.
 * On disk it commits every write to one file under one lock for all its tables, so a lease's
 * single-item write waits for whatever transaction is committing; a DynamoDB table in AWS does
 * neither, and in memory the latencies measure Capstan rather than the disk.
 */
export const DYNAMODB_STORAGE: 'memory' | 'disk' = process.env.CAPSTAN_BENCH_DYNAMODB === 'disk' ? 'disk' : 'memory';

/** Where DynamoDB Local kept its tables, said in every section of the report. */
export const STORAGE_NOTE =
  DYNAMODB_STORAGE === 'memory'
    ? 'DynamoDB Local in memory (`CAPSTAN_BENCH_DYNAMODB=disk` for on disk)'
    : 'DynamoDB Local on disk (`CAPSTAN_BENCH_DYNAMODB=disk`)';
