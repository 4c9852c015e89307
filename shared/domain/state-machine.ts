import { IllegalTransitionError } from './errors.js';

/** A finite state machine given as an explicit table: each state lists the states it may move to. */
export interface StateMachine<S extends string> {
  readonly name: string;
  readonly states: readonly S[];
  /** True when `from -> to` is an edge of the table. */
  can(from: S, to: S): boolean;
  /** Returns `to` when the edge exists; throws {@link IllegalTransitionError} otherwise. */
  transition(from: S, to: S): S;
  /** States with no outgoing edge. */
  isTerminal(state: S): boolean;
}

/** Builds a {@link StateMachine} from its transition table. */
export function defineStateMachine<S extends string>(
  name: string,
  table: { readonly [K in S]: readonly S[] },
): StateMachine<S> {
  const states = Object.keys(table) as S[];
  return {
    name,
    states,
    can: (from, to) => table[from].includes(to),
    transition(from, to) {
      if (!table[from].includes(to)) throw new IllegalTransitionError(name, from, to);
      return to;
    },
    isTerminal: (state) => table[state].length === 0,
  };
}
