import { Logger } from '@nestjs/common';
import cliProgress from 'cli-progress';
import type { RebuildProgress } from '../replay/rebuild.service.js';

const LOG_EVERY_MS = 5000;

export interface ProgressReporter {
  update: (progress: RebuildProgress) => void;
  stop: () => void;
}

/**
 * A progress bar per projection (events/s, ETA) on a terminal; a log line every few seconds per
 * projection otherwise. The projections may be rebuilt at the same time.
 */
export function progressReporter(logger: Logger): ProgressReporter {
  return process.stderr.isTTY ? progressBars() : progressLines(logger);
}

function progressBars(): ProgressReporter {
  const bars = new cliProgress.MultiBar(
    {
      format:
        '{projection} {phase} [{bar}] {percentage}% | {value}/{total} events | {speed} events/s | ETA {eta_formatted}',
      stream: process.stderr,
      hideCursor: true,
    },
    cliProgress.Presets.shades_classic,
  );
  const started = new Map<string, { at: number; bar: cliProgress.SingleBar }>();
  return {
    update: (progress) => {
      let entry = started.get(progress.projection);
      if (entry === undefined) {
        entry = { at: Date.now(), bar: bars.create(Math.max(progress.total, 1), progress.applied) };
        started.set(progress.projection, entry);
      }
      const speed = Math.round(progress.applied / Math.max((Date.now() - entry.at) / 1000, 0.001));
      entry.bar.setTotal(Math.max(progress.total, 1));
      entry.bar.update(progress.applied, { projection: progress.projection, phase: progress.phase, speed });
    },
    stop: () => bars.stop(),
  };
}

function progressLines(logger: Logger): ProgressReporter {
  const started = Date.now();
  const last = new Map<string, number>();
  return {
    update: (progress) => {
      if (Date.now() - (last.get(progress.projection) ?? 0) < LOG_EVERY_MS && progress.phase === 'rebuilding') return;
      last.set(progress.projection, Date.now());
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
