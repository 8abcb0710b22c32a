import type { Logger as Pino } from 'pino';

/** The root logger, provided to commands under this token. */
export const ROOT_LOGGER = Symbol('ROOT_LOGGER');
export type RootLogger = Pino;
