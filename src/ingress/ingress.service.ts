import { Injectable, Logger } from '@nestjs/common';
import { ActivityCounter } from '../activity/activity-counter.service.js';
import { AppError, NotFoundError, ServiceUnavailableError } from '../common/app-error.js';
import { AppConfig } from '../config/app-config.js';
import { AppendBatcher, AppendRejectedError, AppendUnconfirmedError } from '../event-log/append-batcher.js';
import type { NewLogEntry } from '../event-log/log-entry.js';
import { RawBodySealer } from '../event-log/raw-body-sealer.js';
import { MetricsService } from '../observability/metrics.service.js';
import { QuarantineRepository } from './quarantine.repository.js';
import { ownerOfRejected } from './rejected-owner.js';
import { DeliveryRejection, ParsedDelivery, parseDelivery } from './webhook-event.parser.js';
import { redactKeyEverywhere } from '../event-log/webhook-key.redaction.js';
import { WebhookKeyRegistry } from './webhook-key.registry.js';
import { createHash } from 'node:crypto';

export interface Delivery {
  key: string;
  body: Buffer;
  contentType: string | undefined;
  receivedAt: Date;
}

export type DeliveryOutcome =
  | { status: 202; body: { status: 'accepted'; position: number; event_id: string } }
  | { status: 200; body: { status: 'duplicate'; position: number } };

const RETRY_AFTER_SECONDS = 5;

@Injectable()
export class IngressService {
  private readonly logger = new Logger(IngressService.name);

  constructor(
    private readonly keys: WebhookKeyRegistry,
    private readonly batcher: AppendBatcher,
    private readonly quarantine: QuarantineRepository,
    private readonly metrics: MetricsService,
    private readonly config: AppConfig,
    private readonly sealer: RawBodySealer,
    private readonly activity: ActivityCounter,
  ) {}

  /** Validates a delivery and answers only once it is committed to the event log (docs/reference.md §2). */
  async receive(delivery: Delivery): Promise<DeliveryOutcome> {
    const keyId = this.keys.resolve(delivery.key);
    if (keyId === null) {
      this.metrics.webhookDeliveries.inc({ outcome: 'unknown_key' });
      throw new NotFoundError('Not Found');
    }
    return this.receiveUnder(keyId, delivery);
  }

  /** As `receive`, for a delivery whose key the caller resolved to `keyId`. */
  async receiveUnder(keyId: string, delivery: Delivery): Promise<DeliveryOutcome> {
    let parsed: ParsedDelivery;
    try {
      parsed = parseDelivery(delivery.body, delivery.contentType, delivery.key);
    } catch (error) {
      if (!(error instanceof DeliveryRejection)) throw error;
      return this.reject(delivery, keyId, error.status, error.field, error.message);
    }
    try {
      const result = await this.batcher.append(this.entryOf(parsed, delivery, keyId));
      if (!result.inserted) {
        this.metrics.webhookDeliveries.inc({ outcome: 'duplicate' });
        return { status: 200, body: { status: 'duplicate', position: result.position } };
      }
      if (!parsed.handled) {
        this.logger.warn({
          msg: 'accepted an event type outside the spec',
          eventType: parsed.eventType,
          position: result.position,
        });
      }
      this.metrics.webhookDeliveries.inc({ outcome: parsed.handled ? 'accepted' : 'unhandled' });
      this.activity.add('events', 'webhook');
      return { status: 202, body: { status: 'accepted', position: result.position, event_id: parsed.eventId } };
    } catch (error) {
      if (error instanceof AppendRejectedError) {
        return this.reject(
          delivery,
          keyId,
          400,
          'body',
          `the database refused a value of this event: ${error.message}`,
        );
      }
      if (error instanceof AppendUnconfirmedError) {
        this.metrics.webhookDeliveries.inc({ outcome: 'unavailable' });
        throw new ServiceUnavailableError('The event could not be stored; retry later.', RETRY_AFTER_SECONDS);
      }
      throw error;
    }
  }

  /** The log entry of a valid delivery: a key redacted from its bytes is kept sealed to restore them (keys are secrets). */
  private entryOf(parsed: ParsedDelivery, delivery: Delivery, keyId: string): NewLogEntry {
    // Written out, not spread: this runs for every delivery.
    return {
      eventId: parsed.eventId,
      eventType: parsed.eventType,
      subjectType: parsed.subjectType,
      subjectId: parsed.subjectId,
      ownerId: parsed.ownerId,
      occurredAt: parsed.occurredAt,
      eventSeq: parsed.eventSeq,
      handled: parsed.handled,
      payload: parsed.payload,
      payloadUtf8: parsed.payloadUtf8,
      sha256: parsed.sha256,
      source: 'webhook',
      receivedAt: delivery.receivedAt,
      keyId,
      contentType: delivery.contentType ?? null,
      rawBody: parsed.sealWhole ? this.sealer.seal(parsed.eventId, delivery.body) : parsed.rawBody,
      rawSealed: parsed.sealWhole,
      rawKey: parsed.keyAt === null ? null : this.sealer.sealKey(keyId, delivery.key),
      rawKeyAt: parsed.keyAt,
    };
  }

  /** Quarantines the body with the key redacted (the hash stays that of the bytes received), then refuses. */
  private async reject(
    delivery: Delivery,
    keyId: string,
    status: 400 | 415,
    field: string,
    detail: string,
  ): Promise<never> {
    this.metrics.webhookDeliveries.inc({ outcome: status === 415 ? 'unsupported_media_type' : 'rejected' });
    this.activity.add('failures', 'webhook');
    this.logger.warn({ msg: 'rejected a delivery', status, field, detail: detail.slice(0, 200) });
    await this.quarantine
      .add(
        {
          receivedAt: delivery.receivedAt,
          status,
          reason: detail,
          field,
          keyId,
          contentType: delivery.contentType ?? null,
          sha256: createHash('sha256').update(delivery.body).digest(),
          body: redactKeyEverywhere(delivery.body, delivery.key),
          ownerId: ownerOfRejected(delivery.body),
        },
        this.config.QUARANTINE_MAX_ENTRIES,
      )
      .catch((error) => this.logger.warn({ msg: 'could not quarantine a rejected delivery', err: error }));
    throw new AppError(
      status === 415 ? 'unsupported_media_type' : 'invalid_event',
      status,
      status === 415 ? 'Unsupported Media Type' : 'Bad Request',
      detail,
      { field },
    );
  }
}
