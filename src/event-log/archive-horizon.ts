import { AppError } from '../common/app-error.js';

/** A row of `event_log_archives` as the horizon needs it. */
export interface ArchiveRow {
  state: 'exported' | 'archived' | 'restored';
  lowerBound: number;
  upperBound: number;
  file: string;
  bytes: number;
  lastOccurredAt: Date | null;
}

/** Where a read falls across the horizon: what its 410 names. */
export interface AcrossHorizon {
  /** A position's answer: the horizon position; an `as_of`'s: the instant (ISO 8601). */
  archivedBefore: number | string;
  file: string;
}

/**
 * The archive horizon (docs/reference.md §8, Reads across the archive horizon), from the rows of
 * `event_log_archives`: the highest `upper_bound` of the `archived` rows; a position below it is
 * archived unless a `restored` row's range holds it. An `as_of` is across it when older than the
 * newest `last_occurred_at` of the `archived` rows.
 */
export class Horizon {
  /** 0 when nothing is archived. */
  readonly position: number;
  /** The instant an `as_of` must not be older than; null when nothing is archived. */
  readonly asOfBefore: Date | null;
  /**
   * Whether `as_of` folds the archive base too (docs/reference.md §8): once any partition is
   * exported, so that the base is read before the archive folds the partition into it and drops it.
   */
  readonly readsArchiveBase: boolean;
  /** The `archived` rows, by upper bound. */
  private readonly archived: ArchiveRow[];
  private readonly restored: ArchiveRow[];

  constructor(rows: readonly ArchiveRow[]) {
    this.archived = rows.filter((row) => row.state === 'archived').sort((a, b) => a.upperBound - b.upperBound);
    this.restored = rows.filter((row) => row.state === 'restored');
    this.position = this.archived.at(-1)?.upperBound ?? 0;
    this.readsArchiveBase = rows.length > 0;
    const instants = this.archived.flatMap((row) =>
      row.lastOccurredAt === null ? [] : [row.lastOccurredAt.getTime()],
    );
    this.asOfBefore = instants.length === 0 ? null : new Date(Math.max(...instants));
  }

  /** The archived files and their bytes. */
  get files(): { count: number; bytes: number; newest: string | null } {
    return {
      count: this.archived.length,
      bytes: this.archived.reduce((sum, row) => sum + row.bytes, 0),
      newest: this.archived.at(-1)?.file ?? null,
    };
  }

  /** Undefined when `position` is in the log (above the horizon, or restored). */
  ofPosition(position: number): AcrossHorizon | undefined {
    if (position >= this.position) return undefined;
    if (this.restored.some((row) => row.lowerBound <= position && position < row.upperBound)) return undefined;
    // Below the horizon and in no row's range (a gap between archived files): the next file up.
    const holder = this.archived.find((row) => position < row.upperBound) ?? this.archived[this.archived.length - 1];
    return { archivedBefore: this.position, file: holder.file };
  }

  /** Undefined when an `as_of` at `asOf` is answered from the log. */
  ofAsOf(asOf: Date): AcrossHorizon | undefined {
    if (this.asOfBefore === null || asOf.getTime() >= this.asOfBefore.getTime()) return undefined;
    return { archivedBefore: this.asOfBefore.toISOString(), file: this.files.newest ?? '' };
  }
}

/** A read of history the log no longer holds: 410 naming the horizon and the archive file. */
export class ArchivedError extends AppError {
  constructor(detail: string, across: AcrossHorizon) {
    super('archived', 410, 'Gone', detail, { archived_before: across.archivedBefore, archive_file: across.file });
  }
}

export function archivedPosition(position: number, across: AcrossHorizon): ArchivedError {
  return new ArchivedError(
    `Position ${position} is archived: the log holds the positions from ${across.archivedBefore} on, and this one is in the archive file ${across.file} (menu-sync archive restore puts its range back).`,
    across,
  );
}

export function archivedAsOf(asOf: Date, across: AcrossHorizon): ArchivedError {
  return new ArchivedError(
    `as_of ${asOf.toISOString()} is older than the archive horizon: events that occurred up to ${across.archivedBefore} are in the archive (newest file ${across.file}), so the state at that instant cannot be folded from the log. Ask for an as_of at or after ${across.archivedBefore}.`,
    across,
  );
}
