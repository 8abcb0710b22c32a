/** Jest in ESM mode: NestJS 12 packages are ESM-only. Run through `npm test`. */
import { fileURLToPath } from 'node:url';

const rootDir = fileURLToPath(new URL('..', import.meta.url));

const common = {
  rootDir,
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: { '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: `${rootDir}/tsconfig.json` }] },
  // Framework log lines show under a failing test only (config/jest-environment.js).
  testEnvironment: '<rootDir>/config/jest-environment.js',
  setupFilesAfterEnv: ['<rootDir>/test/support/quiet-logs.ts'],
};

export default {
  rootDir,
  testTimeout: 60000,
  maxWorkers: 2,
  // No test leaves a handle open (each worker's event loop is empty soon after jest's end message),
  // but on a loaded machine the worker process can take longer than jest-worker's 500 ms default to
  // terminate, and jest warned "failed to exit gracefully". A real leak
  // still shows: a worker with an open handle never exits by itself.
  workerGracefulExitTimeout: 5000,
  projects: [
    { ...common, displayName: 'unit', testMatch: ['<rootDir>/src/**/*.spec.ts'] },
    { ...common, displayName: 'int', testMatch: ['<rootDir>/src/**/*.int-spec.ts', '<rootDir>/test/**/*.int-spec.ts'] },
    { ...common, displayName: 'e2e', testMatch: ['<rootDir>/test/**/*.e2e-spec.ts'] },
  ],
};
