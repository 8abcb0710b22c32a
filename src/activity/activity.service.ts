import { Injectable } from '@nestjs/common';
import { BadRequestError } from '../common/app-error.js';
import { ActivityQuery } from './activity.dto.js';
import { ActivityRepository } from './activity.repository.js';

const MINUTE_MS = 60_000;
const DAY_MS = 24 * 60 * MINUTE_MS;
/** The longest span one answer covers: a week of minutes. */
const MAX_SPAN_MS = 7 * DAY_MS;

/** One minute of `GET /api/v1/activity`. */
export interface ActivityMinute {
  minute: string;
  events: number;
  changes: number;
  deliveries: Record<string, number>;
  failures: Record<string, number>;
}

/**
 * The activity history (docs/reference.md §11): every minute from `since` to `until`, those with
 * nothing counted included, so that a chart needs no gaps filled. PostgreSQL sums the rows.
 */
@Injectable()
export class ActivityService {
  constructor(private readonly repository: ActivityRepository) {}

  async series(query: ActivityQuery) {
    const until = query.until ?? new Date();
    const since = query.since ?? new Date(until.getTime() - DAY_MS);
    if (since > until) throw new BadRequestError('since must not be after until', 'since');
    if (until.getTime() - since.getTime() > MAX_SPAN_MS)
      throw new BadRequestError('since and until may be at most 7 days apart', 'since');
    const first = since.getTime() - (since.getTime() % MINUTE_MS);
    const minutes: ActivityMinute[] = [];
    for (let at = first; at <= until.getTime(); at += MINUTE_MS)
      minutes.push({ minute: new Date(at).toISOString(), events: 0, changes: 0, deliveries: {}, failures: {} });
    for (const row of await this.repository.series(since, until)) {
      const minute = minutes[(row.minute.getTime() - first) / MINUTE_MS];
      if (minute === undefined) continue;
      const count = Number(row.count);
      if (row.kind === 'events') minute.events += count;
      else if (row.kind === 'changes') minute.changes += count;
      else if (row.kind === 'deliveries') minute.deliveries[row.key] = count;
      else if (row.kind === 'failures') minute.failures[row.key] = count;
    }
    return { since: new Date(first).toISOString(), until: until.toISOString(), minutes };
  }
}
