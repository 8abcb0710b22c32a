import type { LoggerService } from '@nestjs/common';

/**
 * Resolves on the first SIGTERM or SIGINT. Listening starts at once, so a signal arriving while a
 * long-running command is still starting up stops it as soon as it is up.
 */
export function untilSignalled(logger: LoggerService): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const onSignal = (signal: NodeJS.Signals) => {
      logger.log(`${signal} received: shutting down`);
      process.removeListener('SIGTERM', onSignal);
      process.removeListener('SIGINT', onSignal);
      resolve(signal);
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });
}
