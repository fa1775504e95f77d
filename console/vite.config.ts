// Builds the owner console (Preact, JSX through Vite's own transform: no plugin) into console/dist,
// which the server serves at /console. No CDN: every byte ships from this service.
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/console/',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: false, target: 'es2022' },
  logLevel: 'warn',
});
