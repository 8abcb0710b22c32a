import type { SchedulerRegistry } from '@nestjs/schedule';
import type { AppConfig } from '../config/app-config.js';
import type { ReconcileRun } from './reconcile-report.js';
import { ReconcileScheduler } from './reconcile.scheduler.js';
import type { ReconcileService } from './reconcile.service.js';

/** A reconcile service whose runs finish when the test says so. */
function slowService() {
  const started: Array<{ trigger: string; finish: () => void }> = [];
  const service = {
    run: (trigger: string) =>
      new Promise<ReconcileRun>((resolve) => {
        started.push({ trigger, finish: () => resolve({ id: started.length, trigger } as ReconcileRun) });
      }),
  };
  return { service: service as unknown as ReconcileService, started };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('ReconcileScheduler', () => {
  it('given a scheduled run waiting behind a long run, when the schedule ticks again, then the tick is dropped', async () => {
    const { service, started } = slowService();
    const scheduler = new ReconcileScheduler(service, {} as SchedulerRegistry, {} as AppConfig);

    const first = scheduler.onSchedule();
    await settle();
    expect(started.map((run) => run.trigger)).toEqual(['schedule']);
    // The first run is going: the next tick queues one run, and further ticks add nothing.
    const second = scheduler.onSchedule();
    expect(second).toBeDefined();
    expect(scheduler.onSchedule()).toBeUndefined();
    expect(scheduler.onSchedule()).toBeUndefined();
    // A connection's run still queues.
    const connected = scheduler.enqueue('connection', { connectionId: 1 });

    started[0].finish();
    expect(await first).toMatchObject({ trigger: 'schedule' });
    await settle();
    expect(started.map((run) => run.trigger)).toEqual(['schedule', 'schedule']);
    // Once the queued scheduled run has started, a tick queues again.
    expect(scheduler.onSchedule()).toBeDefined();
    started[1].finish();
    expect(await second).toMatchObject({ trigger: 'schedule' });
    await settle();
    started[2].finish();
    expect(await connected).toMatchObject({ trigger: 'connection' });
    await settle();
    started[3].finish();
    await settle();
    expect(started.map((run) => run.trigger)).toEqual(['schedule', 'schedule', 'connection', 'schedule']);
  });
});
