// Vite config for the gpufleet dashboard. Preact's JSX runtime is configured directly (oxc), without
// @preact/preset-vite: the preset pulls in Babel (~40 packages) for HMR and React aliasing we do not use.
// `npm run dev` proxies the API to an agent (or web/dev/mock-server.mjs) at GF_AGENT, default 127.0.0.1:9401.
import { defineConfig } from 'vite';

const agent = process.env.GF_AGENT ?? 'http://127.0.0.1:9401';

export default defineConfig({
  base: './',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    // One JS and one CSS file; no source maps shipped to the agent's static root.
    sourcemap: false,
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
  },
  server: {
    proxy: {
      '/api': agent,
      // The agent accepts a WebSocket only from its own origin: present the agent's.
      '/ws': { target: agent.replace(/^http/, 'ws'), ws: true, headers: { origin: agent } },
    },
  },
});
