import { Injectable } from '@nestjs/common';
import type { ChangePosition } from '../changes/change.js';
import { CursorMove, SinkRepository } from './sink.repository.js';

interface Pending {
  move: CursorMove;
  resolve(done: boolean): void;
  reject(error: unknown): void;
}

/** One kind of write gathered for one statement: what was asked since the last flush. */
class Gathered {
  private pending: Pending[] = [];
  private scheduled = false;

  constructor(private readonly write: (moves: readonly CursorMove[]) => Promise<Set<string>>) {}

  ask(move: CursorMove): Promise<boolean> {
    return new Promise((resolve, reject) => {
      this.pending.push({ move, resolve, reject });
      if (this.scheduled) return;
      this.scheduled = true;
      setImmediate(() => void this.flush());
    });
  }

  private async flush(): Promise<void> {
    const pending = this.pending;
    this.pending = [];
    this.scheduled = false;
    try {
      const done = await this.write(pending.map(({ move }) => move));
      for (const { move, resolve } of pending) resolve(done.has(move.id));
    } catch (error) {
      for (const { reject } of pending) reject(error);
    }
  }
}

/**
 * The writes each sink's delivery makes (its batch's end before it is sent, its cursor after),
 * gathered: every sink asking in the same turn of the event loop (the sinks a page of the shared
 * read woke, say) shares one statement and one commit, instead of one commit, and so one WAL
 * flush, per sink. Each is a compare-and-set on the sink's cursor, as alone.
 */
@Injectable()
export class SinkWrites {
  private readonly inflights = new Gathered((moves) => this.repository.setInflights(moves));
  private readonly moves = new Gathered((moves) => this.repository.moveCursors(moves));

  constructor(private readonly repository: SinkRepository) {}

  /** Records the end `last` of the batch about to be sent after `cursor`; false if the cursor had moved. */
  setInflight(id: string, cursor: ChangePosition, last: ChangePosition): Promise<boolean> {
    return this.inflights.ask({ id, from: cursor, to: last });
  }

  /** Moves the cursor from `from` to `to` (a delivered batch); false if it had moved meanwhile (a replay). */
  moveCursor(id: string, from: ChangePosition, to: ChangePosition): Promise<boolean> {
    return this.moves.ask({ id, from, to });
  }
}
