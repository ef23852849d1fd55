// esbuild injects this into the CommonJS bundle, where import.meta does not
// exist, for the dependencies that call createRequire(import.meta.url).
export const importMetaUrl = require('node:url').pathToFileURL(__filename).href;
