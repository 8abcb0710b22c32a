import { Injectable } from '@nestjs/common';

/**
 * What else must work for /health/ready to answer 200, registered by the rooms above this one
 * (ingress: an append) so that readiness never reports a process that cannot do its work.
 */
@Injectable()
export class ReadinessChecks {
  private readonly checks = new Map<string, () => Promise<unknown>>();

  /** `check` rejects when the process is not ready; `what` names it in the health answer ("an append"). */
  add(what: string, check: () => Promise<unknown>): void {
    this.checks.set(what, check);
  }

  /** The names of the checks that failed, in the order they were added. */
  async failing(): Promise<string[]> {
    const entries = [...this.checks];
    const results = await Promise.allSettled(entries.map(([, check]) => check()));
    return entries.filter((_, i) => results[i].status === 'rejected').map(([what]) => what);
  }
}
