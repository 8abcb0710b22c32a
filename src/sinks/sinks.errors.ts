import { AppError } from '../common/app-error.js';

export class SinkNotFoundError extends AppError {
  constructor(id: string) {
    super('sink_not_found', 404, 'Not Found', `No sink ${id}.`);
  }
}

/** A well-formed request this daemon cannot carry out as configured (a NATS sink without NATS_URL). */
export class SinkUnprocessableError extends AppError {
  constructor(detail: string, field: string) {
    super('sink_unprocessable', 422, 'Unprocessable Content', detail, { field });
  }
}
