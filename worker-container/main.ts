// Wired in the worker issue.
export {};
