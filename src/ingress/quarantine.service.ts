import { Injectable } from '@nestjs/common';
import type { QuarantineQuery } from '../event-log/event-log.dto.js';
import type { OwnerScope } from '../common/owner-scope.js';
import { QuarantineRepository } from './quarantine.repository.js';

const utf8 = new TextDecoder('utf-8', { fatal: true });

@Injectable()
export class QuarantineService {
  constructor(private readonly repository: QuarantineRepository) {}

  /**
   * Rejected deliveries, oldest first (with `before`, newest first; within `scope`: those naming one
   * of its owners); a body that is not UTF-8 text is given in base64.
   */
  async list({ after, before, limit }: QuarantineQuery, scope: OwnerScope = null) {
    const entries = await this.repository.list({ after, before, limit }, scope ?? undefined);
    const last = entries.at(-1);
    return {
      data: entries.map((entry) => {
        const text = decode(entry.body);
        return {
          id: entry.id,
          received_at: entry.receivedAt.toISOString(),
          status: entry.status,
          reason: entry.reason,
          field: entry.field,
          owner_id: entry.ownerId,
          content_type: entry.contentType,
          sha256: entry.sha256.toString('hex'),
          body: text ?? entry.body.toString('base64'),
          body_encoding: text === undefined ? 'base64' : 'utf-8',
        };
      }),
      next_cursor: entries.length === limit && last ? String(last.id) : null,
    };
  }
}

function decode(body: Buffer): string | undefined {
  try {
    return utf8.decode(body);
  } catch {
    return undefined;
  }
}
