export const handler = async (): Promise<void> => {
  throw new Error('not implemented');
};
