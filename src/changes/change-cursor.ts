import { AppError } from '../common/app-error.js';
import { ChangePosition, START } from './change.js';

/** A cursor that is not one this daemon gave out: 400 naming the field it came in. */
export class MalformedChangeCursorError extends AppError {
  constructor(field: string) {
    super('malformed_change_cursor', 400, 'Bad Request', `${field} must be a cursor given out by this daemon`, {
      field,
    });
  }
}

/** A cursor below the compaction horizon: the changes after it are no longer all kept. */
export class ExpiredChangeCursorError extends AppError {
  constructor(field: string) {
    super(
      'change_cursor_expired',
      410,
      'Gone',
      `${field} is older than the change log keeps (CHANGES_RETENTION): bootstrap again from GET /api/v1/menu or the lists, then follow their changes_cursor`,
      { field },
    );
  }
}

const XID8_MAX = 18446744073709551615n;
const BIGINT_MAX = 9223372036854775807n;

/** Opaque, URL-safe: base64url of `<transaction id>.<seq>`. */
export function encodeChangeCursor(position: ChangePosition): string {
  return Buffer.from(`${position.transactionId}.${position.seq}`, 'utf8').toString('base64url');
}

export function decodeChangeCursor(cursor: string, field = 'after'): ChangePosition {
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(cursor)) throw new MalformedChangeCursorError(field);
  const match = /^(0|[1-9][0-9]{0,19})\.(0|[1-9][0-9]{0,18})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!match || BigInt(match[1]) > XID8_MAX || BigInt(match[2]) > BIGINT_MAX)
    throw new MalformedChangeCursorError(field);
  return { transactionId: match[1], seq: match[2] };
}

/** Reader order: -1, 0 or 1. */
export function comparePositions(a: ChangePosition, b: ChangePosition): number {
  const [ax, bx] = [BigInt(a.transactionId), BigInt(b.transactionId)];
  if (ax !== bx) return ax < bx ? -1 : 1;
  const [as, bs] = [BigInt(a.seq), BigInt(b.seq)];
  return as === bs ? 0 : as < bs ? -1 : 1;
}

/** Whether changes after `position` were compacted away (START, the start of the log, never is). */
export function compactedAway(position: ChangePosition, compactedTo: ChangePosition): boolean {
  return comparePositions(position, START) > 0 && comparePositions(position, compactedTo) < 0;
}
