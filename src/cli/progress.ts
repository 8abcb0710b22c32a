import { Logger } from '@nestjs/common';
import cliProgress from 'cli-progress';
import type { RebuildProgress } from '../replay/rebuild.service.js';

const LOG_EVERY_MS = 5000;

/** A progress bar (events/s, ETA) on a terminal; a log line every few seconds otherwise. */
export function progressReporter(logger: Logger): { update: (progress: RebuildProgress) => void; stop: () => void } {
  const started = Date.now();
  if (process.stderr.isTTY) {
    const bar = new cliProgress.SingleBar(
      {
        format:
          '{projection} {phase} [{bar}] {percentage}% | {value}/{total} events | {speed} events/s | ETA {eta_formatted}',
        stream: process.stderr,
        hideCursor: true,
      },
      cliProgress.Presets.shades_classic,
    );
    let running = false;
    return {
      update: (progress) => {
        const speed = Math.round(progress.applied / Math.max((Date.now() - started) / 1000, 0.001));
        const payload = { projection: progress.projection, phase: progress.phase, speed };
        if (!running) {
          bar.start(progress.total, progress.applied, payload);
          running = true;
        }
        bar.setTotal(Math.max(progress.total, 1));
        bar.update(progress.applied, payload);
      },
      stop: () => bar.stop(),
    };
  }
  let last = 0;
  return {
    update: (progress) => {
      if (Date.now() - last < LOG_EVERY_MS && progress.phase === 'rebuilding') return;
      last = Date.now();
      const seconds = (Date.now() - started) / 1000;
      const rate = progress.applied / Math.max(seconds, 0.001);
      const eta = rate > 0 ? Math.round((progress.total - progress.applied) / rate) : null;
      logger.log({
        msg: `${progress.projection}: ${progress.phase}`,
        applied: progress.applied,
        total: progress.total,
        eventsPerSecond: Math.round(rate),
        etaSeconds: eta,
      });
    },
    stop: () => undefined,
  };
}
