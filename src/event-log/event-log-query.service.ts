import { Injectable } from '@nestjs/common';
import { NotFoundError } from '../common/app-error.js';
import { OwnerScope, withinScope } from '../common/owner-scope.js';
import { ArchiveHorizonService } from './archive-horizon.service.js';
import { EventsQuery } from './event-log.dto.js';
import { EventLogRepository } from './event-log.repository.js';
import { LogEntry, LogEntrySummary } from './log-entry.js';
import { restoreKey } from './webhook-key.redaction.js';
import { RawBodySealer } from './raw-body-sealer.js';

/**
 * The read side of the log for `/api/v1/events` (docs/reference.md §5), within a token's owner
 * scope (§12): an entry of another owner, or of none, is not found, as one never written.
 */
@Injectable()
export class EventLogQueryService {
  constructor(
    private readonly repository: EventLogRepository,
    private readonly sealer: RawBodySealer,
    private readonly horizon: ArchiveHorizonService,
  ) {}

  async list(query: EventsQuery, scope: OwnerScope = null) {
    const entries = await this.repository.list({
      after: query.after,
      before: query.before,
      limit: query.limit,
      eventType: query.event_type,
      subjectType: query.subject_type,
      subjectId: query.subject_id,
      ownerIds: scope ?? undefined,
    });
    const last = entries.at(-1);
    return {
      data: entries.map(summary),
      next_cursor: entries.length === query.limit && last ? String(last.position) : null,
    };
  }

  /** `GET /api/v1/owners`: the owners the log knows, with the span of their events' occurred_at. */
  async owners(scope: OwnerScope = null) {
    const owners = await this.repository.owners(scope ?? undefined);
    return {
      data: owners.map((owner) => ({
        owner_id: owner.ownerId,
        events: owner.events,
        first_occurred_at: owner.first.toISOString(),
        last_occurred_at: owner.last.toISOString(),
      })),
    };
  }

  /**
   * The entry with its payload, as JSON text: the stored payload is embedded as it is, so any
   * document the log accepted (however deeply nested) is answered without being parsed again.
   */
  async get(position: number, scope: OwnerScope = null): Promise<string> {
    const entry = await this.find(position, scope);
    const head = JSON.stringify({ ...summary(entry), sha256: entry.sha256.toString('hex') });
    return `${head.slice(0, -1)},"payload":${entry.payload}}`;
  }

  /** The exact bytes received (opened when they were sealed for holding the webhook key). */
  async raw(position: number): Promise<{ contentType: string; body: Buffer }> {
    const entry = await this.find(position);
    let body = entry.rawSealed ? this.sealer.open(entry.eventId, entry.raw) : entry.raw;
    if (entry.rawKey !== null && entry.rawKeyAt !== null)
      body = restoreKey(body, this.sealer.openKey(entry.keyId ?? '', entry.rawKey), entry.rawKeyAt);
    return { contentType: entry.contentType ?? 'application/json', body };
  }

  /** An entry the log holds; else, below the archive horizon, the 410 naming its archive file (§8). */
  private async find(position: number, scope: OwnerScope = null): Promise<LogEntry> {
    const entry = await this.repository.findByPosition(position);
    if (!entry) this.horizon.checkPosition(position);
    if (!entry || !withinScope(scope, entry.ownerId)) throw new NotFoundError(`No event at position ${position}.`);
    return entry;
  }
}

function summary(entry: LogEntrySummary) {
  return {
    position: entry.position,
    event_id: entry.eventId,
    event_type: entry.eventType,
    subject: { type: entry.subjectType, id: entry.subjectId },
    owner_id: entry.ownerId,
    occurred_at: entry.occurredAt.toISOString(),
    received_at: entry.receivedAt.toISOString(),
    source: entry.source,
    handled: entry.handled,
  };
}
