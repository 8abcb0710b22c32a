import { Inject, Injectable } from '@nestjs/common';
import { EMULATOR_OPTIONS } from './emulator-options.js';
import type { EmulatorOptions } from './emulator-options.js';
import { controlError } from './emulator-http.error.js';
import { seededUnit } from './seeded-random.js';

/**
 * The fault settings of `POST /_emulator/faults` (docs/reference.md §9). The first four are the contract's;
 * the rest are additions for the token and API faults. All zero (or false) means no fault.
 */
export interface Faults {
  /** Probability that a delivery is sent twice. */
  duplicate_rate: number;
  /** Deliveries are held until this many are waiting (or a short idle flush), then sent shuffled. */
  reorder_window: number;
  /** Each delivery's first N attempts are answered as failed (status 0) before a real send. */
  fail_first_attempts: number;
  /** A delay before each send, in milliseconds. */
  delay_ms: number;
  /** Access tokens stop working after this many seconds, whatever their `expires_in` says (0: off). */
  token_expiry_seconds: number;
  /** The next N token endpoint requests are answered `503 temporarily_unavailable`. */
  token_endpoint_failures: number;
  /** Refresh grants answer without a `refresh_token`: the old one stays valid (no rotation). */
  keep_refresh_tokens: boolean;
  /** The next N API requests (snapshot, orders, webhook endpoints) are answered with `api_error_status`. */
  api_failures: number;
  /** The status of injected API failures: e.g. 500, 503, or 429 (with `Retry-After: 1`). */
  api_error_status: number;
  /** Snapshot and order list requests answer 200 with a body that is not JSON:API. */
  api_garbage: boolean;
  /** `GET /oauth/token/info` answers this status (404: a server without the endpoint; 0: off). */
  token_info_status: number;
}

export const NO_FAULTS: Faults = {
  duplicate_rate: 0,
  reorder_window: 0,
  fail_first_attempts: 0,
  delay_ms: 0,
  token_expiry_seconds: 0,
  token_endpoint_failures: 0,
  keep_refresh_tokens: false,
  api_failures: 0,
  api_error_status: 500,
  api_garbage: false,
  token_info_status: 0,
};

const LIMITS: Record<string, [number, number]> = {
  duplicate_rate: [0, 1],
  reorder_window: [0, 10_000],
  fail_first_attempts: [0, 1_000],
  delay_ms: [0, 600_000],
  token_expiry_seconds: [0, 31_536_000],
  token_endpoint_failures: [0, 1_000_000],
  api_failures: [0, 1_000_000],
  api_error_status: [0, 599],
  token_info_status: [0, 599],
};

/** The current faults, the seed every decision derives from, and the counters of one-shot faults. */
@Injectable()
export class FaultSettings {
  private faults: Faults = { ...NO_FAULTS };

  constructor(@Inject(EMULATOR_OPTIONS) private readonly options: EmulatorOptions) {}

  get current(): Faults {
    return { ...this.faults };
  }

  /** Replaces the settings: fields left out fall back to none. */
  replace(body: unknown): Faults {
    this.faults = parseFaults(body);
    return this.current;
  }

  /** A deterministic draw in [0, 1) for one decision, from the seed and what it is about. */
  draw(...parts: (string | number)[]): number {
    return seededUnit(this.options.seed, ...parts);
  }

  get seed(): number {
    return this.options.seed;
  }

  /** Takes one of the next-N token endpoint failures, if any is left. */
  takeTokenEndpointFailure(): boolean {
    if (this.faults.token_endpoint_failures <= 0) return false;
    this.faults.token_endpoint_failures -= 1;
    return true;
  }

  /** Takes one of the next-N API failures, if any is left. */
  takeApiFailure(): boolean {
    if (this.faults.api_failures <= 0) return false;
    this.faults.api_failures -= 1;
    return true;
  }
}

function parseFaults(body: unknown): Faults {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw controlError(400, 'the body must be a JSON object of fault settings');
  const faults: Faults = { ...NO_FAULTS };
  for (const [field, value] of Object.entries(body)) {
    if (!(field in NO_FAULTS)) throw controlError(422, `unknown fault setting ${field}`, field);
    if (typeof NO_FAULTS[field as keyof Faults] === 'boolean') {
      if (typeof value !== 'boolean' && value !== 0 && value !== 1)
        throw controlError(422, `${field} must be a boolean`, field);
      (faults as unknown as Record<string, unknown>)[field] = Boolean(value);
      continue;
    }
    const [min, max] = LIMITS[field];
    const integer = field !== 'duplicate_rate';
    if (
      typeof value !== 'number' ||
      !Number.isFinite(value) ||
      value < min ||
      value > max ||
      (integer && !Number.isInteger(value))
    ) {
      throw controlError(422, `${field} must be ${integer ? 'an integer' : 'a number'} from ${min} to ${max}`, field);
    }
    if (field === 'api_error_status' && value !== 0 && (value as number) < 400)
      throw controlError(422, 'api_error_status must be 0 (the default, 500) or from 400 to 599', field);
    if (field === 'token_info_status' && value !== 0 && (value as number) < 400)
      throw controlError(422, 'token_info_status must be 0 (off) or from 400 to 599', field);
    (faults as unknown as Record<string, unknown>)[field] = value;
  }
  if (faults.api_error_status === 0) faults.api_error_status = NO_FAULTS.api_error_status;
  return faults;
}
