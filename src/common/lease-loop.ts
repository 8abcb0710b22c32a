import type { Logger } from '@nestjs/common';
import type { QueryRunner } from 'typeorm';
import { AdvisoryLease } from '../database/advisory-lease.js';
import { WakeableSleep } from './wakeable-sleep.js';

export type LeaseState = 'starting' | 'running' | 'standby' | 'stopped' | 'failing';

const STANDBY_POLL_MS = 2000;
const RETRY_MS = 1000;

export interface LeaseWork {
  /** What holds the lease, in the logs: "projector", "sink dispatcher". */
  role: string;
  logger: Logger;
  /**
   * The work of the lease holder, on the lease's connection: it returns once the loop stops
   * (`stopping`) and throws on a failure, after which the lease is released and tried again.
   */
  whileHeld(runner: QueryRunner): Promise<void>;
  /** Ends what `whileHeld` left running, after a failure and at the stop, before the lease is released. */
  afterHeld?(): Promise<void>;
}

/**
 * The loop of a daemon that works only while it holds an advisory lease (the projector, the sink
 * dispatcher): it tries the lease, works while it holds it, stands by polling while another
 * session holds it, and after a failure releases it and tries again, so a standby daemon takes
 * over when the active one's session ends.
 */
export class LeaseLoop {
  state: LeaseState = 'starting';
  /** The sleep of the work: woken when there is new work, stopped with the loop. */
  readonly alarm = new WakeableSleep();
  private loop?: Promise<void>;

  constructor(
    private readonly lease: AdvisoryLease,
    private readonly work: LeaseWork,
  ) {}

  get stopping(): boolean {
    return this.alarm.isStopped;
  }

  start(): void {
    this.loop ??= this.run();
  }

  async stop(): Promise<void> {
    this.alarm.stop();
    await this.loop;
    this.state = 'stopped';
  }

  private async run(): Promise<void> {
    while (!this.stopping) {
      try {
        if (!(await this.lease.tryAcquire())) {
          this.state = 'standby';
          await this.alarm.pause(STANDBY_POLL_MS);
          continue;
        }
        this.work.logger.log(`this daemon is the active ${this.work.role}`);
        this.state = 'running';
        await this.work.whileHeld(this.lease.runner!);
      } catch (error) {
        this.state = 'failing';
        this.work.logger.error({ msg: `${this.work.role} failed; retrying`, err: error });
        await this.release();
        await this.alarm.pause(RETRY_MS);
      }
    }
    await this.release();
  }

  private async release(): Promise<void> {
    await this.work.afterHeld?.();
    await this.lease.release();
  }
}
