import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { openSession } from '../database/database-sessions.js';
import { PROJECTIONS } from '../projection/projection-definitions.js';
import { PROJECTOR_LOCK } from '../projection/projector.service.js';
import { ProjectionRepository } from '../projection/projection.repository.js';
import { ProjectionStatusRepository } from '../projection/projection-status.repository.js';

const CATCH_UP_TIMEOUT_MS = 30_000;
const POLL_MS = 100;

/**
 * Reconcile's first step: wait until every projection has read the whole log (the projector may
 * run in this daemon or another), so the comparison sees every delivered event; then apply the
 * parked events again. Returns what the report should say: errors (a projection still behind)
 * and notes (events that stay parked).
 */
@Injectable()
export class ProjectionCatchUp {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly projections: ProjectionRepository,
    private readonly statuses: ProjectionStatusRepository,
  ) {}

  async catchUpAndRetryParked(timeoutMs = CATCH_UP_TIMEOUT_MS): Promise<{ errors: string[]; notes: string[] }> {
    const errors: string[] = [];
    const notes: string[] = [];
    // Some daemon on this database projects: worth waiting for (a command alone waits for nobody).
    const deadline = (await this.statuses.advisoryLockHeld(PROJECTOR_LOCK)) ? Date.now() + timeoutMs : Date.now();
    for (const projection of PROJECTIONS) {
      let lag = await this.lag(projection);
      while (lag > 0 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, POLL_MS));
        lag = await this.lag(projection);
      }
      if (lag > 0)
        errors.push(`projection ${projection.name} is ${lag} events behind the log; compared with what it has`);
    }
    // A session of its own: a retried page runs as a prepared statement (ProjectionRepository.applyRange).
    const runner = await openSession(this.dataSource);
    try {
      for (const projection of PROJECTIONS) {
        const { retried, released } = await this.projections.retryParked(runner, projection);
        if (retried > 0)
          notes.push(`projection ${projection.name}: ${released} of ${retried} parked event(s) applied on retry`);
      }
    } finally {
      await runner.release();
    }
    return { errors, notes };
  }

  private async lag(projection: (typeof PROJECTIONS)[number]): Promise<number> {
    return this.statuses.lag((await this.statuses.status(projection)).checkpoint);
  }
}
