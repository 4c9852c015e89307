/** True when a DynamoDB write was refused by its condition (not any other failure). */
export function isConditionFailure(error: unknown): boolean {
  return (error as Error).name === 'ConditionalCheckFailedException';
}

/**
 * Runs a conditional write: its result, or `refused` when the condition did not hold.
 * Any other error is thrown.
 */
export async function conditionally<T, R>(write: () => Promise<T>, refused: R): Promise<T | R> {
  try {
    return await write();
  } catch (error) {
    if (isConditionFailure(error)) return refused;
    throw error;
  }
}
