import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

/** The operator's console: built into dist/console, served by the daemon under /console/. */
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/console/',
  logLevel: 'warn',
  build: {
    outDir: fileURLToPath(new URL('../dist/console', import.meta.url)),
    emptyOutDir: true,
    assetsInlineLimit: 0,
    chunkSizeWarningLimit: 200,
  },
});
