/** How one emulator instance behaves; `menu-sync emulator` flags map onto these (docs/reference.md §9). */
export interface EmulatorOptions {
  host: string;
  /** 0 picks a free port. */
  port: number;
  /** Seeds every fault decision, so a run with the same seed and the same changes repeats exactly. */
  seed: number;
  /** `expires_in` of issued access tokens, in seconds. */
  tokenLifetimeSeconds: number;
  /** The delays before retries 1–5, in milliseconds, each counted from the end of the failed attempt. */
  retryScheduleMs: number[];
  /** An attempt not answered within this many milliseconds counts as failed (status 0). */
  deliveryTimeoutMs: number;
  /** Deliveries in flight at once. */
  deliveryConcurrency: number;
  /** The one application the emulator knows. */
  clientId: string;
  clientSecret: string;
  /** Page size of the snapshot and order list documents (`page[size]` may ask for less). */
  pageSize: number;
  /** Seed the demo store and menu at start. */
  demoData: boolean;
}

export const EMULATOR_OPTIONS = Symbol('EMULATOR_OPTIONS');

/** Production-like: retries after 1 min, 5 min, 30 min, 2 h and 6 h. */
export const DEFAULT_RETRY_SCHEDULE_MS = [60_000, 300_000, 1_800_000, 7_200_000, 21_600_000];

export const DEFAULT_EMULATOR_OPTIONS: EmulatorOptions = {
  host: '127.0.0.1',
  port: 4010,
  seed: 1,
  tokenLifetimeSeconds: 21_600,
  retryScheduleMs: DEFAULT_RETRY_SCHEDULE_MS,
  deliveryTimeoutMs: 10_000,
  deliveryConcurrency: 4,
  clientId: 'demo-client',
  clientSecret: 'demo-secret',
  pageSize: 100,
  demoData: true,
};

/** The platform retries a failed delivery at most this many times (spec: Limits). */
export const MAX_RETRIES = 5;

export function emulatorOptions(overrides: Partial<EmulatorOptions> = {}): EmulatorOptions {
  const options = { ...DEFAULT_EMULATOR_OPTIONS, ...overrides };
  if (options.retryScheduleMs.length !== MAX_RETRIES) {
    throw new Error(
      `the retry schedule lists the delays before retries 1–${MAX_RETRIES}: give ${MAX_RETRIES} values, got ${options.retryScheduleMs.length}`,
    );
  }
  return options;
}
