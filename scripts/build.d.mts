// Types of scripts/build.mjs, for the TypeScript that imports it (the browser tests' fixture build).
import type { Plugin } from 'esbuild'

/** Packages never bundled (peers and the server's CommonJS dependencies). */
export declare const EXTERNAL: readonly string[]
/** Swaps `scenario-files.ts` for its browser stand-in. */
export declare const browserFiles: Plugin
/** Builds dist/ (ESM for Node.js, ESM for browsers, CommonJS), without the types. */
export declare function buildJavaScript(): Promise<void>
/** Whether dist/ is missing or older than a file of src/. */
export declare function distIsStale(): Promise<boolean>
/** Builds the JavaScript when {@link distIsStale}, saying so (and why) on stderr. */
export declare function buildIfStale(): Promise<void>
