// The source of action/cache.js, which action/up.sh runs to keep the Linux
// node image it built in the Actions cache:
//
//   node cache.js restore KEY PATH   exit 0: restored; 10: no entry for KEY
//   node cache.js save KEY PATH      exit 0: saved
//   either                           exit 11: no cache service here
//                                    exit 1:  it failed (said on stderr)
//
// A JavaScript action cannot `uses:` actions/cache, so this calls the
// library that action is built on. It is bundled with its dependencies
// into one committed file because an action runs from its checkout, where
// no npm install happens. The library picks the cache service from the
// environment the runner gives a step: the v2 service when
// ACTIONS_CACHE_SERVICE_V2 is set (GitHub sets it), else the v1 REST API
// at ACTIONS_CACHE_URL (which nektos/act serves).
import * as cache from '@actions/cache';
import path from 'node:path';

async function main(argv) {
  const [op, key, file] = argv;
  if (!['restore', 'save'].includes(op) || !key || !file || argv.length !== 3) {
    console.error('usage: cache.js restore|save KEY PATH');
    return 2;
  }
  if (!cache.isFeatureAvailable()) {
    console.log('the Actions cache service is not available to this step (no ACTIONS_CACHE_URL or ACTIONS_RESULTS_URL)');
    return 11;
  }
  // An entry's version is a hash of the paths exactly as given, and its
  // files are stored relative to GITHUB_WORKSPACE: so the file is named
  // relative to its own directory, made the workspace. Given in full, a
  // runner whose RUNNER_TEMP is elsewhere (another self-hosted runner, each
  // run under act) would never find what another one saved.
  const dir = path.dirname(path.resolve(file));
  process.chdir(dir);
  process.env.GITHUB_WORKSPACE = dir;
  const paths = [path.basename(file)];
  try {
    if (op === 'restore') {
      // Only KEY itself: an image of another hwk or Kubernetes version
      // is no use, so no restore-keys prefixes. A restore that fails
      // (network, a corrupt entry) is logged as a warning and reads as
      // no entry: up.sh then builds the image.
      const hit = await cache.restoreCache(paths, key);
      return hit ? 0 : 10;
    }
    // saveCache logs why it did not save (another job saving the same
    // key, a full cache) and returns -1 rather than throwing.
    const id = await cache.saveCache(paths, key);
    return id === -1 ? 1 : 0;
  } catch (err) {
    console.error(`${op} of cache entry ${key} failed: ${err.message}`);
    return 1;
  }
}

main(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
});
