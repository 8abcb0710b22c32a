import { QueryFailedError } from 'typeorm';
import { AppError } from '../common/app-error.js';
import { AppendRejectedError, AppendUnconfirmedError } from '../event-log/append-batcher.js';
import { DeliveryRejection } from '../ingress/webhook-event.parser.js';

/** pg-pool's error when no session of the pool came free in time. */
const POOL_TIMEOUT = 'timeout exceeded when trying to connect';

/**
 * Whether an error is a fault of the world a reconcile run works in — the upstream, the database,
 * the network, data that cannot be logged — and so is reported and the run goes on. Anything else
 * (a TypeError …) is taken for a bug: the run is saved as failed, and the error thrown on.
 */
export function isOperationalFault(error: unknown): boolean {
  if (
    error instanceof AppError ||
    error instanceof QueryFailedError ||
    error instanceof DeliveryRejection ||
    error instanceof AppendRejectedError ||
    error instanceof AppendUnconfirmedError
  )
    return true;
  // PostgreSQL errors (SQLSTATE) and Node's system errors (ECONNRESET …) carry a string code;
  // pg-pool's wait for a free session, past its timeout, only says so.
  if (!(error instanceof Error)) return false;
  return typeof (error as { code?: unknown }).code === 'string' || error.message === POOL_TIMEOUT;
}
