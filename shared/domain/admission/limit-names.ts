/** The limits admission holds a run back by; a throttled run names the one that held it. */
export const LIMIT_NAMES = [
  'maxActive',
  'maxPerHour',
  'burst',
  'emergency.maxActive',
  'paused',
  'throttle',
  'breaker',
  'backlog',
] as const;
export type LimitName = (typeof LIMIT_NAMES)[number];
