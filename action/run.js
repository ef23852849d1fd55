// The part of the Action's two steps that is the same: the runner gives a
// JavaScript action its inputs as INPUT_<NAME> (the name upper-cased,
// hyphens kept: actions/runner, Handler.AddInputsToEnvironment), which a
// shell cannot read while the name has a hyphen, so each goes to bash as
// HWK_INPUT_<NAME> with underscores. Bash does the work; Node.js is only
// here because a post step needs a JavaScript (or container) action.
'use strict';

const { spawnSync } = require('node:child_process');
const path = require('node:path');

function scriptEnv(extra) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k.startsWith('INPUT_')) {
      // The token stays in this process: nothing the scripts run needs it.
      if (k !== 'INPUT_GITHUB-TOKEN') {
        env['HWK_INPUT_' + k.slice('INPUT_'.length).replace(/-/g, '_')] = v;
      }
    } else {
      env[k] = v;
    }
  }
  env.HWK_ACTION_DIR = path.resolve(__dirname, '..');
  // The Node.js running this step, for action/cache.js: the runner's own,
  // which need not be on PATH.
  env.HWK_NODE = process.execPath;
  return { ...env, ...extra };
}

// runScript runs action/NAME with bash and returns its exit status (1 when
// it could not start or was killed by a signal).
function runScript(name, extra = {}) {
  const r = spawnSync('bash', [path.join(__dirname, name)], { stdio: 'inherit', env: scriptEnv(extra) });
  if (r.error) {
    console.log(`::error title=hwk::cannot run ${name}: ${r.error.message}`);
    return 1;
  }
  if (r.status === null) {
    console.log(`::error title=hwk::${name} was killed by ${r.signal}`);
    return 1;
  }
  return r.status;
}

module.exports = { runScript };
