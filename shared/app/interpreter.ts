/** The run interpreter's two use cases (Plan and Dispatch) and the ports they drive, in one place to import from. */
export type { CommandQueue, RejectedCommand, TaskCallbacks } from './ports/interpreter.js';
export {
  MAX_TASK_FAULTS,
  makePlan,
  makePlanNext,
  type InterpreterDeps,
  type PlanDeps,
  type Planned,
  type TaskFaults,
} from './plan.js';
export { makeDispatch, type DispatchDeps } from './dispatch.js';
export { commandFor } from '../domain/step-command.js';
